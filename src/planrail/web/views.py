"""What the dashboard shows, as plain JSON-ready data built from a store (no web framework here).

Every value leaves through :class:`Masker`: the store already holds what the executor's
:class:`~planrail.plan.secrets.Redactor` let through, and on top of that the dashboard masks
exactly what ``planrail show`` masks (parameters the tools declare secret, parameters named like
secrets). Nothing here writes the store.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from planrail.engine.approval import ApprovalRequest
from planrail.engine.approval_view import PlanDiff, StepView
from planrail.engine.events import EventType
from planrail.engine.gate import REPLANNED_AS, replaced_by, replaces_of
from planrail.observe.graph import COLORS
from planrail.observe.view import redact, trace_ids
from planrail.plan.effects import effects_of, needing_approval
from planrail.plan.model import Plan, step_tools
from planrail.plan.secrets import Redactor, secret_params_of
from planrail.plan.tools import ToolRegistry
from planrail.plan.validate import check_plan
from planrail.store.base import Event, RunRecord, StepRecord, Store
from planrail.types import StepStatus

__all__ = [
    "FILTERS",
    "IN_DOUBT_SCAN",
    "STEP_STATUS_OF_EVENT",
    "UNKNOWN",
    "Masker",
    "approval_view",
    "critical_path",
    "event_message",
    "previous_version",
    "replaced_version",
    "requested_steps",
    "run_row",
    "run_rows",
    "step_detail",
    "timeline",
    "was_approved",
]

FILTERS: dict[str, str] = {
    "awaiting": "awaiting approval",
    "running": "running",
    "failed": "failed",
    "in_doubt": "in doubt",
}
"""The run list's filters (query value: label)."""

STEP_STATUS_OF_EVENT: dict[str, str] = {
    EventType.STEP_READY: "pending",
    EventType.STEP_STARTED: "running",
    EventType.STEP_RESTORED: "succeeded",
    EventType.RETRY_SCHEDULED: "running",
    EventType.STEP_SUCCEEDED: "succeeded",
    EventType.STEP_DEGRADED: "succeeded",
    EventType.STEP_FAILED: "failed",
    EventType.STEP_SKIPPED: "skipped",
    EventType.STEP_CANCELLED: "cancelled",
    EventType.STEP_IN_DOUBT: "in_doubt",
}
"""The status a step has after each step event (an operator action reads the step record)."""


class Masker:
    """Masks what the dashboard shows of one run, as ``planrail show --tools`` does."""

    def __init__(self, run: RunRecord, registry: ToolRegistry) -> None:
        self.registry = registry
        """The dashboard's tools (the drawer's provenance reads which outputs they trust)."""
        self._secrets: dict[str, frozenset[str]] = {}
        self.redactor: Redactor | None = None
        for raw in run.plan.get("steps", []):
            names = set(secret_params_of(registry.spec(raw.get("tool") or "")))
            fallback = raw.get("fallback") or {}
            names |= secret_params_of(registry.spec(fallback.get("tool") or ""))
            self._secrets[str(raw.get("id"))] = frozenset(names)
        try:
            self.redactor = Redactor.for_plan(Plan.model_validate(run.plan), registry)
        except ValueError:
            self.redactor = None

    def args(self, step_id: str, args: Any) -> Any:
        if self.redactor is not None:
            args = self.redactor.args(step_id, args)
        return redact(args, self._secrets.get(step_id, frozenset()))

    def value(self, value: Any) -> Any:
        """Any other value (outputs, errors, plan fields): secret-looking names masked."""
        if self.redactor is not None:
            value = self.redactor.scrub(value)
        return redact(value)


# ---------------------------------------------------------------- the run list


def _in_doubt(steps: Mapping[str, StepRecord]) -> int:
    return sum(1 for r in steps.values() if r.status == StepStatus.IN_DOUBT)


def run_row(run: RunRecord, steps: Mapping[str, StepRecord], now: float) -> dict[str, Any]:
    """One line of the run list."""
    started = [r.started_at for r in steps.values() if r.started_at is not None]
    finished = [r.finished_at for r in steps.values() if r.finished_at is not None]
    begin = min(started) if started else None
    live = run.status in ("running", "pending") and begin is not None
    end = now if live else (max(finished) if finished else None)
    return {
        "run_id": run.run_id,
        "status": run.status,
        "goal": str(run.plan.get("goal", "")),
        "created_at": run.created_at,
        "started_at": begin,
        "duration": None if begin is None or end is None else max(0.0, end - begin),
        "steps": len(run.plan.get("steps", [])),
        "in_doubt": _in_doubt(steps),
        REPLANNED_AS: replaced_by(run),
    }


