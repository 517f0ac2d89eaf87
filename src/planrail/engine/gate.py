"""The gate every run passes before its first step (see ``docs/architecture.md``).

An approval the run holds must be for the plan as it is now (its hash recomputed from the
content); a run that needs one asks its approver; a run found in the store brings back the
approval and the policies it started with. These are the :class:`~planrail.Execution`'s own
steps, kept in a module of their own; they read and set the execution's state.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from planrail.engine.approval import (
    ApprovalRequiredError,
    approval_record,
    ask,
    label_of,
)
from planrail.engine.call_guard import CallGuard
from planrail.engine.checkpoint import PolicyMismatchError, check_same_plan
from planrail.engine.events import EventType
from planrail.errors import ApprovalRefusedError, ExecutionError
from planrail.plan.effects import Effect, effects_of, needing_approval, step_effect
from planrail.plan.model import Plan
from planrail.plan.tools import ToolRegistry
from planrail.policies.limits import RunPolicy
from planrail.policies.security import SecurityPolicy, check_approval
from planrail.store.base import RunRecord, Store
from planrail.types import StepStatus

if TYPE_CHECKING:
    from planrail.engine.executor import Execution

__all__ = [
    "APPROVAL_STEPS",
    "BUDGET",
    "REPLACES",
    "REPLANNED_AS",
    "SCHEMAS",
    "RunReplannedError",
    "adopt",
    "approval_needed",
    "approve_and_seal",
    "bind_schemas",
    "check_current",
    "gate",
    "mark_replanned",
    "policies",
    "replaced_by",
    "replaced_note",
    "replaces_of",
    "resumes_under",
    "schema_pins",
    "stored_width",
]

SCHEMAS = "tool_schemas"
"""The approval record's key for the schema hash of each tool the approved plan uses."""

APPROVAL_STEPS = "approval_steps"
"""The stored policies' key for the steps the run's approval policy named beyond those
:mod:`planrail.plan.effects` names: a resume, which is given no approval policy, asks about
them too."""

EXECUTION = "execution"
"""The stored policies' key for how the run runs: its ``max_concurrency`` and
``failure_mode`` when they are not the defaults."""

BUDGET = "budget"
"""The stored policies' key for the run's LLM budget (``planrail.runs.budget`` reads it)."""

ApprovalPolicy = Callable[[Plan, ToolRegistry], Iterable[str]]

E = EventType
S = StepStatus


async def approve_and_seal(ex: Execution, plan: Plan) -> bool:
    """:meth:`Execution.approve_and_seal`: the gate for an open plan once it is whole."""
    before, ex.plan, ex._sealed = ex.plan, plan, True
    answer: bool | None = True
    try:
        for step in plan.steps:
            if step.id not in ex._steps:
                ex.effects[step.id] = step_effect(step, ex.registry)
        needed = needed_for(ex, plan, effects_of(plan.steps, ex.registry))
        if needed and ex.approval is None:
            answer = await decide(ex, needed)
    finally:
        ex.plan, ex._sealed = before, False
    if not answer:
        await _stop_unapproved(ex, plan, needed, answer)
        return False
    if ex.approval is None:
        ex.approval = approval_record(plan.hash, "not required", ex.clock.now())
    # The run's record is made now, with the whole plan (and the read-only steps that ran
    # while it streamed), before any step it held starts; a run sealed before it started
    # makes it as it starts. One that cannot be made (another runner holds the run) raises
    # here: nothing held has started.
    if ex.store is not None and ex._ckpt is None and ex._started:
        ex.plan = plan
        await ex._open_checkpoint()
        _mark_ran(ex)
        ex._emit(E.RUN_APPROVED, data={**ex.approval, "resumed": False})
        ex._track_progress()
        ex._start_background()
    ex.seal(plan)
    return True


async def _stop_unapproved(
    ex: Execution, plan: Plan, needed: list[str], answer: bool | None
) -> None:
    """A streamed plan not approved once whole ends as a sealed one does at :func:`gate`:
    with a store, recorded ``awaiting_approval`` with the whole plan — an operator may approve
    it, and its resume starts after the read-only steps that finished while it streamed (those
    still running are cancelled: they changed nothing); a deferral without a store is refused.
    The caller then cancels the runner, which finds the run ended."""
    error = _unapproved(ex, needed, answer)
    if ex.store is None:
        return
    await ex._cancel_all("stopped: the plan was not approved")
    ex.plan = plan
    if ex._ckpt is None:
        await ex._open_checkpoint()
    _mark_ran(ex)
    ex.status, ex.error = "awaiting_approval", error
    ex._emit(E.RUN_FINISHED, data={"status": ex.status, "error": ex.error})
    ex._save_final()


