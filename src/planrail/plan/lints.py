"""Two lints about the graph's order: ``side_effect_race`` and ``needless_dependency``.

Both are warnings by default; ``ValidationOptions.lints`` (``planrail validate --lint``) turns
each up to an error or off. They need the tools' side effects, so they run with a registry.

- ``side_effect_race``: two steps that change the same thing — the same resource key (the
  step's ``resource``, else its tool's), or the same tool when neither has one — with no path
  between them in the graph. Their order is left to chance (and they may run at once). The
  fix is a pure ordering edge in ``depends_on``: "invite the user to the workspace" before
  "message the user" carries no data, but must come first.
- ``needless_dependency``: a ``depends_on`` edge that carries no data (no reference to that
  step) and orders no side effect (nothing before it through the edge, and nothing after,
  changes the world). It only delays the step: the message gives the plan's critical path
  with and without such edges.

Cost: one topological order, then per resource a walk between consecutive members (windows
that do not overlap), and two linear passes for the side-effect closure.
"""

from __future__ import annotations

import itertools
from collections import defaultdict

from planrail.plan.effects import step_effect, tool_effect
from planrail.plan.graph import critical_path_lengths, topological_order
from planrail.plan.model import Step
from planrail.plan.validate_context import Context, Level

__all__ = ["MAX_RACES_SHOWN", "critical_path", "lints_pass"]

MAX_RACES_SHOWN = 20
"""Unordered pairs reported one by one per resource; the rest are counted in one more issue."""


def lints_pass(ctx: Context) -> None:
    """side_effect_race / needless_dependency (see the module docstring)."""
    race = ctx.level(ctx.options.lint_level("side_effect_race"))
    needless = ctx.level(ctx.options.lint_level("needless_dependency"))
    if (race == "off" and needless == "off") or any(e.code == "cycle" for e in ctx.errors):
        return
    deps = ctx.edges()
    if ctx.in_plan_order():  # the usual case: the plan's order is a topological order
        order, pos = list(ctx.known), ctx.known
    else:
        try:
            order = topological_order(deps)
        except ValueError:  # pragma: no cover - a cycle is reported (and stops the lints)
            return
        pos = {sid: i for i, sid in enumerate(order)}
    effectful, groups = _effects(ctx, order)
    if race != "off":
        _races(ctx, deps, pos, groups, race)
    if needless != "off" and ctx.dataless:
        _needless(ctx, deps, order, effectful, needless)


def _effects(
    ctx: Context, order: list[str]
) -> tuple[dict[str, bool], dict[tuple[str, str], list[str]]]:
    """Per step: whether it changes the world (:func:`~planrail.plan.effects.step_effect`:
    an unknown tool is assumed to, a fallback's tool counts); and per thing
    changed — ``("resource", key)`` (the step's, else its tool's) or ``("tool", name)`` — the
    steps that change it, in ``order``."""
    effectful: dict[str, bool] = {}
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    # what follows depends only on the tools a step may call (its own, its fallback's): cached
    by_tools: dict[tuple[str | None, str | None], tuple[bool, tuple[str, str] | None]] = {}
    first = ctx.first
    for sid in order:
        step = first[sid]
        own = step.tool if step.action == "tool_call" else None
        tools = (own, step.fallback.tool if step.fallback is not None else None)
        found = by_tools.get(tools)
        if found is None:
            spec = ctx.registry.spec(own) if own is not None else None
            thing = None
            if spec is not None and tool_effect(spec).changes_world:
                thing = ("resource", spec.resource) if spec.resource else ("tool", spec.name)
            found = by_tools[tools] = (step_effect(step, ctx.registry).changes_world, thing)
        changes, thing = found
        effectful[sid] = changes
        if thing is not None:
            groups[("resource", step.resource) if step.resource else thing].append(sid)
    return effectful, groups


