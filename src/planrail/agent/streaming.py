"""Streaming dispatch: read-only steps start while the plan is still being written.

The planner streams its first answer; :class:`~planrail.planner.StepStream` hands over each
step the moment its closing brace arrives. A step is added to the open execution at once when

- it calls a tool whose ``side_effects`` is ``none`` and the approval policy does not name it,
- it is valid together with the steps already added (tool, arguments, references), and
- every step it depends on has been added already.

The scheduler then starts it as soon as its dependencies are done. Every other step — above
all any step that changes the world — waits until the whole plan has been validated (and
repaired) and approved; then :meth:`~planrail.engine.executor.Execution.seal` releases it.
A refusal or a deferral stops the execution (only read-only steps can have run); with a store
the run is recorded ``awaiting_approval`` with the whole plan, as a plan that did not stream.

If the final plan changed a step that had already been added (a repair rewrote it), the open
execution is cancelled and the final plan runs, reusing the outputs of unchanged finished steps.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from planrail.engine.result import StepResult
from planrail.plan.effects import step_effect
from planrail.plan.loader import normalize
from planrail.plan.model import Plan, Step
from planrail.plan.validate import validate
from planrail.types import StepStatus

if TYPE_CHECKING:
    from planrail.agent.agent import Agent, RunContext

__all__ = ["run_streamed"]


async def run_streamed(agent: Agent, ctx: RunContext) -> None:
    """The first plan of :meth:`Agent.run`, streamed (see the module docstring)."""
    from planrail.agent.agent import cancel

    execution = agent.execution(ctx, Plan(goal=ctx.goal, steps=()), open_plan=True)
    runner = asyncio.create_task(agent.drive(ctx, execution))
    added: dict[str, Step] = {}
    seen: set[str] = set()

    def on_step(raw: dict[str, Any]) -> None:
        sid = raw.get("id")
        if not isinstance(sid, str) or sid in seen:
            return  # a retried stream repeats its steps; the final parse judges odd ones
        seen.add(sid)
        step = _startable(agent, ctx.goal, raw, added)
        if step is not None and not runner.done():
            execution.extend([step])
            added[step.id] = step
            ctx.trace.note("step_dispatched_early", step.id)

    try:
        planning = await ctx.planner.plan(ctx.goal, on_step=on_step)
    except BaseException:
        await cancel(runner)
        raise
    ctx.result.attempts.extend(planning.attempts)
    plan = ctx.result.plan = planning.plan
    unchanged = all(plan.by_id.get(sid) == step for sid, step in added.items())
    if unchanged and not runner.done():
        try:
            approved = await execution.approve_and_seal(plan)
        except BaseException:
            await cancel(runner)
            raise
        if not approved:  # recorded awaiting_approval, with a store (as a sealed plan is)
            await cancel(runner)
            ctx.result.run = execution.result()
            ctx.result.runs.append(ctx.result.run)
            return
        ctx.trace.note("plan_sealed", steps=len(plan.steps))
        await runner
        return
    await cancel(runner)
    reuse = _reusable(plan, added, execution.results)
    ctx.trace.note("stream_replaced", reused=list(reuse))
    if ctx.meter.exceeded is None:
        await agent.execute(ctx, plan, reuse, reason="plan")


def _startable(agent: Agent, goal: str, raw: dict[str, Any], added: dict[str, Step]) -> Step | None:
    """The step, if it may start before the plan is complete; else ``None``."""
    normalized, _ = normalize({"steps": [raw]})
    data = normalized["steps"][0]
    if not isinstance(data, dict) or data.get("action", "tool_call") != "tool_call":
        return None
    deps = data.get("depends_on") or []
    if not isinstance(deps, list) or any(d not in added for d in deps):
        return None
    prefix = [s.model_dump(mode="json", exclude_defaults=True) for s in added.values()]
    report = validate({"goal": goal, "steps": [*prefix, data]}, agent.registry)
    if report.plan is None:
        return None
    step = report.plan.steps[-1]
    if not step_effect(step, agent.registry).may_start_early:
        return None
    if list(agent.approval_policy(Plan(goal=goal, steps=(step,)), agent.registry)):
        return None
    return step


def _reusable(
    plan: Plan, added: dict[str, Step], results: Mapping[str, StepResult]
) -> dict[str, StepResult]:
    """The early steps the final plan keeps as they are: succeeded, unchanged, and so is every
    step they depend on (one whose input a repair rewrote runs again). ``added`` is in
    dependency order: a step was added only after the steps it depends on."""
    kept: dict[str, StepResult] = {}
    for sid, step in added.items():
        res = results.get(sid)
        if (
            res is not None
            and res.status == StepStatus.SUCCEEDED
            and plan.by_id.get(sid) == step
            and all(dep in kept for dep in step.depends_on or ())
        ):
            kept[sid] = res
    return kept