def _mark_ran(ex: Execution) -> None:
    """The steps that ran before the record was made are written with its next commit."""
    ex._dirty.update(sid for sid, r in ex.results.items() if r.status != S.PENDING)


def _unapproved(ex: Execution, needed: list[str], answer: bool | None) -> str:
    """Why a run whose approver answered ``answer`` (no or later) does not start; a deferral
    with no store to keep it in is :class:`ApprovalRequiredError`."""
    if answer is None and ex.store is None:
        raise ApprovalRequiredError(
            "the approver deferred the decision, but this run has no store to keep it in",
            run_id=ex.run_id,
        )
    if answer is None:
        return (
            f"waiting for approval of {', '.join(needed)}: `planrail approve {ex.run_id}`"
            " then `planrail resume`"
        )
    return "approval refused: nothing was executed"


def adopt(ex: Execution, stored: RunRecord, current: str) -> None:
    """A run found in the store brings its approval, the policies it started with and the
    run version it replaced (:data:`REPLACES`). It must have been stored with this plan as it is
    now (``current``: its :meth:`~planrail.Plan.fresh_hash`).

    Policies given here that differ from the stored ones are refused
    (:class:`PolicyMismatchError`) unless ``policy_override``, which is recorded as an
    event; a policy not given here is the stored one.
    """
    check_same_plan(stored, current)
    check_current(stored)
    if ex.approval is None and stored.approval is not None:
        ex.approval = dict(stored.approval)
    older = replaces_of(stored)
    if older is not None:  # a resume is given none: the run keeps the version it replaced
        ex._replaces = older
    saved = stored.metadata.get("policies")
    if not isinstance(saved, dict):
        return
    seen = saved.get("seen")
    if isinstance(seen, list) and not ex._seen:
        ex._seen = [s for s in seen if isinstance(s, str)]
    named = saved.get(APPROVAL_STEPS)
    if isinstance(named, list) and named:
        ex.approval_policy = also_asking(
            ex.approval_policy, [s for s in named if isinstance(s, str)]
        )
    _adopt_execution(ex, saved.get(EXECUTION))
    kept_security = saved.get("security")
    given = None if ex._security_given is None else ex._security_given.to_dict()
    if given is not None and given != kept_security:
        override(ex, "security", kept_security, given)  # refused unless policy_override
    ex.security = resumes_under(stored, ex._security_given, ex.policy_override)
    kept_run = saved.get("run")
    if ex._policy_given is None:
        if isinstance(kept_run, dict):
            ex.policy = RunPolicy.from_mapping(kept_run)
            if not ex._call_guard_given:  # the guard's settings are the stored policy's too
                ex.calls = CallGuard.for_policy(ex.policy)
    elif ex._policy_given.to_dict() != kept_run:
        override(ex, "run", kept_run, ex._policy_given.to_dict())


def resumes_under(
    stored: RunRecord, given: SecurityPolicy | None, policy_override: bool | None
) -> SecurityPolicy | None:
    """The security policy stored run ``stored`` resumes under, as :func:`adopt` decides it:
    ``given`` if the run started under it (or ``policy_override``), else the stored one (a
    ``given`` that differs is then refused by :func:`adopt`)."""
    saved = stored.metadata.get("policies")
    if not isinstance(saved, dict):
        return given
    kept = saved.get("security")
    if given is not None and (policy_override or given.to_dict() == kept):
        return given
    return None if kept is None else SecurityPolicy.from_mapping(kept)


REPLANNED_AS = "replanned_as"
"""A run record's metadata key: the run version that replaced its plan (an agent's replan)."""

REPLACES = "replaces"
"""A run record's metadata key: the run version it replaced (a replan's, given as
``Execution(replaces=...)``), stored as the run is created and kept by its resumes."""


class RunReplannedError(ExecutionError):
    """The run was replanned: the version that replaced it carries its work on; resuming it
    would run again what that version already did."""

    code = "run_replanned"


def mark_replanned(store: Store, run_id: str, newer: str) -> None:
    """Record that run ``run_id`` was replaced by run version ``newer`` (a replan that reuses
    its finished steps): it is not resumed any more (:func:`check_current`)."""
    found = store.get_run(run_id)
    if found is not None:
        kept = {**found.metadata, REPLANNED_AS: newer}
        store.commit(run=dataclasses.replace(found, metadata=kept))


def replaced_by(stored: RunRecord) -> str | None:
    """The run version that replaced run ``stored`` (:func:`mark_replanned`), or None: what
    every door shows of it, from the one stored fact that :func:`check_current` refuses on."""
    newer = stored.metadata.get(REPLANNED_AS)
    return newer if isinstance(newer, str) else None


def replaces_of(stored: RunRecord) -> str | None:
    """The run version that run ``stored`` replaced (:data:`REPLACES`), or None: a run that
    replaced none, or one recorded before planrail stored the fact."""
    older = stored.metadata.get(REPLACES)
    return older if isinstance(older, str) else None


