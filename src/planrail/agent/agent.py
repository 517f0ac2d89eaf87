"""The agent loop: goal → plan → validate → approve → execute → (replan → approve → execute)*.

Everything the run spends on models goes through one :class:`~planrail.llm.BudgetMeter`:
planning, repairs, replans and ``llm_call`` steps. With streaming, read-only steps start while
the plan is still being written (see :mod:`planrail.agent.streaming`); everything that changes
the world waits for the whole plan's validation and approval.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from planrail.agent.approval import (
    ApprovalCallback,
    ApprovalPolicy,
    ask,
    make_request,
    side_effecting_steps,
)
from planrail.agent.llm_step import LLMStepHandler
from planrail.agent.result import AgentResult, Trace
from planrail.agent.stages import kept_calls, stage_failure_text
from planrail.clock import SYSTEM_CLOCK
from planrail.engine.executor import Execution, FailureMode
from planrail.engine.guards import CallGuard
from planrail.engine.result import RunResult, StepResult
from planrail.llm.base import LLM
from planrail.llm.budget import Budget, BudgetMeter, MeteredLLM, PriceTable
from planrail.llm.errors import BudgetExceededError, LLMError
from planrail.plan.model import Plan
from planrail.plan.tools import AnyTool, ToolRegistry
from planrail.planner.planner import Planner, PlanningError
from planrail.planner.retry import LLMRetry
from planrail.policies.limits import RunPolicy
from planrail.types import Clock, Observer, StepStatus

__all__ = ["Agent", "RunContext"]


@dataclass
class RunContext:
    """The state of one :meth:`Agent.run` (shared by the loop, streaming and replanning)."""

    goal: str
    meter: BudgetMeter
    llm: MeteredLLM
    trace: Trace
    planner: Planner
    handler: LLMStepHandler
    result: AgentResult
    args: dict[str, Any] = field(default_factory=dict)
    """The resolved arguments of the last execution's steps (for the replan prompt)."""
    calls: CallGuard | None = None
    """The repeated-call guard, shared by the plan and its replans."""


