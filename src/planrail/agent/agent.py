"""The agent loop: goal → plan → validate → approve → execute → (replan → approve → execute)*.

Everything the run spends on models goes through one :class:`~planrail.llm.BudgetMeter`:
planning, repairs, replans and ``llm_call`` steps. With streaming, read-only steps start while
the plan is still being written (see :mod:`planrail.agent.streaming`); everything that changes
the world waits for the whole plan's validation and approval.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from planrail.agent.approval import ApprovalCallback, ApprovalPolicy, side_effecting_steps
from planrail.agent.result import AgentResult, Trace
from planrail.agent.stages import kept_calls, stage_failure_text
from planrail.clock import SYSTEM_CLOCK
from planrail.engine.approval import strict_answer
from planrail.engine.call_guard import CallGuard
from planrail.engine.checkpoint import load_result
from planrail.engine.executor import Execution
from planrail.engine.gate import RunReplannedError, check_current, mark_replanned
from planrail.engine.guard import ToolCallCount
from planrail.engine.result import RunResult, StepResult
from planrail.engine.run_ids import MAX_RUN_ID_LENGTH, FailureMode, check_new_run_id, new_run_id
from planrail.errors import ApprovalRefusedError, ExecutionError
from planrail.llm.base import LLM
from planrail.llm.budget import Budget, BudgetMeter, MeteredLLM, PriceTable
from planrail.llm.errors import BudgetExceededError, LLMError
from planrail.plan.compiled import CompiledPlan
from planrail.plan.loader import PlanLimits
from planrail.plan.model import Plan
from planrail.plan.secrets import Redactor
from planrail.plan.strict_json import surrogate_problem
from planrail.plan.tools import AnyTool, ToolRegistry, ToolRunner
from planrail.planner.finished import ReplanView, shape
from planrail.planner.planner import Planner, PlanningError, PromptMode
from planrail.planner.retry import LLMRetry
from planrail.planner.schema import DEFAULT_MAX_STEPS
from planrail.policies.limits import RunPolicy
from planrail.policies.security import ApproveCall, SecurityPolicy
from planrail.runs.budget import record_of
from planrail.runs.build import prepare, validation_options
from planrail.runs.llm_step import LLMStepHandler
from planrail.store.base import RunRecord, Store
from planrail.types import Clock, Observer, StepStatus

__all__ = ["Agent", "RunContext"]

log = logging.getLogger("planrail")


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
    run_id: str = ""
    """The store's run id of the first plan; replan N runs as ``RUN_ID-rN``."""
    calls: CallGuard | None = None
    """The repeated-call guard, shared by the plan and its replans."""
    tool_calls: ToolCallCount = field(default_factory=ToolCallCount)
    """The tool calls the security guard admitted, counted over the plan and its replans:
    ``SecurityPolicy.max_tool_calls`` bounds them all."""
    redactor: Redactor | None = None
    """The last execution's redactor (the replan prompt never carries a secret)."""