def replaced_note(newer: str) -> str:
    """What every door says of a run replaced by run version ``newer`` (the refusal of
    :func:`check_current`, ``planrail show``, the dashboard)."""
    return f"replaced by {newer}, a replan that reuses its finished steps and carries its work on"


def check_current(stored: RunRecord) -> None:
    """A stored run may run again: no operator refused it (:func:`check_not_refused`) and no
    replan replaced it (:class:`RunReplannedError`)."""
    check_not_refused(stored)
    newer = replaced_by(stored)
    if newer is not None:
        raise RunReplannedError(
            f"run '{stored.run_id}' was {replaced_note(repr(newer))}: resume '{newer}' instead"
            " (resuming this one would run again what the replan did)",
            run_id=stored.run_id,
        )


def check_not_refused(stored: RunRecord) -> None:
    """:class:`ApprovalRefusedError` for a run an operator refused (``operations.refuse`` ends
    it ``cancelled`` with an ``ApprovalRefused`` error): it never runs again — a resume, or the
    same plan run again under its id, would have asked for approval anew."""
    error = stored.error
    if not (stored.status == "cancelled" and isinstance(error, dict)):
        return
    if error.get("type") != "ApprovalRefused":
        return
    said = error.get("message") or "approval refused"
    raise ApprovalRefusedError(
        f"run '{stored.run_id}' was refused ({said}) and stays cancelled: nothing of it runs;"
        " to run the plan, start a new run (another --run-id)",
        run_id=stored.run_id,
    )


def override(ex: Execution, which: str, stored: Any, given: Any) -> None:
    if not ex.policy_override:
        raise PolicyMismatchError(
            f"run '{ex.run_id}' was started under another {which} policy; resume it"
            " without one (the stored policy applies), or override it explicitly"
            " (policy_override=True, --override-policy), which is recorded",
            run_id=ex.run_id,
        )
    # Emitted once the checkpoint is open, so that the store records it with the run.
    ex._overrides.append({"policy": which, "stored": stored, "now": given})


def policies(ex: Execution) -> dict[str, Any]:
    """The policies this run runs under, as stored with it (and re-applied by resume)."""
    kept: dict[str, Any] = {
        "security": None if ex.security is None else ex.security.to_dict(),
        "run": ex.policy.to_dict(),
    }
    if ex._seen:  # the outputs the plan's author saw: copied literals stay tainted on resume
        kept["seen"] = list(ex._seen)
    named = policy_steps(ex)
    if named:  # an approval the run's policy asks for is asked for on resume too
        kept[APPROVAL_STEPS] = named
    if ex.budget is not None:  # the LLM budget, spent from again on resume
        kept[BUDGET] = ex.budget({**ex.results, **ex._restored})
    how: dict[str, Any] = {}  # how it runs, if not by default: a resume that says nothing of
    if ex.max_concurrency is not None:  # it runs so too (_adopt_execution)
        how["max_concurrency"] = ex.max_concurrency
    if ex.failure_mode != "continue":
        how["failure_mode"] = ex.failure_mode
    if how:
        kept[EXECUTION] = how
    return kept


def stored_width(stored: RunRecord) -> int | None:
    """The ``max_concurrency`` stored with run ``stored`` (what a resume given none runs with,
    :func:`_adopt_execution`), or None."""
    saved = stored.metadata.get("policies")
    how = saved.get(EXECUTION) if isinstance(saved, dict) else None
    return _width(how.get("max_concurrency")) if isinstance(how, dict) else None


def _width(value: Any) -> int | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 1
    return value if ok else None


def _adopt_execution(ex: Execution, saved: Any) -> None:
    """A resume given no ``max_concurrency`` (no ``failure_mode``) runs as the run last ran:
    ``--max-concurrency 2 --fail-fast`` hold over ``planrail resume`` too. Given, they are the
    run's from then on (``failure_mode="continue"``, ``--no-fail-fast``, turns fail-fast off)."""
    if not isinstance(saved, dict):
        return
    width = _width(saved.get("max_concurrency"))
    if ex.max_concurrency is None and width is not None:
        ex.max_concurrency = width
    if not ex._failure_mode_given and saved.get("failure_mode") == "fail_fast":
        ex.failure_mode = "fail_fast"


def policy_steps(ex: Execution) -> list[str]:
    """The steps of the plan the run's approval policy names beyond those
    :mod:`planrail.plan.effects` names (none without a policy)."""
    if ex.approval_policy is None:
        return []
    default = set(needing_approval(ex.effects))
    return [s for s in dict.fromkeys(ex.approval_policy(ex.plan, ex.registry)) if s not in default]