class Agent:
    """Plans with a model, has the plan approved, executes it, replans on failure.

    ``approval`` is asked whenever ``approval_policy`` names steps (default: those that change
    the world); without a callback such a plan is refused. ``max_replans`` (default 0) bounds
    how often a failed run is replanned. ``stream`` lets read-only steps start while the plan
    is still streaming, when the model streams.
    """

    def __init__(
        self,
        llm: LLM,
        tools: ToolRegistry | Iterable[AnyTool],
        *,
        approval: ApprovalCallback | None = None,
        approval_policy: ApprovalPolicy = side_effecting_steps,
        budget: Budget | None = None,
        prices: PriceTable | None = None,
        max_repairs: int = 3,
        max_replans: int = 0,
        stream: bool = False,
        retry: LLMRetry | None = None,
        clock: Clock = SYSTEM_CLOCK,
        observers: Iterable[Observer] = (),
        max_concurrency: int | None = None,
        failure_mode: FailureMode = "continue",
        models: Callable[[str], LLM] | None = None,
        summary_chars: int = 4000,
        policy: RunPolicy | None = None,
    ) -> None:
        if max_replans < 0:
            raise ValueError("max_replans must be >= 0")
        self.llm = llm
        self.registry = ToolRegistry.of(tools)
        self.approval = approval
        self.approval_policy = approval_policy
        self.budget = budget
        self.prices = prices
        self.max_repairs = max_repairs
        self.max_replans = max_replans
        self.stream = stream
        self.retry = retry
        self.clock = clock
        self.observers = list(observers)
        self.max_concurrency = max_concurrency
        self.failure_mode: FailureMode = failure_mode
        self.models = models
        self.summary_chars = summary_chars
        self.policy = policy or RunPolicy()
        """The run policy of every execution (repeated-call guard, limits, resources)."""

    # ------------------------------------------------------------------ the loop

    async def run(self, goal: str) -> AgentResult:
        """Plan, approve and execute ``goal``; never raises for a failed, refused or invalid
        run (look at ``status`` and ``reason``)."""
        ctx = self._context(goal)
        res = ctx.result
        try:
            await self._first(ctx)
            while (
                res.status == "failed"
                and res.replans < self.max_replans
                and ctx.meter.exceeded is None
                and await self._replan(ctx)
            ):
                pass
        except PlanningError as exc:
            res.attempts.extend(a for a in exc.attempts if a not in res.attempts)
            res.status = "invalid" if exc.issues else "error"
            res.reason = exc.message
        except BudgetExceededError:
            pass  # reported below, from the meter
        except LLMError as exc:
            res.status, res.reason = "error", exc.message
        if ctx.meter.exceeded is not None and res.status != "refused":
            res.status, res.reason = "budget_exceeded", ctx.meter.exceeded.message
            ctx.trace.note("budget_exceeded", limit=ctx.meter.exceeded.limit)
        elif res.status == "failed" and res.reason is None and res.run is not None:
            res.reason = res.run.error or _first_failure(res.run)
        res.usage = ctx.meter.to_dict()
        return res

    def _context(self, goal: str) -> RunContext:
        meter = BudgetMeter(self.budget, self.prices)
        llm = MeteredLLM(self.llm, meter)
        trace = Trace()
        factory = self.models
        models = (lambda name: MeteredLLM(factory(name), meter)) if factory else None
        planner = Planner(
            llm,
            self.registry,
            max_repairs=self.max_repairs,
            retry=self.retry,
            clock=self.clock,
            on_event=lambda kind, data: trace.note(kind, **data),
        )
        result = AgentResult(goal, trace=trace.events)
        handler = LLMStepHandler(llm, models=models)
        calls = CallGuard.for_policy(self.policy)
        return RunContext(goal, meter, llm, trace, planner, handler, result, calls=calls)

    async def _first(self, ctx: RunContext) -> None:
        if self.stream and ctx.llm.supports_streaming:
            from planrail.agent.streaming import run_streamed

            await run_streamed(self, ctx)
            return
        planning = await ctx.planner.plan(ctx.goal)
        ctx.result.attempts.extend(planning.attempts)
        ctx.result.plan = planning.plan
        record = await self.approve(ctx, planning.plan, "plan")
        if record is not None:
            await self.execute(ctx, planning.plan, record)

    # ------------------------------------------------------------------ pieces

    async def approve(
        self, ctx: RunContext, plan: Plan, reason: str, reused: Iterable[str] = ()
    ) -> dict[str, Any] | None:
        """The approval record for ``plan``, or ``None`` (and status ``refused``) if refused."""
        kept = list(reused)
        done = set(kept)
        needed = [s for s in self.approval_policy(plan, self.registry) if s not in done]
        if not needed:
            ctx.trace.note("approval_not_required", reason=reason)
            return {"plan_hash": plan.hash, "by": "not required"}
        ctx.trace.note("approval_requested", reason=reason, steps=needed)
        request = make_request(plan, self.registry, needed, reason, kept)
        if await ask(self.approval, request):
            ctx.trace.note("approved", reason=reason)
            return {"plan_hash": plan.hash, "by": "approval callback", "steps": needed}
        ctx.trace.note("refused", reason=reason)
        ctx.result.status = "refused"
        ctx.result.reason = (
            f"approval refused for {', '.join(needed)}: nothing that changes the world was run"
            if self.approval is not None
            else f"{', '.join(needed)} need approval, but no approval callback was given"
            " (pass approval=..., or approve_all)"
        )
        return None

    def execution(
        self,
        ctx: RunContext,
        plan: Plan,
        record: dict[str, Any] | None,
        *,
        open_plan: bool = False,
        reuse: Mapping[str, StepResult] | None = None,
    ) -> Execution:
        return Execution(
            plan,
            self.registry,
            max_concurrency=self.max_concurrency,
            failure_mode=self.failure_mode,
            clock=self.clock,
            observers=[*self.observers, ctx.trace],
            handlers={"llm_call": ctx.handler},
            open_plan=open_plan,
            approval=record,
            restored=reuse,
            policy=self.policy,
            call_guard=ctx.calls,
        )

    async def execute(
        self,
        ctx: RunContext,
        plan: Plan,
        record: dict[str, Any],
        reuse: Mapping[str, StepResult] | None = None,
    ) -> RunResult:
        """Run ``plan``; steps in ``reuse`` are not executed again: their outputs are reused."""
        execution = self.execution(ctx, plan, record, reuse=reuse)
        return await self.drive(ctx, execution)

    async def drive(self, ctx: RunContext, execution: Execution) -> RunResult:
        """Run an execution to its end, stopping it as soon as the budget is exceeded."""
        events = execution.iter()
        assert isinstance(events, AsyncGenerator)
        try:
            async for _ in events:
                if ctx.meter.exceeded is not None:
                    break  # closing the iterator cancels what is in flight, cleanly
        finally:
            await events.aclose()
        result = execution.result()
        ctx.result.runs.append(result)
        ctx.result.run = result
        ctx.result.status = result.status
        ctx.args = dict(execution.args)
        return result

    # ------------------------------------------------------------------ replanning

    async def _replan(self, ctx: RunContext) -> bool:
        res = ctx.result
        run, plan = res.run, res.plan
        if run is None or plan is None:
            return False
        failed = [sid for sid, r in run.steps.items() if r.status == StepStatus.FAILED]
        if not failed and not run.rejected_stages:
            return False
        finished = _reusable(plan, run)
        res.replans += 1
        ctx.trace.note("replanning", number=res.replans, failed=failed, reused=list(finished))
        planning = await ctx.planner.replan(
            ctx.goal,
            plan,
            {sid: run.steps[sid].output for sid in finished},
            _failure_text(plan, run, failed, ctx.args) + stage_failure_text(plan, run, finished),
            summary_chars=self.summary_chars,
        )
        res.attempts.extend(planning.attempts)
        res.plan = planning.plan
        record = await self.approve(ctx, planning.plan, f"replan {res.replans}", finished)
        if record is None:
            return False
        if ctx.calls is not None:
            ctx.calls.new_plan(kept_calls(plan, finished, ctx.args))
        await self.execute(ctx, planning.plan, record, {sid: run.steps[sid] for sid in finished})
        return True


