"""Stages across a replan: the stages whose steps finished are kept, the model adds new ones.

A replanned plan is the finished steps followed by the model's new steps
(:meth:`planrail.planner.Planner.replan`); its ``stages`` are built the same way: every stage
of the failed plan that holds finished steps is kept — cut down to those steps — and the
model's stages follow. A kept stage the model writes out again is dropped, as a finished step
written out again is.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from planrail.plan.model import Plan

__all__ = ["kept_stages", "merge_stages"]


def kept_stages(plan: Plan, finished: Iterable[str]) -> tuple[dict[str, Any], ...]:
    """The stages of ``plan`` that hold finished steps, holding only those (as JSON data)."""
    done = set(finished)
    kept = []
    for stage in plan.stages:
        steps = [sid for sid in stage.steps if sid in done]
        if steps:
            data = stage.model_dump(mode="json", exclude_defaults=True)
            kept.append({**data, "steps": steps})
    return tuple(kept)


def merge_stages(
    data: dict[str, Any], kept: tuple[dict[str, Any], ...]
) -> tuple[dict[str, Any], list[str]]:
    """``data`` with the kept stages first, and the changes made (for the repair prompt)."""
    raw = data.get("stages")
    if not kept:
        return data, []
    new = list(raw) if isinstance(raw, list) else []
    changes = []
    for i, stage in reversed(list(enumerate(new))):
        if stage in kept:
            del new[i]
            changes.append(f"$.stages[{i}]: dropped; it repeats a finished stage")
    return {**data, "stages": [*kept, *new]}, changes