class Agent:
    """Plans with a model, has the plan approved, executes it, replans on failure.

    ``approval`` is asked whenever ``approval_policy`` names steps (default: those that change
    the world); without a callback such a plan is refused. ``max_replans`` (default 0) bounds
    how often a failed run is replanned; ``max_steps`` (default 10) is the most steps one plan
    (or replan) may have, in the schema the model is sent and in its answer. ``stream`` lets
    read-only steps start while the plan is still streaming, when the model streams (for a new
    run: one the store holds under ``run_id`` is planned whole first).

    Every plan runs through the one run path (:func:`planrail.runs.prepare`): with ``store``
    each plan version is a stored, resumable run (the first as ``run_id``, replan N as
    ``run_id-rN``), under ``security`` and ``policy``, observed by ``observers``.
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
        failure_mode: FailureMode | None = None,
        models: Callable[[str], LLM] | None = None,
        summary_chars: int = 4000,
        replan_view: ReplanView | None = None,
        store: Store | None = None,
        security: SecurityPolicy | None = None,
        policy: RunPolicy | None = None,
        tool_runner: ToolRunner | None = None,
        approve_call: ApproveCall | None = None,
        run_id: str | None = None,
        prompt: PromptMode = "auto",
        max_steps: int = DEFAULT_MAX_STEPS,
    ) -> None:
        if max_replans < 0:
            raise ValueError("max_replans must be >= 0")
        if max_steps < 1:
            raise ValueError("max_steps must be at least 1")
        self.max_steps = max_steps
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
        self.failure_mode: FailureMode | None = failure_mode
        self.models = models
        self.summary_chars = summary_chars
        self.replan_view = replan_view or ReplanView(max_chars=summary_chars)
        """How much of the finished outputs a replan prompt carries (by shape, bounded)."""
        self.store = store
        self.security = security
        self.policy = policy or RunPolicy()
        """The run policy of every execution (repeated-call guard, limits, resources)."""
        self.tool_runner = tool_runner
        self.approve_call = approve_call
        if run_id is not None:  # checked before any model is asked, as Execution checks it
            check_new_run_id(run_id)
            last = f"{run_id}-r{max_replans}"  # the longest id a replan gets
            if max_replans and len(last) > MAX_RUN_ID_LENGTH:
                raise ExecutionError(
                    f"the run id is {len(run_id)} characters, and its replans' ids"
                    f" ({run_id[:8]}…-r1 to -r{max_replans}) would pass the"
                    f" {MAX_RUN_ID_LENGTH} allowed"
                )
        self.run_id = run_id
        self.prompt: PromptMode = prompt
        """The planner's prompt mode: ``full``, ``compact`` or ``auto`` (by context size)."""

    # ------------------------------------------------------------------ the loop

    async def run(self, goal: str) -> AgentResult:
        """Plan, approve and execute ``goal``; never raises for a failed, refused or invalid
        run (look at ``status`` and ``reason``). A goal that is empty, not Unicode text or
        longer than a plan's strings may be is ``invalid`` before any model is asked; one that
        is not a ``str`` is a TypeError."""
        ctx = self._context(goal)
        res = ctx.result
        problem = _goal_problem(goal)
        if problem is not None:  # refused before any model is asked (and paid)
            res.status, res.reason = "invalid", problem
            res.usage = ctx.meter.to_dict()
            return res
        try:
            stored = self._check_current()
            await self._first(ctx, stored is not None)
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
        except (LLMError, RunReplannedError) as exc:
            res.status, res.reason = "error", exc.message
        except ApprovalRefusedError as exc:  # an operator refused the run under this id
            res.status, res.reason = "refused", exc.message
            if res.run is None and self.store is not None and exc.run_id is not None:
                res.run = load_result(self.store, exc.run_id)
        if ctx.meter.exceeded is not None and res.status != "refused":
            res.status, res.reason = "budget_exceeded", ctx.meter.exceeded.message
            ctx.trace.note("budget_exceeded", limit=ctx.meter.exceeded.limit)
        elif res.status == "failed" and res.reason is None and res.run is not None:
            res.reason = res.run.why
        res.usage = ctx.meter.to_dict()
        return res

    def _check_current(self) -> RunRecord | None:
        """Before any model is asked (and paid), what every door asks of a stored run under
        the given ``run_id`` (:func:`~planrail.engine.gate.check_current`): an operator refused
        it (:class:`ApprovalRefusedError`: ``refused``), or a replan replaced it
        (:class:`~planrail.engine.gate.RunReplannedError`: ``error``). The stored run, if any."""
        if self.store is None or self.run_id is None:
            return None
        stored = self.store.get_run(self.run_id)
        if stored is not None:
            check_current(stored)
        return stored

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
            max_steps=self.max_steps,
            retry=self.retry,
            clock=self.clock,
            options=validation_options(self.security),
            on_event=lambda kind, data: self._planner_event(trace, kind, data),
            prompt=self.prompt,
        )
        result = AgentResult(goal, trace=trace.events)
        return RunContext(
            goal,
            meter,
            llm,
            trace,
            planner,
            LLMStepHandler(llm, models=models),
            result,
            run_id=self.run_id if self.run_id is not None else new_run_id(),
            calls=CallGuard.for_policy(self.policy),
        )

    def _planner_event(self, trace: Trace, kind: str, data: dict[str, Any]) -> None:
        """Planner events go to the agent's trace and to observers that make spans of them."""
        trace.note(kind, **{k: v for k, v in data.items() if k not in ("at", "usage", "model")})
        for observer in self.observers:
            forward = getattr(observer, "on_planner_event", None)
            if forward is not None:
                try:
                    forward(kind, data)
                except Exception:
                    log.exception("observer %r failed on planner event %s", observer, kind)

    async def _first(self, ctx: RunContext, stored: bool) -> None:
        # A run stored under the given id (``stored``) resumes if the plan is its own: that is
        # known only once the plan is whole, so nothing starts early (streaming is for new runs).
        if self.stream and ctx.llm.supports_streaming and not stored:
            from planrail.agent.streaming import run_streamed

            await run_streamed(self, ctx)
            return
        planning = await ctx.planner.plan(ctx.goal)
        ctx.result.attempts.extend(planning.attempts)
        ctx.result.plan = planning.plan
        await self.execute(ctx, planning.report.compiled or planning.plan, reason="plan")

    # ------------------------------------------------------------------ pieces

    def approver(self, ctx: RunContext, reason: str) -> Any:
        """The approver handed to the run's gate: the agent's callback, with the asking noted
        in the agent's trace (and ``refused`` recorded on the result)."""

        async def ask_callback(request: Any) -> bool | None:
            ctx.trace.note("approval_requested", reason=reason, steps=list(request.steps))
            if self.approval is None:
                answer: bool | None = False
            else:
                raw = self.approval(request)
                raw = await raw if inspect.isawaitable(raw) else raw
                answer = strict_answer(raw, self.approval)  # "no" is truthy: not a yes
            ctx.trace.note("approved" if answer else "refused", reason=reason)
            if not answer:
                ctx.result.status = "refused"
                steps = ", ".join(request.steps)
                if self.approval is None:
                    ctx.result.reason = (
                        f"{steps} need approval, but no approval callback was given"
                        " (pass approval=..., or approve_all)"
                    )
                else:
                    decision = "refused" if answer is False else "deferred"
                    ctx.result.reason = (
                        f"approval {decision} for {steps}: nothing that changes the world was run"
                    )
            return answer

        ask_callback.label = "approval callback"  # type: ignore[attr-defined]
        return ask_callback

    def execution(
        self,
        ctx: RunContext,
        plan: Plan | CompiledPlan,
        *,
        reason: str = "plan",
        open_plan: bool = False,
        reuse: Mapping[str, StepResult] | None = None,
        previous: Plan | None = None,
    ) -> Execution:
        """The execution of one plan version, built by the one run path (``previous``: the
        version before it, whose difference the approver is shown)."""
        version = len(ctx.result.runs)
        run_id = ctx.run_id if version == 0 else f"{ctx.run_id}-r{version}"
        if version and self.store is not None:  # the version it replaces is not resumed
            mark_replanned(self.store, ctx.result.runs[-1].run_id, run_id)
        common: dict[str, Any] = {
            "run_id": run_id,
            "security": self.security,
            "policy": self.policy,
            "approver": self.approver(ctx, reason),
            "approve_call": self.approve_call,
            "observers": [
                *(o for o in self.observers if not hasattr(o, "attach")),
                ctx.trace,
            ],
            "handlers": {"llm_call": ctx.handler},
            "tool_runner": self.tool_runner,
            "max_concurrency": self.max_concurrency,
            "failure_mode": self.failure_mode,
            "clock": self.clock,
            "restored": reuse,
            "replaces": ctx.result.runs[-1].run_id if version else None,
            "reason": reason,
            "call_guard": ctx.calls,
            "tool_calls": ctx.tool_calls,
            "budget": record_of(ctx.meter) if ctx.meter.limited else None,
            "previous": previous,
        }
        if open_plan:  # streamed: validated step by step, checkpointed once sealed
            execution = Execution(
                plan,
                self.registry,
                open_plan=True,
                store=self.store,
                approval_policy=self.approval_policy,
                **common,
            )
        else:
            execution = prepare(
                plan,
                self.registry,
                store=self.store,
                approval_policy=self.approval_policy,
                **common,
            )
        for observer in self.observers:  # traces and OTel learn each plan version
            if hasattr(observer, "attach"):
                observer.attach(execution)
        return execution

    async def execute(
        self,
        ctx: RunContext,
        plan: Plan | CompiledPlan,
        reuse: Mapping[str, StepResult] | None = None,
        *,
        reason: str = "plan",
        previous: Plan | None = None,
    ) -> RunResult:
        """Run ``plan``; steps in ``reuse`` are not executed again: their outputs are reused."""
        execution = self.execution(ctx, plan, reason=reason, reuse=reuse, previous=previous)
        ctx.trace.note("run_built", run_id=execution.run_id, reason=reason)
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
        if result.status == "awaiting_approval":
            ctx.result.status = "refused"
        else:
            ctx.result.status = result.status
        ctx.args = dict(execution.args)
        ctx.redactor = execution.redactor
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
        if self.security is not None and ctx.tool_calls.spent(self.security):
            # no call of a new plan would be admitted: the run ends here
            ctx.trace.note("not_replanned", limit="max_tool_calls")
            if run.error is None:  # else the run's own error says so
                res.reason = (
                    f"{run.why}; not replanned: its {self.security.max_tool_calls:,} tool calls"
                    " (SecurityPolicy.max_tool_calls) are spent"
                )
            return False
        finished = _reusable(plan, run)
        res.replans += 1
        ctx.trace.note("replanning", number=res.replans, failed=failed, reused=list(finished))
        planning = await ctx.planner.replan(
            ctx.goal,
            plan,
            {sid: run.steps[sid].output for sid in finished},
            _failure_text(plan, run, failed, ctx.args, self.replan_view, ctx.redactor)
            + stage_failure_text(plan, run, finished),
            view=self.replan_view,
        )
        res.attempts.extend(planning.attempts)
        res.plan = planning.plan
        reuse = {sid: run.steps[sid] for sid in finished}
        if ctx.calls is not None:
            ctx.calls.new_plan(kept_calls(plan, finished, ctx.args))
        replanned = planning.report.compiled or planning.plan
        await self.execute(ctx, replanned, reuse, reason=f"replan {res.replans}", previous=plan)
        return res.status != "refused"


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


