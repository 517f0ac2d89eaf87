"""Stages: a plan cut into named groups of steps, each with the sub-goal it must reach.

A plan may carry a top-level ``stages`` list, in the order the stages are reached::

    stages:
      - {id: research, goal: Find three hotels under 200 EUR, steps: [search, rank]}
      - {id: booking, goal: Book the best one, steps: [book], confirm: true}

The validator pass here reports (codes are stable):

- ``invalid_stage``: ``stages`` is not a list, or an entry is not a stage (an object with an
  ``id`` matching the step id pattern, a non-empty ``goal``, a list of step ids, ``confirm``);
- ``duplicate_stage``: two stages share an id;
- ``unknown_stage_step``: a stage lists a step the plan does not have;
- ``duplicate_stage_step``: a step is listed in two stages (or twice in one);
- ``stage_order``: a step depends, directly or through unstaged steps, on a step of a later
  stage — stages must follow the dependency order;

and warnings: ``empty_stage`` (a stage without steps), ``unused_policy`` (``confirm`` on the
first stage, which has no finished stage to check).

:func:`stage_of` and :func:`stage_goals` are what the engine reads from a valid plan.
"""

from __future__ import annotations

from typing import Any

import pydantic

from planrail.plan.graph import topological_order
from planrail.plan.model import Plan, Stage
from planrail.plan.validate_context import Context

__all__ = ["STAGE_CODES", "stage_goals", "stage_of", "stages_pass"]

STAGE_CODES = (
    "invalid_stage",
    "duplicate_stage",
    "unknown_stage_step",
    "duplicate_stage_step",
    "stage_order",
)
"""The stable error codes of this pass."""


def stage_of(plan: Plan) -> dict[str, Stage]:
    """Each staged step's stage (unstaged steps are absent)."""
    return {sid: stage for stage in plan.stages for sid in stage.steps}


def stage_goals(plan: Plan) -> dict[str, str]:
    """Each staged step's sub-goal: what its ``llm_call`` sees under the goal anchor."""
    return {sid: stage.goal for sid, stage in stage_of(plan).items()}


def stages_pass(ctx: Context) -> None:
    """invalid_stage / duplicate_stage / unknown_stage_step / duplicate_stage_step / stage_order."""
    raw = ctx.raw.get("stages")
    if raw is None:
        return
    if not isinstance(raw, list):
        ctx.error("invalid_stage", None, "$.stages", "'stages' is a list of stages")
        return
    stages = _shapes(ctx, raw)
    index: dict[str, int] = {}
    """Step id -> the position (in ``raw``) of the stage holding it."""
    seen_ids: dict[str, int] = {}
    for i, stage in stages:
        at = f"$.stages[{i}]"
        if stage.id in seen_ids:
            ctx.error(
                "duplicate_stage",
                None,
                f"{at}.id",
                f"stage id '{stage.id}' is already used by stages[{seen_ids[stage.id]}];"
                " stage ids are unique",
            )
        seen_ids.setdefault(stage.id, i)
        if not stage.steps:
            ctx.warn("empty_stage", None, f"{at}.steps", f"stage '{stage.id}' holds no steps")
        for j, sid in enumerate(stage.steps):
            where = f"{at}.steps[{j}]"
            if sid not in ctx.known:
                ctx.error(
                    "unknown_stage_step",
                    None,
                    where,
                    f"stage '{stage.id}' lists '{sid}', which is not a step of this plan",
                )
            elif sid in index:
                other = raw[index[sid]].get("id")
                ctx.error(
                    "duplicate_stage_step",
                    sid,
                    where,
                    f"step '{sid}' is already in stage '{other}'; a step is in at most one stage",
                )
            else:
                index[sid] = i
    if stages and stages[0][1].confirm:
        ctx.warn(
            "unused_policy",
            None,
            f"$.stages[{stages[0][0]}].confirm",
            "the first stage has no finished stage to confirm; 'confirm' does nothing here",
        )
    if not any(i.code == "cycle" for i in ctx.errors):
        _order(ctx, raw, index)


def _shapes(ctx: Context, raw: list[Any]) -> list[tuple[int, Stage]]:
    stages: list[tuple[int, Stage]] = []
    for i, entry in enumerate(raw):
        try:
            stages.append((i, Stage.model_validate(entry)))
        except pydantic.ValidationError as exc:
            for err in exc.errors():
                loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"])
                ctx.error("invalid_stage", None, f"$.stages[{i}]{loc}", _stage_message(err))
    return stages


def _stage_message(err: Any) -> str:
    if err["type"] == "string_pattern_mismatch":
        return "a stage id must match ^[A-Za-z_][A-Za-z0-9_]{0,63}$"
    if err["type"] == "extra_forbidden":
        return f"unknown stage field (allowed: {', '.join(Stage.model_fields)})"
    if err["type"] == "missing":
        return f"a stage needs {'a goal (its sub-goal)' if err['loc'] == ('goal',) else 'an id'}"
    if err["type"] == "string_too_short":
        return "a stage's goal (its sub-goal) must not be empty"
    return str(err["msg"])


def _order(ctx: Context, raw: list[Any], index: dict[str, int]) -> None:
    """stage_order: no step may (transitively) need a step of a later stage.

    ``latest[s]`` is the latest stage any (transitive) dependency of ``s`` is in; a topological
    walk computes it for every step in time linear in the edges.
    """
    if not index:
        return
    deps = ctx.edges()
    try:
        order = topological_order(deps)
    except ValueError:  # a cycle (or a duplicate id), reported by its own pass
        return
    latest: dict[str, tuple[int, str] | None] = {}
    for sid in order:
        best: tuple[int, str] | None = None
        for d in deps.get(sid, ()):
            here = (index[d], d) if d in index else None
            for cand in (here, latest.get(d)):
                if cand is not None and (best is None or cand[0] > best[0]):
                    best = cand
        latest[sid] = best
        mine = index.get(sid)
        if mine is not None and best is not None and best[0] > mine:
            stage, later = raw[mine].get("id"), raw[best[0]].get("id")
            ctx.error(
                "stage_order",
                sid,
                f"$.steps[{ctx.known[sid]}].depends_on",
                f"step '{sid}' of stage '{stage}' needs '{best[1]}' of the later stage"
                f" '{later}'; move one of them, or reorder the stages",
            )