def also_asking(policy: ApprovalPolicy | None, stored: list[str]) -> ApprovalPolicy:
    """``policy`` (None: the steps :mod:`planrail.plan.effects` names), and with it the steps
    a stored run's own approval policy named (:data:`APPROVAL_STEPS`)."""

    def named(plan: Plan, registry: ToolRegistry) -> list[str]:
        base = (
            needing_approval(effects_of(plan.steps, registry))
            if policy is None
            else policy(plan, registry)
        )
        return list(dict.fromkeys([*base, *(s for s in stored if s in plan.by_id)]))

    return named


def approval_needed(ex: Execution) -> list[str]:
    """Steps that need approval before this (sealed) plan may start, if it holds none."""
    if not ex._sealed or ex.approval is not None:
        return []
    return needed_for(ex, ex.plan, ex.effects)


def needed_for(ex: Execution, plan: Plan, effects: Mapping[str, Effect]) -> list[str]:
    """The steps of ``plan`` that need approval, less those reused from an earlier run."""
    if ex.approval_policy is None:
        return needing_approval(effects, done=ex._restored)
    return [s for s in ex.approval_policy(plan, ex.registry) if s not in ex._restored]


async def gate(ex: Execution, needed: list[str]) -> bool:
    """The one gate. An approval the run holds was checked against this very plan before
    anything was written (its hash recomputed from the content, so a plan changed in place
    after approval is refused); without one, the approver is asked. False: the run stops
    here, ``awaiting_approval``."""
    if not ex._sealed or ex.approval is not None or not needed:
        return True  # an open plan is approved when it is sealed; a held one was checked
    # approve=True decides at once (nobody is awaited): the plan it approves is the one
    # serialised here, once. An approver is awaited: the plan is serialised again after it.
    dumped = ex.plan.dump() if ex.approve else None
    answer = await decide(ex, needed, None if dumped is None else dumped[0])
    if answer:
        assert ex.approval is not None
        # approved means frozen: a plan changed while it was being approved is refused
        digest, approved = ex.plan.dump() if dumped is None else dumped
        check_approval(ex.approval, digest)
        if ex._ckpt is not None:  # durable before the first step: a resume needs it
            assert ex.approval is not None
            ex._ckpt.record_approval(ex.approval, approved)
        return True
    ex.status, ex.error = "awaiting_approval", _unapproved(ex, needed, answer)
    ex._emit(E.RUN_FINISHED, data={"status": ex.status, "error": ex.error})
    ex._save_final()
    return False


async def decide(ex: Execution, needed: list[str], current: str | None = None) -> bool | None:
    """Ask for the approval of the plan as it is now (``approve=True`` is a yes); ``current``:
    its hash, if the caller has just computed it."""
    if current is None:
        current = ex.plan.fresh_hash()
    now = ex.clock.now()
    pinned = schema_pins(ex.plan, ex.registry)
    extra = {SCHEMAS: pinned} if pinned else {}
    if ex.approve:
        ex.approval = approval_record(current, "approve=True", now, needed, **extra)
        return True
    request = ex.approval_request(needed, current)
    ex._emit(E.APPROVAL_REQUESTED, data={"steps": needed, "plan_hash": current})
    answer = await ask(ex.approver, request)
    if answer:
        ex.approval = approval_record(current, label_of(ex.approver), now, needed, **extra)
        return True
    ex._emit(
        E.APPROVAL_REFUSED if answer is False else E.APPROVAL_DEFERRED,
        data={"steps": needed, "plan_hash": current},
    )
    return answer


# ---------------------------------------------------------------- schema pinning


def schema_pins(plan: Plan, registry: Any) -> dict[str, str]:
    """The schema hash of each tool of ``plan`` that reports one (``schema_hash``: MCP tools
    do), which an approval binds to — a tool whose schema changes later is refused."""
    names = {s.tool for s in plan.steps if s.tool}
    names |= {s.fallback.tool for s in plan.steps if s.fallback is not None and s.fallback.tool}
    found: dict[str, str] = {}
    for name in sorted(names):
        digest = getattr(registry.find(name), "schema_hash", None)
        if isinstance(digest, str):
            found[name] = digest
    return found


def bind_schemas(approval: dict[str, Any], plan: Plan, registry: Any) -> dict[str, Any]:
    """Bind the plan's tools to the schema hashes ``approval`` recorded (each such tool's
    ``pin``: it refuses a call once its server reports another schema); an approval that
    recorded none gets the current hashes."""
    recorded = approval.get(SCHEMAS)
    if not isinstance(recorded, dict):
        pinned = schema_pins(plan, registry)
        return {**approval, SCHEMAS: pinned} if pinned else approval
    for name, digest in recorded.items():
        tool = registry.find(name)
        if tool is not None and hasattr(tool, "pin"):
            tool.pin = digest
    return approval
