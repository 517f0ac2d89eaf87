"""Stage boundaries at run time: a stage with ``confirm: true`` starts with a check.

A plan's ``stages`` (see :mod:`planrail.plan.stages`) name the sub-goal each group of steps
must reach. For a stage with ``confirm: true`` the executor holds the stage's ready steps until
every step of the earlier stages has finished; then one short model call — through the run's
``llm_call`` handler, so it is metered and traced like any LLM step — reads the finished
stages' outputs against their sub-goals and answers ``{"ok": bool, "reason": str}``.

- ``ok``: the held steps start, and later steps of the stage start as they become ready.
- not ``ok`` (or a failed earlier step, or a check that cannot be made): the boundary fails.
  The stage's steps are skipped with the reason, the run fails with it, and
  ``RunResult.rejected_stages`` names the stage — an :class:`~planrail.agent.Agent` with
  ``max_replans`` then replans, keeping the finished stages.

:class:`StageGate` is plain state with no I/O (the executor asks it what to hold, release,
skip or check); :func:`confirm_stage` performs the one check.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any

from planrail.engine.actions import ActionHandler, Call
from planrail.engine.result import StepResult
from planrail.errors import PlanrailError
from planrail.plan.model import Plan, Stage, Step
from planrail.plan.tools import StepContext, step_key
from planrail.types import StepStatus

__all__ = [
    "CONFIRM_INSTRUCTIONS",
    "VERDICT_SCHEMA",
    "Boundary",
    "StageGate",
    "Verdict",
    "confirm_stage",
]

S = StepStatus

VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["ok", "reason"],
    "additionalProperties": False,
}
"""The structured answer of a stage check."""

CONFIRM_INSTRUCTIONS = (
    "Before the stage '{stage}' (sub-goal: {goal}) starts, check the work done so far. The"
    " inputs hold each finished stage: its sub-goal and the outputs of its steps. Answer"
    ' "ok": true only if every finished stage\'s outputs really meet its sub-goal; otherwise'
    ' "ok": false. In "reason", say in one or two sentences what is met or what is missing.'
)

_OUTPUT_CHARS = 2000
"""Longest output text of one step shown to the check (longer ones are cut and say so)."""

_DONE = frozenset({S.SUCCEEDED, S.FAILED, S.SKIPPED, S.CANCELLED})


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a stage check answered."""

    ok: bool
    reason: str
    usage: dict[str, int] = field(default_factory=dict)


@dataclass
class Boundary:
    """The start of one ``confirm: true`` stage, and where its check stands."""

    stage: Stage
    before: list[str]
    """The steps of the earlier stages: all must have finished before the check."""
    finished: int = 0
    """How many of ``before`` are known to have finished (they finish for good)."""
    state: str = "waiting"
    """``waiting`` -> ``checking`` -> ``passed`` | ``rejected``."""
    held: list[str] = field(default_factory=list)
    reason: str | None = None