IN_DOUBT_SCAN = 2000
"""How many of the newest runs the *in doubt* filter looks through for in-doubt steps."""


def run_rows(store: Store, flt: str | None, now: float, limit: int = 200) -> list[dict[str, Any]]:
    """The run list, newest first, narrowed by a :data:`FILTERS` key.

    A status filter is the store's own (``list_runs(status=...)``), so ``limit`` rows of that
    status come back however old. The store cannot select runs by the state of their steps, so
    *in doubt* reads the step records of up to :data:`IN_DOUBT_SCAN` newest runs and keeps the
    first ``limit`` with an in-doubt step: limiting before filtering showed none when the 200
    newest runs had none, whatever the older ones held.
    """
    if flt == "in_doubt":
        rows = []
        for run in store.list_runs(limit=max(limit, IN_DOUBT_SCAN)):
            row = run_row(run, store.get_steps(run.run_id), now)
            if row["in_doubt"]:
                rows.append(row)
                if len(rows) == limit:
                    break
        return rows
    status = {"awaiting": "awaiting_approval", "running": "running", "failed": "failed"}.get(
        flt or ""
    )
    runs = store.list_runs(status=status, limit=limit)
    return [run_row(run, store.get_steps(run.run_id), now) for run in runs]


# ---------------------------------------------------------------- graph and timeline


def critical_path(run: RunRecord, steps: Mapping[str, StepRecord]) -> list[str]:
    """The chain of steps that decided when the run ended: from the step that finished last,
    back through the dependency that finished last each time (recorded times only)."""
    deps = {str(s.get("id")): list(s.get("depends_on", ())) for s in run.plan.get("steps", [])}
    done = {sid: r.finished_at for sid, r in steps.items() if r.finished_at is not None}
    if not done:
        return []
    current: str | None = max(done, key=lambda s: (done[s], s))
    path: list[str] = []
    seen: set[str] = set()
    while current is not None and current not in seen:
        path.append(current)
        seen.add(current)
        before = [d for d in deps.get(current, []) if d in done]
        current = max(before, key=lambda s: (done[s], s)) if before else None
    return path[::-1]


def _attempts(rec: StepRecord) -> list[dict[str, Any]]:
    """Attempts with wall times: the history's times are monotonic, so they are placed from the
    step's recorded start."""
    history = [h for h in rec.attempt_history if isinstance(h, dict)]
    if rec.started_at is None or not history:
        return []
    base = min(float(h.get("started_at", 0.0)) for h in history)
    out = []
    for h in history:
        start = rec.started_at + float(h.get("started_at", base)) - base
        error = h.get("error")
        out.append(
            {
                "attempt": h.get("attempt"),
                "item": h.get("item"),
                "start": start,
                "end": start + float(h.get("duration", 0.0)),
                "delay": h.get("delay"),
                "ok": error is None,
                "error": error.get("message") if isinstance(error, dict) else None,
            }
        )
    return out


def timeline(run: RunRecord, steps: Mapping[str, StepRecord], now: float) -> dict[str, Any]:
    """Rows of the Gantt chart (one per started step, by start time) and the critical path."""
    rows: list[dict[str, Any]] = []
    for sid, rec in steps.items():
        if rec.started_at is None:
            continue
        end = rec.finished_at if rec.finished_at is not None else now
        rows.append(
            {
                "step": sid,
                "status": str(rec.status),
                "start": rec.started_at,
                "end": max(end, rec.started_at),
                "attempts": _attempts(rec),
            }
        )
    rows.sort(key=lambda r: (r["start"], r["step"]))
    begin: float | None = min((float(r["start"]) for r in rows), default=None)
    last: float | None = max((float(r["end"]) for r in rows), default=None)
    return {"rows": rows, "begin": begin, "end": last, "critical": critical_path(run, steps)}


# ---------------------------------------------------------------- step drawer


def _plan_step(run: RunRecord, step_id: str) -> dict[str, Any]:
    return next((s for s in run.plan.get("steps", []) if s.get("id") == step_id), {})