def _races(
    ctx: Context,
    deps: dict[str, list[str]],
    pos: dict[str, int],
    groups: dict[tuple[str, str], list[str]],
    level: Level,
) -> None:
    for (kind, name), members in groups.items():
        # Members are in topological order: they are all ordered exactly when each one
        # reaches the next, so only consecutive pairs are checked (and reported).
        what = f"resource '{name}'" if kind == "resource" else f"tool '{name}'"
        pairs = itertools.pairwise(members)
        unordered = [(a, b) for a, b in pairs if not _reaches(deps, pos, b, a)]
        for a, b in unordered[:MAX_RACES_SHOWN]:
            ctx.report(
                level,
                "side_effect_race",
                b,
                f"{ctx.at(ctx.first[b])}.depends_on",
                f"steps '{a}' and '{b}' both change {what} and nothing in the graph orders"
                f" them, so they may run in either order or at the same time; if '{a}' must"
                f" come first, add '{a}' to the depends_on of '{b}' (a pure ordering edge)",
            )
        if len(unordered) > MAX_RACES_SHOWN:
            rest = len(unordered) - MAX_RACES_SHOWN
            a, b = unordered[MAX_RACES_SHOWN]
            ctx.report(
                level,
                "side_effect_race",
                b,
                f"{ctx.at(ctx.first[b])}.depends_on",
                f"{rest:,} more pairs of steps that change {what} are not ordered by the"
                f" graph (the first: '{a}' and '{b}'); order them with depends_on, or mark the"
                f" tool side_effects='none' if it changes nothing",
            )


def _reaches(deps: dict[str, list[str]], pos: dict[str, int], start: str, target: str) -> bool:
    """Whether ``start`` (transitively) waits for ``target``; only steps between the two in
    the topological order can be on such a path."""
    floor = pos[target]
    seen = {start}
    todo = [start]
    while todo:
        for d in deps[todo.pop()]:
            if d == target:
                return True
            if d not in seen and pos[d] > floor:
                seen.add(d)
                todo.append(d)
    return False


def _needless(
    ctx: Context,
    deps: dict[str, list[str]],
    order: list[str],
    effectful: dict[str, bool],
    level: Level,
) -> None:
    found: list[tuple[Step, int, str]] = []
    for sid in ctx.dataless:
        step = ctx.first[sid]
        if step.join != "all_succeeded" or ctx.skips(step, "depends_on"):
            continue
        used = ctx.used[sid]
        found.extend(
            (step, j, d)
            for j, d in enumerate(step.depends_on)
            if d in ctx.known and d != sid and d not in used
        )
    if not found:
        return
    # before[s]: s or a step it waits for changes the world; after[s]: s or a step waiting
    # for it does. An edge d -> s orders (before[d]) x (after[s]); with neither, it orders
    # nothing that matters.
    before: dict[str, bool] = {}
    for sid in order:
        b = effectful[sid]
        if not b:
            for d in deps[sid]:
                if before[d]:
                    b = True
                    break
        before[sid] = b
    after = dict(effectful)
    for sid in reversed(order):
        if after[sid]:
            for d in deps[sid]:
                after[d] = True
    found = [(step, j, d) for step, j, d in found if not before[d] and not after[step.id]]
    if not found:
        return
    drop = {(step.id, d) for step, _, d in found}
    with_edges = critical_path(deps)
    without = critical_path({s: [d for d in ds if (s, d) not in drop] for s, ds in deps.items()})
    for step, j, d in found:
        ctx.report(
            level,
            "needless_dependency",
            step.id,
            f"{ctx.at(step)}.depends_on[{j}]",
            f"'{step.id}' waits for '{d}' but uses none of its output, and no side effect"
            f" is ordered by the wait: if '{step.id}' should use it, reference it (such as"
            f" {ctx.reference_to(d)}); otherwise remove '{d}' from depends_on so both can"
            f" run at once (critical path: {with_edges} steps with the plan's {len(found)}"
            f" needless edge(s), {without} without)",
        )


def critical_path(deps: dict[str, list[str]]) -> int:
    """The number of steps on the longest chain of ``deps`` (0 for an empty graph)."""
    if not deps:
        return 0
    return int(max(critical_path_lengths(deps, lambda _s: 1.0).values()))