def _reusable(plan: Plan, run: RunResult) -> list[str]:
    """Succeeded steps whose dependencies all succeeded too (so the kept plan is whole)."""
    ok = {sid for sid, r in run.steps.items() if r.status == StepStatus.SUCCEEDED}
    changed = True
    while changed:
        changed = False
        for sid in list(ok):
            if sid not in plan.by_id or any(d not in ok for d in plan.step(sid).depends_on):
                ok.discard(sid)
                changed = True
    return [s.id for s in plan.steps if s.id in ok]


def _failure_text(plan: Plan, run: RunResult, failed: list[str], args: Mapping[str, Any]) -> str:
    import json

    lines = []
    for sid in failed:
        step, r = plan.step(sid), run.steps[sid]
        calls = f"tool {step.tool}" if step.action == "tool_call" else step.action
        error = (r.error or {}).get("message") or r.reason or "failed"
        shown = json.dumps(args.get(sid, step.args), ensure_ascii=False, default=str)[:1000]
        lines.append(f"- step {sid} ({calls}) with arguments {shown} failed: {error}")
    skipped = [sid for sid, r in run.steps.items() if r.status == StepStatus.SKIPPED]
    if skipped:
        lines.append(f"Not run because of it: {', '.join(skipped)}.")
    return "\n".join(lines)


def _first_failure(run: RunResult) -> str | None:
    for sid, r in run.steps.items():
        if r.status == StepStatus.FAILED:
            return f"step '{sid}' failed: {(r.error or {}).get('message') or r.reason}"
    return None


async def cancel(task: asyncio.Task[Any]) -> None:
    """Cancel ``task`` and wait for it to finish cancelling."""
    if not task.done():
        task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise  # we are being cancelled ourselves: never swallow that