def _sources(run: RunRecord, step_id: str, registry: ToolRegistry) -> dict[str, list[str]]:
    """Where each argument of ``step_id`` comes from, as the approval page says it: the
    approval screen of the stored plan with that one step on it."""
    try:
        plan = Plan.model_validate(run.plan)
        request = ApprovalRequest.build(plan, registry, {}, [step_id], plan_hash=run.plan_hash)
        shown = request.view().steps
    except (ValueError, KeyError):
        return {}
    return _provenance(shown[0]) if shown else {}


def _provenance(shown: StepView) -> dict[str, list[str]]:
    """Each argument's origins in the words of the CLI's approval screen (``written in the
    plan``, ``output of tool fetch (untrusted)``), for the drawer and the approval page alike:
    ``value_sources`` has internal codes (``user``) that no page should show."""
    return {
        a.name: [src.text for src in a.sources]
        + (["untrusted-derived: look hard at it"] if a.untrusted else [])
        for a in shown.args
    }


def step_detail(
    run: RunRecord, rec: StepRecord | None, step_id: str, events: list[Event], masker: Masker
) -> dict[str, Any]:
    """The step drawer: plan entry, resolved arguments, output, error, attempts and their
    delays, idempotency key, provenance of each argument, and the OpenTelemetry trace and span
    ids a traced run stored with its events."""
    raw = _plan_step(run, step_id)
    resolved = rec.args if rec is not None else None
    return {
        "step": step_id,
        "status": str(rec.status) if rec is not None else "pending",
        "calls": raw.get("tool") or raw.get("action", "tool_call"),
        "depends_on": list(raw.get("depends_on", ())),
        "args": masker.args(step_id, resolved if resolved is not None else raw.get("args")),
        "args_resolved": resolved is not None,
        "output": masker.value(rec.output) if rec is not None else None,
        "error": masker.value(rec.error) if rec is not None else None,
        "reason": masker.value(rec.reason) if rec is not None else None,
        "attempts": rec.attempts if rec is not None else 0,
        "attempt_history": masker.value(_attempts(rec)) if rec is not None else [],
        "idempotency_key": rec.idempotency_key if rec is not None else None,
        "provenance": _sources(run, step_id, masker.registry),
        "trace": trace_ids(((e.type, e.step_id, e.data) for e in events), step_id),
        "events": [
            {"seq": e.seq, "type": e.type, "at": e.at, "attempt": e.attempt}
            for e in events
            if e.step_id == step_id
        ],
    }


# ---------------------------------------------------------------- live updates


def event_message(event: Event, steps: Mapping[str, StepRecord] | None = None) -> dict[str, Any]:
    """One server-sent message: the event's kind, its step and that step's status after it.

    Only ids, types, times and statuses: an event's ``data`` (arguments, outputs, messages) is
    never sent, so nothing secret can travel this way.
    """
    status = STEP_STATUS_OF_EVENT.get(event.type)
    if event.type == EventType.OPERATOR_ACTION and event.step_id and steps is not None:
        rec = steps.get(event.step_id)
        status = str(rec.status) if rec is not None else None
    message: dict[str, Any] = {
        "seq": event.seq,
        "type": event.type,
        "at": event.at,
        "step": event.step_id,
        "status": status,
    }
    if event.type == EventType.OPERATOR_ACTION:
        message["action"] = str(event.data.get("action", ""))
    return message


# ---------------------------------------------------------------- approval page


@dataclass(frozen=True)
class ApprovalStep:
    step: str
    calls: str
    side_effects: str
    """The side-effect class, or :data:`UNKNOWN` when the dashboard lacks the step's tools."""
    needs_approval: bool | None
    """None: not known (its tools are not loaded and the run recorded no request)."""
    args: Any
    provenance: dict[str, list[str]]
    change: str | None = None
    """On a replan: ``added``, ``changed`` or ``same`` against the previous version."""


UNKNOWN = "unknown"
"""The side effects of a step whose tools the dashboard does not hold (``planrail ui`` without
``--tools``): planrail takes an unknown tool as unsafe when it runs, but a page that said so
would call a read-only step unsafe."""

_REPLAN = re.compile(r"^(?P<base>.+)-r(?P<n>[1-9][0-9]*)$")


