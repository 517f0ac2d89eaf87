"""What the agent's replan needs of stages and of the calls already made.

A run whose ``confirm: true`` stage was not confirmed is replanned like a run with a failed
step (when ``max_replans`` allows): the replan prompt says which stage was not confirmed and
why, and which finished stages are kept. The calls of the steps the new plan reuses are handed
to the repeated-call guard, so the replan cannot make one of them again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from planrail.engine.result import RunResult
from planrail.plan.model import Plan

__all__ = ["kept_calls", "stage_failure_text"]


def stage_failure_text(plan: Plan, run: RunResult, finished: Iterable[str]) -> str:
    """Lines for the replan prompt about rejected and kept stages ('' for a plan without)."""
    if not plan.stages:
        return ""
    done = set(finished)
    lines = []
    for stage in plan.stages:
        reason = run.rejected_stages.get(stage.id)
        if reason is not None:
            lines.append(
                f"- stage {stage.id} (sub-goal: {stage.goal}) was not confirmed before it"
                f" started: {reason}. Its steps did not run: {', '.join(stage.steps)}."
            )
    kept = [s for s in plan.stages if any(sid in done for sid in s.steps)]
    if kept:
        shown = "; ".join(f"{s.id} (sub-goal: {s.goal})" for s in kept)
        lines.append(
            f"Finished stages, kept as they are: {shown}. Put your new steps in new stages"
            f" (not {', '.join(s.id for s in kept)})."
        )
    return "".join(f"\n{line}" for line in lines)


def kept_calls(
    plan: Plan, finished: Iterable[str], args: Mapping[str, Any]
) -> dict[str, tuple[str, Any]]:
    """The tool calls of the finished steps a replan reuses: ``{step: (tool, resolved args)}``
    (steps with ``for_each`` are left out: each item was its own call)."""
    kept: dict[str, tuple[str, Any]] = {}
    for sid in finished:
        step = plan.by_id.get(sid)
        if step is None or step.action != "tool_call" or not step.tool or step.for_each:
            continue
        if sid in args:
            kept[sid] = (step.tool, args[sid])
    return kept