def _failure_text(
    plan: Plan,
    run: RunResult,
    failed: list[str],
    args: Mapping[str, Any],
    view: ReplanView,
    redactor: Redactor | None,
) -> str:
    """The failed steps for the replan prompt: arguments by shape (strings cut, secrets
    redacted), errors cut to ``view.value_chars * 4``."""
    import json

    if redactor is not None:  # learn the run's secret values (the store may not have)
        redactor.learn_outputs(plan, [run])
    lines = []
    for sid in failed:
        step, r = plan.step(sid), run.steps[sid]
        calls = f"tool {step.tool}" if step.action == "tool_call" else step.action
        error = str((r.error or {}).get("message") or r.reason or "failed")
        used = args.get(sid, step.args)
        if redactor is not None:
            used, error = redactor.args(sid, used), redactor.text(error)
        shown = json.dumps(shape(used, view), ensure_ascii=False, default=str)[:1000]
        error = error[: view.value_chars * 4]
        lines.append(f"- step {sid} ({calls}) with arguments {shown} failed: {error}")
    skipped = [sid for sid, r in run.steps.items() if r.status == StepStatus.SKIPPED]
    if skipped:
        lines.append(f"Not run because of it: {', '.join(skipped)}.")
    return "\n".join(lines)


def _goal_problem(goal: str) -> str | None:
    """Why no plan could hold ``goal``, or None: text that is not Unicode (no model could be
    sent it, no store could keep it), or longer than a plan's strings may be (every plan the
    model wrote would be invalid, each one paid for), or empty (nothing to plan for)."""
    if not isinstance(goal, str):
        raise TypeError(f"the goal must be text (a str), got {type(goal).__name__}")
    if not goal.strip():
        return "the goal is empty: say what the plan should achieve (no model was asked)"
    problem = surrogate_problem(goal)
    if problem is not None:
        return f"the goal {problem} (undecodable bytes on a command line make these)"
    limit = PlanLimits().max_string_length
    if len(goal) > limit:
        return (
            f"the goal is {len(goal):,} characters; a plan's strings hold at most {limit:,}"
            " (PlanLimits.max_string_length): no model was asked"
        )
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