def previous_version(store: Store, run: RunRecord) -> RunRecord | None:
    """The plan version approved before ``run``'s, when ``run`` is a replan, else None.

    The version before is the one :func:`replaced_version` names. A replan keeps the goal (the
    planner enforces its anchor), so a run of another goal is not taken for one; nor is a
    version that was never approved (:func:`was_approved`): the page says "changed since the
    approved version".
    """
    older = replaces_of(run)
    before = _marked_before(store, run) if older is None else store.get_run(older)
    if before is None or before.plan.get("goal") != run.plan.get("goal"):
        return None
    return before if was_approved(store, before) else None


def replaced_version(store: Store, run: RunRecord) -> str | None:
    """The run version ``run`` replaced, as its record says: the one stored with it as it was
    created (:func:`planrail.engine.gate.replaces_of`, an agent's replan passes it); for a
    record written before planrail stored that fact, the one before it by the agent's run-id
    convention when the store marks it replaced by ``run``, else None. The "replan of" link
    and the approval diff (:func:`previous_version`) both ask this rule."""
    older = replaces_of(run)
    if older is not None:
        return older
    before = _marked_before(store, run)
    return None if before is None else before.run_id


def _marked_before(store: Store, run: RunRecord) -> RunRecord | None:
    """For a record without the stored fact, the agent's run-id convention: replan N of run
    ``X`` is ``X-rN`` (:class:`planrail.agent.Agent`), so the version before is ``X-r(N-1)``,
    or ``X`` for the first replan — taken only when the store marks it replaced by ``run``
    (:func:`planrail.engine.gate.replaced_by`); None otherwise: an id alone proves nothing."""
    found = _REPLAN.match(run.run_id)
    if found is None:
        return None
    n = int(found["n"])
    before = store.get_run(found["base"] if n == 1 else f"{found['base']}-r{n - 1}")
    return before if before is not None and replaced_by(before) == run.run_id else None


def was_approved(store: Store, run: RunRecord) -> bool:
    """Whether ``run``'s plan went through the approval gate: it holds an approval (an
    approver's or an operator's, :func:`~planrail.engine.approval.approval_record`), or it
    needed none and started — the executor logs ``run_started`` only past the gate, so a plan
    still waiting, refused, or cancelled while waiting has neither."""
    if run.approval is not None:
        return True
    return any(e.type == EventType.RUN_STARTED for e in store.events(run.run_id))


def _previous_plan(previous: RunRecord | None) -> Plan | None:
    if previous is None:
        return None
    try:
        return Plan.model_validate(previous.plan)
    except ValueError:
        return None  # a stored version that no longer validates: no diff rather than no page


def requested_steps(store: Store, run: RunRecord) -> list[str] | None:
    """The steps ``run`` recorded as needing approval when it stopped at the gate (its last
    ``approval_requested`` event), or None if it recorded none: what :func:`approval_view`
    shows for steps whose tools the dashboard does not hold."""
    asked = [e for e in store.events(run.run_id) if e.type == EventType.APPROVAL_REQUESTED]
    steps = asked[-1].data.get("steps") if asked else None
    return [str(s) for s in steps] if isinstance(steps, list) else None


def _recorded(run: RunRecord, requested: Sequence[str] | None) -> frozenset[str] | None:
    """The steps the run recorded as needing approval: ``requested`` (its event), else the
    ones its approval record names (an operator's approval names none: unknown)."""
    if requested is not None:
        return frozenset(requested)
    steps = (run.approval or {}).get("steps")
    return frozenset(map(str, steps)) if isinstance(steps, list) and steps else None


def _unknown_tools(plan: Plan, registry: ToolRegistry) -> frozenset[str]:
    """Steps that may call a tool the dashboard's registry does not hold."""
    return frozenset(
        s.id for s in plan.steps if any(registry.spec(t) is None for t in step_tools(s))
    )