class StageGate:
    """Which ready steps wait for their stage's check, and what to do once it is decided.

    ``state(step_id)`` is the scheduler's state of a step. Only stages with ``confirm: true``
    (after the first) have a boundary; every other step is never held.
    """

    def __init__(self, plan: Plan, state: Callable[[str], str]) -> None:
        self.state = state
        self._of: dict[str, Boundary] = {}
        self._boundaries: list[Boundary] = []
        before: list[str] = []
        for i, stage in enumerate(plan.stages):
            if stage.confirm and i > 0:
                boundary = Boundary(stage, list(before))
                self._boundaries.append(boundary)
                self._of.update(dict.fromkeys(stage.steps, boundary))
            before.extend(stage.steps)
        self.tasks: set[asyncio.Task[None]] = set()
        self.rejected: dict[str, str] = {}
        """Stage id -> why its boundary failed."""

    @classmethod
    def for_plan(cls, plan: Plan, state: Callable[[str], str]) -> StageGate | None:
        """A gate for the plan's confirmed stages, or ``None`` when it has none."""
        gate = cls(plan, state)
        return gate if gate._boundaries else None

    def holds(self, sid: str) -> bool:
        """Whether the ready step ``sid`` must wait for (or be skipped by) its stage's check."""
        boundary = self._of.get(sid)
        if boundary is None or boundary.state == "passed":
            return False
        boundary.held.append(sid)
        return True

    def poll(
        self, room: int | None = None
    ) -> tuple[list[Boundary], list[str], list[tuple[str, str]]]:
        """What to do now: boundaries to check, held steps to start (at most ``room``; the
        others stay held for a later poll), held steps to skip."""
        due: list[Boundary] = []
        release: list[str] = []
        skip: list[tuple[str, str]] = []
        for b in self._boundaries:
            if b.state == "waiting" and b.held and self._earlier_finished(b):
                b.state = "checking"
                due.append(b)
            elif b.state in ("passed", "rejected") and b.held:
                held, b.held = b.held, []
                ready = [sid for sid in held if self.state(sid) == "ready"]
                if b.state == "passed":
                    free = len(ready) if room is None else max(room - len(release), 0)
                    release.extend(ready[:free])
                    b.held = ready[free:]
                else:
                    why = f"stage '{b.stage.id}' was not confirmed: {b.reason}"
                    skip.extend((sid, why) for sid in ready)
        return due, release, skip

    def start(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def decide(self, boundary: Boundary, verdict: Verdict) -> None:
        boundary.state = "passed" if verdict.ok else "rejected"
        boundary.reason = verdict.reason
        if not verdict.ok:
            self.rejected[boundary.stage.id] = verdict.reason

    def cancel(self) -> None:
        for task in list(self.tasks):
            task.cancel()

    def _earlier_finished(self, b: Boundary) -> bool:
        while b.finished < len(b.before) and self.state(b.before[b.finished]) in _DONE:
            b.finished += 1
        return b.finished == len(b.before)


async def confirm_stage(
    handler: ActionHandler | None,
    plan: Plan,
    stage: Stage,
    results: Mapping[str, StepResult],
    *,
    run_id: str,
) -> Verdict:
    """Ask the run's ``llm_call`` handler whether the stages before ``stage`` met their
    sub-goals. A failed earlier step, a missing handler or a failed call is a "no" that says
    why; cancellation propagates."""
    earlier = plan.stages[: plan.stages.index(stage)]
    for done in earlier:
        for sid in done.steps:
            r = results[sid]
            if r.status in (S.FAILED, S.CANCELLED):
                return Verdict(False, f"stage '{done.id}' did not finish: step '{sid}' {r.status}")
    if handler is None:
        return Verdict(
            False,
            f"stage '{stage.id}' has confirm: true, but this run has no llm_call handler to"
            " check it with (give the run an LLM)",
        )
    inputs = [
        {
            "stage": done.id,
            "sub_goal": done.goal,
            "steps": {sid: _shown(results[sid]) for sid in done.steps},
        }
        for done in earlier
    ]
    check = Step(
        id=f"confirm_{stage.id}",
        action="llm_call",
        prompt=CONFIRM_INSTRUCTIONS.format(stage=stage.id, goal=stage.goal),
        output_schema=VERDICT_SCHEMA,
    )
    ctx = StepContext(run_id, check.id, 1, step_key(run_id, check.id))
    call = Call(check, {"finished_stages": inputs}, ctx, plan.goal, _same, stage_goal=stage.goal)
    try:
        answer = await handler(call)
    except PlanrailError as exc:
        return Verdict(False, f"the stage check could not be made: {exc.message}", call.usage)
    except Exception as exc:
        return Verdict(False, f"the stage check could not be made: {exc}", call.usage)
    ok = isinstance(answer, dict) and answer.get("ok") is True
    reason = answer.get("reason") if isinstance(answer, dict) else None
    text = reason if isinstance(reason, str) and reason else ("met" if ok else "not met")
    return Verdict(ok, text, call.usage)


def _shown(r: StepResult) -> Any:
    if r.status != S.SUCCEEDED:
        return {"status": str(r.status), "reason": r.reason}
    text = json.dumps(r.output, ensure_ascii=False, default=str)
    if len(text) <= _OUTPUT_CHARS:
        return r.output
    return f"{text[:_OUTPUT_CHARS]}… (cut: {len(text):,} characters in all)"


def _same(value: Any) -> Any:
    return value
