"""Operator actions: what a person (or a tool acting for one) may do to a stored run.

The CLI (``planrail approve/refuse/cancel/resolve``), the dashboard and the MCP server all call
these functions; none of them writes the store itself. Each action

- refuses to touch a run another runner is driving (a live lease), except :func:`cancel`, which
  asks that runner to stop and lets it record the cancellation itself;
- appends an ``operator_action`` event (``action``, ``by``, details) in the same transaction as
  its change;
- keeps secrets out of what it writes (outputs given to :func:`resolve` are redacted like the
  run's own records).

Resuming is not here: :func:`planrail.runs.resume` builds the run through the one run path.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from planrail.clock import SYSTEM_CLOCK
from planrail.engine.approval import ApprovalRequiredError, approval_record
from planrail.engine.gate import check_current
from planrail.engine.lease import RunBusyError
from planrail.engine.owners import owner_gone
from planrail.errors import ExecutionError, ReferenceResolutionError, error_dict
from planrail.plan.first import compile_args
from planrail.plan.model import Plan, Step
from planrail.plan.secrets import Redactor
from planrail.plan.strict_json import odd_value, surrogate_problem
from planrail.plan.tools import ToolRegistry
from planrail.store.base import Event, RunNotFoundError, RunRecord, StepRecord, Store
from planrail.types import Clock, StepStatus

__all__ = [
    "OperationError",
    "approve",
    "cancel",
    "check_resumable",
    "refuse",
    "resolve",
    "retry_step",
]

S = StepStatus
Decision = Literal["succeeded", "failed", "retry"]


class OperationError(ExecutionError):
    """The action does not apply to the run as it is (wrong status, unknown step, ...)."""

    code = "invalid_operation"


def approve(
    store: Store, run_id: str, *, by: str = "operator", clock: Clock = SYSTEM_CLOCK
) -> RunRecord:
    """Approve a run stored ``awaiting_approval``: its approval is bound to the stored plan's
    hash, and ``planrail resume`` (or :func:`planrail.runs.resume`) runs it.

    A run a replan replaced is refused (:class:`~planrail.engine.gate.RunReplannedError`, naming
    the version that carries its work on): no resume runs it, so an approval would bind
    nothing. Refusing it is allowed — it only closes the request."""
    run = _idle_run(store, run_id, clock)
    _expect(run, {"awaiting_approval"}, "approve")
    check_current(run)
    now = clock.now()
    pins = run.metadata.get("tool_schemas")
    extra = {"tool_schemas": pins} if isinstance(pins, dict) and pins else {}
    record = approval_record(run.plan_hash, by, now, via="operator action", **extra)
    updated = dataclasses.replace(
        run, approval=record, status="pending", error=None, updated_at=now
    )
    store.commit(run=updated, events=[_event(run_id, now, "approve", by, plan_hash=run.plan_hash)])
    return updated


def refuse(
    store: Store,
    run_id: str,
    *,
    by: str = "operator",
    reason: str = "refused by an operator",
    clock: Clock = SYSTEM_CLOCK,
) -> RunRecord:
    """Refuse a run waiting for approval: it ends ``cancelled``; nothing of it ever runs."""
    run = _idle_run(store, run_id, clock)
    _expect(run, {"awaiting_approval"}, "refuse")
    now = clock.now()
    error = error_dict("ApprovalRefused", f"approval refused by {by}: {reason}")
    updated = dataclasses.replace(run, status="cancelled", error=error, updated_at=now)
    store.commit(run=updated, events=[_event(run_id, now, "refuse", by, reason=reason)])
    return updated


def cancel(
    store: Store,
    run_id: str,
    *,
    by: str = "operator",
    reason: str = "cancelled by an operator",
    clock: Clock = SYSTEM_CLOCK,
) -> Literal["requested", "cancelled"]:
    """Cancel a run, from any process.

    A run being driven (its lease is live) is asked to stop: ``requested``; its runner cancels
    what is in flight within a second — steps whose call was under way and whose tool does not
    honour idempotency keys become ``in_doubt``, the others are run again with the same key on
    resume. A run nobody drives is marked ``cancelled`` at once.
    """
    run = _run(store, run_id)
    _expect(run, {"pending", "running", "awaiting_approval"}, "cancel")
    now = clock.now()
    request = Event(
        run_id=run_id, type="cancel_requested", at=now, data={"by": by, "reason": reason}
    )
    lease = store.get_lease(run_id)
    if lease is not None and lease.expires_at > now and not owner_gone(lease.owner):
        store.commit(events=[request, _event(run_id, now, "cancel", by, reason=reason)])
        return "requested"
    error = error_dict("RunCancelled", f"cancelled by {by}: {reason}")
    updated = dataclasses.replace(run, status="cancelled", error=error, updated_at=now)
    store.commit(run=updated, events=[request, _event(run_id, now, "cancel", by, reason=reason)])
    return "cancelled"


def resolve(
    store: Store,
    run_id: str,
    step_id: str,
    decision: Decision,
    *,
    output: Any = None,
    item: int | None = None,
    by: str = "operator",
    registry: ToolRegistry | None = None,
    clock: Clock = SYSTEM_CLOCK,
) -> None:
    """Decide an ``in_doubt`` step: its call did happen (``succeeded``, with ``output``), it
    failed for good (``failed``), or it did not happen and may run again (``retry``).

    With ``item``, decide one in-doubt item of a ``for_each`` step (one that started and was
    not recorded as succeeded): ``succeeded`` keeps ``output`` as that item's (a resume does
    not call it), ``failed``/``retry`` let a resume call it again. The step stays ``in_doubt``
    until every such item is decided, then becomes ``pending`` (``failed`` if an item was
    decided so); a resume then runs only the items not recorded as succeeded."""
    if decision not in ("succeeded", "failed", "retry"):
        raise OperationError(f"decision must be succeeded, failed or retry, not {decision!r}")
    if output is not None and decision != "succeeded":
        raise OperationError("an output goes with the decision 'succeeded' only")
    odd = odd_value(output)
    if odd is not None:  # what a tool's output could not hold either (plan/strict_json.py)
        raise OperationError(f"the output is not strict JSON: {odd}", run_id=run_id)
    run = _current_idle_run(store, run_id, clock)
    records = store.get_steps(run_id)
    record = records.get(step_id)
    if record is None and step_id not in _step_ids(run):
        raise OperationError(f"run '{run_id}' has no step '{step_id}'", run_id=run_id)
    if record is None or record.status not in (S.IN_DOUBT, S.RUNNING):
        state = record.status if record is not None else "not started"
        raise OperationError(f"step '{step_id}' is {state}, not in doubt", run_id=run_id)
    now = clock.now()
    plan = _stored_plan(run)
    redactor = None if plan is None else Redactor.for_plan(plan, registry or ToolRegistry())
    if item is not None:
        if plan is None:
            raise OperationError(
                f"the stored plan of run '{run_id}' does not validate any more, so its for_each"
                f" items cannot be told apart: decide step '{step_id}' as a whole (no item)",
                run_id=run_id,
            )
        step = plan.by_id.get(step_id)
        _resolve_item(store, run, step, records, record, item, decision, output, by, redactor, now)
        return
    status = {"succeeded": S.SUCCEEDED, "failed": S.FAILED, "retry": S.PENDING}[decision]
    kept = output if redactor is None else redactor.output(step_id, output)
    decided = dataclasses.replace(
        record,
        status=status,
        output=kept if decision == "succeeded" else None,
        finished_at=now if decision != "retry" else None,
        error=error_dict("ResolvedFailed", f"resolved by {by}: failed")
        if decision == "failed"
        else None,
        reason=f"resolved by {by}: {decision}",
        metadata={**record.metadata, "resolved": {"at": now, "decision": decision, "by": by}},
    )
    store.commit(
        steps=[decided],
        events=[_event(run_id, now, "resolve", by, step=step_id, decision=decision)],
    )


def _resolve_item(
    store: Store,
    run: RunRecord,
    step: Step | None,
    records: dict[str, StepRecord],
    record: StepRecord,
    item: int,
    decision: Decision,
    output: Any,
    by: str,
    redactor: Redactor | None,
    now: float,
) -> None:
    """One in-doubt item of a fan-out step decided (see :func:`resolve`)."""
    step_id, run_id = record.step_id, run.run_id
    if step is None or step.for_each is None:
        raise OperationError(
            f"step '{step_id}' is not a for_each fan-out: decide it as a whole (no item)",
            run_id=run_id,
        )
    kept: dict[str, Any] = dict(record.metadata.get("items") or {})
    decided: dict[str, str] = dict(record.metadata.get("decided_items") or {})
    doubtful = _items_in_doubt(store, run_id, step_id, kept, decided)
    if item not in doubtful:
        state = (
            "succeeded"
            if str(item) in kept
            else f"decided already ({decided[str(item)]})"
            if str(item) in decided
            else "not started (a resume runs it)"
        )
        listed = ", ".join(map(str, sorted(doubtful))) or "none"
        raise OperationError(
            f"item {item} of step '{step_id}' is {state}, not in doubt (in doubt: {listed})",
            run_id=run_id,
        )
    if decision == "succeeded":
        value = _item_value(records, run, step, item)
        kept[str(item)] = {
            "item": value,
            "output": output if redactor is None else redactor.output(step_id, output),
        }
    else:
        decided[str(item)] = decision
    left = sorted(doubtful - {item})
    if left:
        status, reason = S.IN_DOUBT, f"item(s) {', '.join(map(str, left))} still in doubt"
    elif "failed" in decided.values():
        status, reason = S.FAILED, f"resolved by {by}: item(s) failed"
    else:
        status, reason = S.PENDING, f"resolved by {by}: its in-doubt items decided"
    decided_now = dataclasses.replace(
        record,
        status=status,
        finished_at=now if status == S.FAILED else record.finished_at,
        error=error_dict("ResolvedFailed", reason) if status == S.FAILED else record.error,
        reason=reason,
        metadata={
            **record.metadata,
            "items": kept,
            "decided_items": decided,
            "resolved": {"at": now, "decision": decision, "by": by, "item": item},
        },
    )
    store.commit(
        steps=[decided_now],
        events=[_event(run_id, now, "resolve", by, step=step_id, item=item, decision=decision)],
    )


def _items_in_doubt(
    store: Store, run_id: str, step_id: str, kept: dict[str, Any], decided: dict[str, str]
) -> set[int]:
    """Items of a fan-out whose call started (an intent ``STEP:i`` is recorded) and that are
    neither recorded as succeeded nor decided yet."""
    started = set()
    for intent in store.intents(run_id):
        sid, _, index = intent.step_key.rpartition(":")
        if sid == step_id and index.isdigit():
            started.add(int(index))
    return {i for i in started if str(i) not in kept and str(i) not in decided}


def _item_value(records: dict[str, StepRecord], run: RunRecord, step: Step, item: int) -> Any:
    """The ``for_each`` list's item ``item``, resolved from the stored outputs (a resume keeps
    a decided item only while its value is the same)."""
    outputs = {sid: rec.output for sid, rec in records.items() if rec.status == S.SUCCEEDED}
    try:
        items = compile_args(step.for_each)(outputs)
    except (ReferenceResolutionError, ValueError) as exc:
        raise OperationError(
            f"the for_each list of step '{step.id}' cannot be resolved from the stored outputs:"
            f" {exc}",
            run_id=run.run_id,
        ) from None
    if type(items) is not list or not 0 <= item < len(items):
        raise OperationError(
            f"step '{step.id}' has no item {item} in its for_each list", run_id=run.run_id
        )
    return items[item]


def retry_step(
    store: Store, run_id: str, step_id: str, *, by: str = "operator", clock: Clock = SYSTEM_CLOCK
) -> None:
    """Make a failed step run again on the next resume (with its same idempotency key); the
    steps skipped because of it run again too."""
    run = _current_idle_run(store, run_id, clock)
    records = store.get_steps(run_id)
    record = records.get(step_id)
    if record is None and step_id not in _step_ids(run):
        raise OperationError(f"run '{run_id}' has no step '{step_id}'", run_id=run_id)
    if record is None or record.status != S.FAILED:
        state = record.status if record is not None else "not started"
        raise OperationError(f"step '{step_id}' is {state}, not failed", run_id=run_id)
    now = clock.now()
    again = dataclasses.replace(
        record,
        status=S.PENDING,
        finished_at=None,
        reason=f"retry asked by {by}",
        metadata={**record.metadata, "retried": {"at": now, "by": by}},
    )
    reopened = dataclasses.replace(run, status="failed", updated_at=now)
    store.commit(
        run=reopened, steps=[again], events=[_event(run_id, now, "retry", by, step=step_id)]
    )


# ---------------------------------------------------------------- helpers


def _run(store: Store, run_id: str) -> RunRecord:
    run = store.get_run(run_id)
    if run is None:
        raise RunNotFoundError(f"no run '{run_id}' in this store", run_id=run_id)
    return run


def check_resumable(store: Store, run_id: str, clock: Clock = SYSTEM_CLOCK) -> RunRecord:
    """The run, if a resume with nobody to ask may start it now: what a dashboard checks
    before it answers that a resume started. :class:`RunNotFoundError` if there is no such run,
    :class:`RunBusyError` at once if a live runner holds it (a resume would wait for the lease),
    :class:`ApprovalRefusedError` / :class:`RunReplannedError` if it may never run again
    (:func:`gate.check_current`), and :class:`ApprovalRequiredError` if it waits for an
    approval."""
    run = _current_idle_run(store, run_id, clock)
    if run.status == "awaiting_approval" and run.approval is None:
        raise ApprovalRequiredError(
            f"run '{run_id}' waits for approval, and a resume here has no approver to ask:"
            " approve it first",
            run_id=run_id,
        )
    return run


def _idle_run(store: Store, run_id: str, clock: Clock) -> RunRecord:
    """The run, if no live runner holds it (an action must not race the runner); the lease of
    a runner that died on this host holds nothing (:mod:`planrail.engine.owners`)."""
    run = _run(store, run_id)
    lease = store.get_lease(run_id)
    now = clock.now()
    if lease is not None and lease.expires_at > now and not owner_gone(lease.owner):
        raise RunBusyError(
            f"run '{run_id}' is being run by {lease.owner} (lease for another"
            f" {lease.expires_at - now:.0f}s): cancel it first, or wait for it to stop",
            run_id=run_id,
        )
    return run


def _current_idle_run(store: Store, run_id: str, clock: Clock) -> RunRecord:
    """The run, idle, if it may run again: what a step decided now is for its next resume, and
    a run refused or replaced by a replan has none (:func:`gate.check_current`)."""
    run = _idle_run(store, run_id, clock)
    check_current(run)
    return run


def _expect(run: RunRecord, statuses: set[str], action: str) -> None:
    if run.status not in statuses:
        raise OperationError(
            f"cannot {action} run '{run.run_id}': it is {run.status}", run_id=run.run_id
        )


def _event(run_id: str, at: float, action: str, by: str, **details: Any) -> Event:
    """The ``operator_action`` event every action commits (built before anything is written:
    text that no store could keep — a lone surrogate, from undecodable command-line bytes —
    is refused here, for every action and every way in)."""
    for name, value in (("by", by), *details.items()):
        problem = surrogate_problem(value) if isinstance(value, str) else None
        if problem is not None:
            raise OperationError(f"the {name} given {problem}", run_id=run_id)
    return Event(
        run_id=run_id,
        type="operator_action",
        at=at,
        step_id=details.get("step"),
        data={"action": action, "by": by, **details},
    )


def _step_ids(run: RunRecord) -> set[str]:
    """The ids of the steps of the run's stored plan (as stored: nothing validated)."""
    steps = run.plan.get("steps") if isinstance(run.plan, dict) else None
    if not isinstance(steps, list):
        return set()
    return {str(s.get("id")) for s in steps if isinstance(s, dict)}


def _stored_plan(run: RunRecord) -> Plan | None:
    """The run's stored plan, or None when it does not validate any more (a newer planrail
    may check more than the one that stored it)."""
    try:
        return Plan.model_validate(run.plan)
    except ValueError:
        return None