def approval_view(
    run: RunRecord,
    registry: ToolRegistry,
    previous: RunRecord | None = None,
    requested: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The approval page of a stored run: what each step does, its argument values (masked) and
    where each comes from, the hash an approval binds, and — for a replan, given the
    ``previous`` version (:func:`previous_version`) — the steps added, removed and changed
    since, with the arguments that changed.

    A step whose tools ``registry`` lacks has :data:`UNKNOWN` side effects, and needs approval
    when the run recorded so (``requested``, :func:`requested_steps`; else its approval record),
    else that is unknown too (None) — never guessed from the empty registry.

    Built from :class:`~planrail.engine.approval.ApprovalRequest` and its approval screen
    (:mod:`planrail.engine.approval_view`, the CLI's) over the stored plan.
    """
    # One validation: its warnings go on the page, and its plan (when the dashboard's tools
    # accept it; else the stored plan as a model) is what the page shows.
    report = check_plan(run.plan, registry if len(registry) else None)
    plan = report.plan if report.plan is not None else Plan.model_validate(run.plan)
    effects = effects_of(plan.steps, registry)
    unknown = _unknown_tools(plan, registry)
    recorded = _recorded(run, requested) if unknown else None
    if recorded is not None:
        needed = [s.id for s in plan.steps if s.id in recorded]
    else:  # an unknown step's need is not known: it is not listed as one to approve
        needed = [sid for sid in needing_approval(effects) if sid not in unknown]
    before = _previous_plan(previous)
    redactor = Redactor.for_plan(plan, registry)
    request = ApprovalRequest.build(
        plan,
        registry,
        effects,
        needed,
        plan_hash=run.plan_hash,
        run_id=run.run_id,
        previous=before,
        redactor=redactor,
    )
    request = dataclasses.replace(
        request, side_effects={**request.side_effects, **dict.fromkeys(unknown, UNKNOWN)}
    )
    # The CLI's approval screen, as data, with every step on it: the page shows the arguments
    # and provenance of read-only steps too, in the same words.
    view = dataclasses.replace(request, steps=tuple(s.id for s in plan.steps)).view()
    screen = {v.id: v for v in view.steps}
    masker = Masker(run, registry)
    steps = []
    for s in plan.steps:
        shown = screen[s.id]
        if s.id in request.steps:
            args = {a.name: masker.value(a.value) for a in shown.args}
        else:  # read-only: shown as planned, masked as the drawer masks it
            args = masker.args(s.id, _plan_step(run, s.id).get("args", {}))
        steps.append(
            ApprovalStep(
                step=s.id,
                calls=s.tool or s.action,
                side_effects=request.side_effects.get(s.id, "none"),
                needs_approval=(
                    None if s.id in unknown and recorded is None else s.id in request.steps
                ),
                args=args,
                provenance=_provenance(shown),
                change=_change(view.diff, s.id),
            )
        )
    return {
        "run_id": run.run_id,
        "status": run.status,
        "goal": plan.goal,
        "plan_hash": request.plan_hash,
        "reason": request.reason,
        "to_approve": list(request.steps),
        "unknown_effects": [s.id for s in plan.steps if s.id in unknown],
        "recorded": recorded is not None,
        REPLANNED_AS: replaced_by(run),
        "steps": [s.__dict__ for s in steps],
        "approval": masker.value(run.approval),
        "diff": _diff(view.diff, previous, masker, before, plan),
        "warnings": [
            {**w.to_dict(), "message": w.message if redactor is None else redactor.text(w.message)}
            for w in report.warnings
        ],
    }


def _change(diff: PlanDiff | None, step_id: str) -> str | None:
    if diff is None:
        return None
    return "added" if step_id in diff.added else "changed" if step_id in diff.changed else "same"


def _diff(
    diff: PlanDiff | None,
    previous: RunRecord | None,
    masker: Masker,
    before: Plan | None,
    plan: Plan,
) -> dict[str, Any] | None:
    """The diff as the page shows it; a changed step that calls something else has a
    ``(calls)`` row before its arguments (as the approval screen has ``(prompt)``)."""
    if diff is None or previous is None or before is None:
        return None
    rows: dict[str, dict[str, Any]] = {}
    for sid in diff.changed:
        old, new = before.step(sid), plan.step(sid)
        calls = (old.tool or old.action, new.tool or new.action)
        if calls[0] != calls[1]:
            rows[sid] = {"(calls)": {"before": calls[0], "after": calls[1]}}
        rows.setdefault(sid, {}).update(diff.args.get(sid, {}))
    return {
        "previous_run": previous.run_id,
        "previous_hash": previous.plan_hash,
        "added": list(diff.added),
        "removed": list(diff.removed),
        "changed": list(diff.changed),
        "args": masker.value({sid: delta for sid, delta in rows.items() if delta}),
    }


def status_colors() -> dict[str, list[str]]:
    """``status: [fill, stroke]`` as the SVG graph draws them (the script recolours with it)."""
    return {k or "none": list(v) for k, v in COLORS.items()}
