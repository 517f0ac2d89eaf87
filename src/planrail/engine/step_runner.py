"""Running one step: resolve its arguments from real outputs, validate them, perform its action.

The executor decides *when* a step runs; this module decides *how*. It never touches the
scheduler and never writes to a store: it returns an :class:`Outcome`.

Around the action sit the step's policies (``docs/policies.md``), outermost first: the ``when``
guard, the run deadline, the ``for_each`` fan-out (one unit of work per item), the ``repeat``
loop, the attempt loop of :mod:`planrail.engine.attempts` (retries, timeouts, resource limits),
and the ``fallback`` once a unit has failed for good.

Each action is performed by an :class:`ActionHandler`: ``tool_call`` by :class:`ToolAction`
(built in), ``llm_call`` by the LLM layer's handler, ``condition_check`` by the predicate
evaluator. The executor passes the handlers it has; a step whose action has no handler fails
with a clear error.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import random
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

from planrail.clock import SYSTEM_CLOCK
from planrail.engine.actions import (
    ActionHandler,
    ArgumentError,
    Call,
    ConditionAction,
    OutputError,
    ToolAction,
)
from planrail.engine.attempts import (
    Attempt,
    AttemptLoop,
    BeforeAttempt,
    CallCheck,
    OnAttempt,
    Result,
    Tally,
)
from planrail.engine.checkpoint import args_hash
from planrail.engine.outcome import Outcome, failed, fan_in, in_doubt, message, outcome_of
from planrail.engine.resources import ResourceGate
from planrail.engine.runners import RUNNING_KEYS, abandoned_here, is_ctrl_c, keep_running
from planrail.engine.step_memo import StepMemo
from planrail.errors import (
    CallCrashedError,
    PlanrailError,
    ReferenceResolutionError,
    RepeatedCallError,
    ToolError,
    error_dict,
    error_message,
)
from planrail.plan.first import compile_args
from planrail.plan.model import Step
from planrail.plan.refs import Parse, parse_template
from planrail.plan.resolve import copy_json, resolve_value
from planrail.plan.tools import StepContext, Tool, ToolRegistry, ToolSpec
from planrail.policies.limits import LoopExhaustedError, RunPolicy
from planrail.policies.retry import NO_RETRY, Random, RetryPolicy
from planrail.types import Clock, StepStatus

S = StepStatus

__all__ = [
    "ActionHandler",
    "ArgumentError",
    "Call",
    "ConditionAction",
    "Outcome",
    "OutputError",
    "StepRunner",
    "ToolAction",
    "fallback_key",
]


_UNSET: Any = object()
_NO_EXTRA: dict[str, Any] = {}
"""A plain call's extra record fields: none (shared, never written)."""


_FALLBACK = "fallback"


def fallback_key(key: str) -> str:
    """The idempotency key of the fallback call of the unit keyed ``key`` (``RUN_ID:STEP`` or
    ``RUN_ID:STEP:i``): its own, the same on every attempt and resume, so that its intent (with
    the fallback's arguments) never meets the step's (with the step's). The one place a call's
    key is made: the ``before_attempt`` hook, and so the call's intent, receive it."""
    return f"{key}:{_FALLBACK}"


class _Overlay(Mapping[str, Any]):
    """The run's outputs plus the local names ``item`` / ``self``, without copying them."""

    __slots__ = ("base", "local")

    def __init__(self, base: Mapping[str, Any], local: dict[str, Any]) -> None:
        self.base = base
        self.local = local

    def __getitem__(self, key: str) -> Any:
        return self.local[key] if key in self.local else self.base[key]

    def __contains__(self, key: object) -> bool:
        return key in self.local or key in self.base

    def __iter__(self) -> Iterator[str]:
        yield from self.local
        yield from (k for k in self.base if k not in self.local)

    def __len__(self) -> int:
        return len(self.local) + sum(1 for k in self.base if k not in self.local)


@dataclass(slots=True)
class _Job:
    step: Step
    handler: ActionHandler
    outputs: Mapping[str, Any]
    base: StepContext
    priority: float


class StepRunner:
    """Runs steps: ``when`` guards, ``for_each`` fan-out, ``repeat`` loops, retries, timeouts,
    resource limits and fallbacks around the step's action (see ``docs/policies.md``).

    One runner serves a whole run: ``policy`` holds the run's limits, ``clock`` is all time.
    """

    def __init__(
        self,
        handlers: Mapping[str, ActionHandler],
        goal: str = "",
        before_attempt: BeforeAttempt | None = None,
        *,
        clock: Clock = SYSTEM_CLOCK,
        policy: RunPolicy | None = None,
        tools: ToolRegistry | None = None,
        priorities: Mapping[str, float] | None = None,
        rng: Random | None = None,
        gate: ResourceGate | None = None,
        on_attempt: OnAttempt | None = None,
        guard: CallCheck | None = None,
        stage_goals: Mapping[str, str] | None = None,
        items_done: Mapping[str, Mapping[int, tuple[Any, Any]]] | None = None,
        on_item: Callable[[Step, int, Any, Any], None] | None = None,
        iterations_done: Mapping[str, Mapping[str, list[dict[str, Any]]]] | None = None,
        on_iteration: Callable[[Step, int | None, Any, dict[str, Any]], None] | None = None,
        parse: Parse = parse_template,
    ) -> None:
        self.handlers = dict(handlers)
        self.parse = parse
        """The parsed form of the plan's strings (its compiled plan's ``template``)."""
        self.handlers.setdefault("condition_check", ConditionAction(parse))
        self.goal = goal
        self.stage_goals: Mapping[str, str] = stage_goals if stage_goals is not None else {}
        """Each staged step's sub-goal, handed to its action with the goal anchor."""
        self.before_attempt = before_attempt
        """Called right before each attempt with (step, item index, attempt, resolved args);
        may return an awaitable. If it raises, the action is not performed."""
        self.policy = policy or RunPolicy()
        self.clock = clock
        registry = getattr(self.handlers.get("tool_call"), "registry", None)
        self.tools: ToolRegistry | None = tools if tools is not None else registry
        self.priorities: Mapping[str, float] = priorities if priorities is not None else {}
        """Each step's priority when it waits for a resource (the remaining critical path)."""
        self.gate = gate or ResourceGate(self.policy.resources, clock)
        deadline = self.policy.deadline
        self.loop = AttemptLoop(
            clock,
            self.gate,
            rng or random.Random(self.policy.seed),
            deadline=None if deadline is None else clock.monotonic() + deadline,
            before_attempt=before_attempt,
            on_attempt=on_attempt,
            guard=guard,
        )
        self.memo = StepMemo(parse, self.tools)
        """What is derived from each step once: fillers, predicates, effects, fallback steps."""
        self.items_done: Mapping[str, Mapping[int, tuple[Any, Any]]] = items_done or {}
        """Per fan-out step, the items a resume found succeeded: (item, output) by index."""
        self.on_item = on_item
        """Called with (step, index, item, output) as each item of a fan-out succeeds."""
        self.iterations_done: Mapping[str, Mapping[str, list[dict[str, Any]]]] = (
            iterations_done or {}
        )
        """Per ``repeat`` step, per unit (``""`` or an item's index): the iterations a resume
        found finished (``iteration``, ``args_hash``, ``output``, ``error``)."""
        self.on_iteration = on_iteration
        """Called with (step, item index, args, history entry) as each iteration finishes."""
        self._plain_tools: dict[str, Tool | None] = {}
        """By tool name: the tool, if its calls need no policy machinery (see _plain_tool)."""

    def resolve_args(self, step: Step, outputs: Mapping[str, Any]) -> Any:
        """The step's arguments with every reference filled from ``outputs`` (a fresh copy)."""
        return self.memo.filled(step, "args", step.args, outputs)

    def run(
        self,
        step: Step,
        outputs: Mapping[str, Any],
        context: Callable[[int], StepContext],
        *,
        priority: float | None = None,
    ) -> Awaitable[Outcome]:
        """Run ``step`` under its policies, with references resolved from ``outputs``.

        A false ``when`` guard gives ``skipped`` with reason ``condition false``; a run deadline
        that has passed gives a ``fatal`` failure (the executor stops the run).
        """
        handler = self.handlers.get(step.action)
        if handler is None:
            hint = " (pass an llm= client)" if step.action == "llm_call" else ""
            return _now(
                Outcome(
                    S.FAILED,
                    error=error_dict(
                        "ConfigurationError",
                        f"no handler for action '{step.action}' in this run{hint}",
                    ),
                )
            )
        if step.when is not None:
            try:
                if not self.memo.predicate(step, "when", step.when).evaluate(outputs):
                    return _now(Outcome(S.SKIPPED, reason="condition false"))
            except (PlanrailError, ValueError) as exc:
                return _now(failed(exc, f"its 'when' guard could not be evaluated: {message(exc)}"))
        deadline = self.loop.deadline
        if deadline is not None and self.clock.monotonic() >= deadline:
            late = self.loop.deadline_error(step.id)
            return _now(Outcome(S.FAILED, error=error_dict(late), reason=late.message, fatal=True))
        tool = self._plain_tool(step, handler)
        if tool is not None and not RUNNING_KEYS:  # else the attempt loop checks its key
            assert isinstance(handler, ToolAction)
            return self._plain(step, tool, handler, outputs, context)
        prio = self.priorities.get(step.id, 0.0) if priority is None else priority
        return self._with_policies(_Job(step, handler, outputs, context(1), prio))

    async def _with_policies(self, job: _Job) -> Outcome:
        if job.step.for_each is not None:
            return await self._fan_out(job)
        tally = Tally()
        return outcome_of(await self._unit(job, None, tally), tally)

    # ------------------------------------------------------------------ the plain step

    async def _plain(
        self,
        step: Step,
        tool: Tool,
        action: ToolAction,
        outputs: Mapping[str, Any],
        context: Callable[[int], StepContext],
    ) -> Outcome:
        """One call of the step's tool: what :meth:`_unit` does for it, minus the policies.

        Its arguments are filled once, so they are not compiled for a second fill (nor is the
        step remembered as filled: a set entry per step for nothing)."""
        try:
            args = resolve_value(step.args, outputs, self.memo.first, self.parse)
        except (ReferenceResolutionError, ValueError) as exc:
            return outcome_of(Result(False, exc=exc), Tally())
        loop = self.loop
        if loop.guard is not None:
            refused = loop.refused(step, None, _NO_EXTRA, args)
            if refused is not None:
                return outcome_of(refused, Tally())
        # Its one attempt, announced as AttemptLoop.run announces each (key None: the step's
        # own, which a context would hold; none is made for a tool that takes none).
        before = loop.before_attempt
        if before is not None:
            hooked = before(step, None, 1, args, None)
            if hooked is not None and inspect.isawaitable(hooked):
                await hooked
        began = self.clock.monotonic()
        ctx = context(1) if tool.context_param is not None else None
        try:
            try:
                output = action.finish(tool, await action.start(tool, copy_json(args), ctx))
            except Exception:
                raise
            except BaseException as exc:
                if isinstance(exc, asyncio.CancelledError):
                    left = abandoned_here()  # its thread runs on: a later run here waits
                    if left:
                        keep_running(context(1).idempotency_key, left)
                escaped(step.id, 1, exc)
        except Exception as exc:
            tally = Tally(1)
            return outcome_of(loop.settle_failed(step, args, tally, began, exc), tally)
        return Outcome(S.SUCCEEDED, output, attempts=1, args=args, history=loop.settle(step, began))

    def _plain_tool(self, step: Step, handler: ActionHandler) -> Tool | None:
        """The tool of a step with no policy around its one call (most steps), else None.

        Such a step takes the short path of :meth:`_plain`. What depends on the tool alone is
        decided once per tool.
        """
        # Any ToolAction (a subclass too) keeps the short path; only Python tools take it.
        if not isinstance(handler, ToolAction) or self.loop.deadline is not None:
            return None
        if not _POLICY_FIELDS.isdisjoint(step.__pydantic_fields_set__) and any(
            getattr(step, f) not in (None, False) for f in _POLICY_FIELDS
        ):
            return None
        name = step.tool or ""
        tool: Tool | None = self._plain_tools.get(name, _UNSET)
        if tool is _UNSET:
            found = handler.registry.find(name)
            plain = (
                isinstance(found, Tool)
                and found.spec.timeout is None
                and not self.gate.limited(found.spec.resource)
                and self._retry(step, found.spec).max_attempts == 1
            )
            tool = self._plain_tools[name] = found if plain and isinstance(found, Tool) else None
        return tool

    # ------------------------------------------------------------------ one unit of work

    async def _unit(self, job: _Job, item: tuple[int, Any] | None, tally: Tally) -> Result:
        """The step once (or one item of it): loop or retries, then its fallback if it failed."""
        step = job.step
        outputs = job.outputs if item is None else _Overlay(job.outputs, {"item": item[1]})
        index = None if item is None else item[0]
        try:
            args = self.memo.filled(step, "args", step.args, outputs)
        except (ReferenceResolutionError, ValueError) as exc:
            res = Result(False, exc=exc)
        else:
            if step.repeat is not None:
                res = await self._repeat(job, outputs, args, index, tally)
            else:
                res = await self.loop.run(
                    self._attempt(job, step, outputs, args, index, tally), tally
                )
        # A call whose effect is in doubt takes no fallback: the first may have happened.
        if not res.ok and not res.fatal and step.fallback is not None and not in_doubt(res):
            res = await self._fallback(job, outputs, index, tally, res)
        return res

    def _attempt(
        self,
        job: _Job,
        step: Step,
        outputs: Mapping[str, Any],
        args: Any,
        index: int | None,
        tally: Tally,
        history: tuple[Mapping[str, Any], ...] = (),
        **extra: Any,
    ) -> Attempt:
        base = job.base
        key = base.idempotency_key if index is None else f"{base.idempotency_key}:{index}"
        primary = step is job.step
        if not primary:  # the fallback tool's call
            key = fallback_key(key)
        handler = job.handler if primary else self.handlers["tool_call"]
        resolve = functools.partial(_resolve, self.parse, outputs)

        async def perform(n: int) -> Any:
            ctx = StepContext(base.run_id, base.step_id, n, key, index, history)
            call = Call(
                step,
                copy_json(args),
                ctx,
                self.goal,
                resolve,
                outputs=outputs,
                stage_goal=self.stage_goals.get(job.step.id),
                parse=self.parse,
            )
            try:
                return await handler(call)
            except Exception:
                raise
            except BaseException as exc:
                escaped(base.step_id, n, exc)
            finally:
                tally.add_usage(call.usage)

        spec = self.tools.spec(step.tool) if self.tools is not None and step.tool else None
        resource = step.resource or (spec.resource if spec is not None else None)
        if resource is None and primary:
            named = getattr(handler, "resource", None)
            resource = named if isinstance(named, str) else None
        timeout = step.timeout
        if timeout is None and spec is not None:
            timeout = spec.timeout
        effect = self.memo.effect(step)
        return Attempt(
            step=step,
            perform=perform,
            args=args,
            policy=self._retry(step, spec),
            timeout=timeout,
            total_timeout=step.total_timeout,
            resource=resource,
            priority=job.priority,
            item=index,
            extra=extra,
            keyed=effect.may_rerun,
            overlap=effect.retry_may_overlap,
            key=key,
        )

    def _retry(self, step: Step, spec: ToolSpec | None) -> RetryPolicy:
        """The step's retry policy: its own, else its tool's, else the run's default."""
        if step.retry is not None:
            return RetryPolicy.from_spec(step.retry)
        if spec is not None and spec.retry is not None:
            return RetryPolicy.from_spec(spec.retry)
        return self.policy.default_retry or NO_RETRY

    async def _repeat(
        self, job: _Job, outputs: Mapping[str, Any], args: Any, index: int | None, tally: Tally
    ) -> Result:
        """Run the step until ``repeat.until`` holds on its output, at most the iterations."""
        step = job.step
        assert step.repeat is not None
        cap = min(step.repeat.max_iterations, self.policy.max_iterations)
        try:
            until = self.memo.predicate(step, "repeat.until", step.repeat.until)
        except (PlanrailError, ValueError) as exc:
            return Result(False, exc=exc, args=args)
        history = self._finished_iterations(step, index, args)
        last: Result | None = None
        if history:  # a resume: the loop goes on after the iterations that finished
            done = history[-1]
            if done["error"] is None:
                try:
                    if until.evaluate(_Overlay(outputs, {"self": done["output"]})):
                        return Result(True, copy_json(done["output"]), args=args)
                except PlanrailError as exc:
                    return Result(False, exc=exc, args=args)
        for iteration in range(len(history) + 1, cap + 1):
            attempt = self._attempt(
                job, step, outputs, args, index, tally, tuple(history), iteration=iteration
            )
            res = await self.loop.run(attempt, tally)
            if res.fatal or isinstance(res.exc, RepeatedCallError):  # no other iteration helps
                return res
            if in_doubt(res):  # the call may have happened: no other iteration may follow it
                return res
            history.append(
                {
                    "iteration": iteration,
                    "args": copy_json(args),
                    "output": copy_json(res.output) if res.ok else None,
                    "error": None if res.exc is None else error_dict(res.exc),
                }
            )
            if self.on_iteration is not None:
                self.on_iteration(step, index, args, history[-1])
            if res.ok:
                try:
                    if until.evaluate(_Overlay(outputs, {"self": res.output})):
                        return res
                except PlanrailError as exc:
                    return Result(False, exc=exc, args=args)
            last = res
        capped = " (capped by the run's max_iterations)" if cap < step.repeat.max_iterations else ""
        why = f"; the last iteration failed: {message(last.exc)}" if last and last.exc else ""
        return Result(
            False,
            exc=LoopExhaustedError(
                f"step '{step.id}' stopped after {cap} iterations{capped} without its 'until'"
                f" condition holding{why}",
                step_id=step.id,
            ),
            args=args,
        )

    def _finished_iterations(
        self, step: Step, index: int | None, args: Any
    ) -> list[dict[str, Any]]:
        """The history of the iterations of this loop a resume found finished (none if its
        arguments changed since: the loop then starts over)."""
        found = self.iterations_done.get(step.id, {}).get("" if index is None else str(index))
        if not found:
            return []
        digest = args_hash(args)
        if any(e.get("args_hash") != digest for e in found):
            return []
        return [
            {
                "iteration": e.get("iteration"),
                "args": copy_json(args),
                "output": copy_json(e.get("output")),
                "error": e.get("error"),
            }
            for e in found
        ]

    async def _fallback(
        self, job: _Job, outputs: Mapping[str, Any], index: int | None, tally: Tally, failed: Result
    ) -> Result:
        """The step failed for good: use its fallback value or call its fallback tool."""
        step = job.step
        fb = step.fallback
        assert fb is not None
        why = message(failed.exc) if failed.exc is not None else "it failed"
        try:
            if "value" in fb.model_fields_set:
                value = self.memo.filled(step, "fallback.value", fb.value, outputs)
                return Result(
                    True,
                    value,
                    degraded=True,
                    args=failed.args,
                    reason=f"used its fallback value after: {why}",
                )
            args = self.memo.filled(step, "fallback.args", fb.args, outputs)
        except (ReferenceResolutionError, ValueError) as exc:
            return Result(
                False,
                exc=exc,
                args=failed.args,
                reason=f"it failed ({why}) and its fallback could not be resolved",
            )
        if "tool_call" not in self.handlers:
            return failed
        fb_step = self.memo.fallback_step(step)
        res = await self.loop.run(
            self._attempt(job, fb_step, outputs, args, index, tally, fallback=fb.tool), tally
        )
        if res.ok:
            res.degraded = True
            res.reason = f"used its fallback tool '{fb.tool}' after: {why}"
        else:
            res.reason = f"it failed ({why}) and so did its fallback tool '{fb.tool}'"
        return res

    # ------------------------------------------------------------------ fan-out

    async def _fan_out(self, job: _Job) -> Outcome:
        """Run the unit once per item of the ``for_each`` list; the output keeps input order."""
        step = job.step
        try:
            items = self.memo.filled(step, "for_each", step.for_each, job.outputs)
        except (ReferenceResolutionError, ValueError) as exc:
            return failed(exc, f"its for_each list could not be resolved: {message(exc)}")
        if type(items) is not list:
            kind = "null" if items is None else type(items).__name__
            bad = PlanrailError(
                f"for_each needs a list, but {step.for_each} is a {kind}", step_id=step.id
            )
            return failed(bad, bad.message)
        if len(items) > self.policy.max_items:
            bad = PlanrailError(
                f"for_each over {len(items):,} items; the run's limit is"
                f" {self.policy.max_items:,} (RunPolicy.max_items)",
                step_id=step.id,
            )
            return failed(bad, bad.message)
        results: list[Result | None] = [None] * len(items)
        tallies = [Tally() for _ in items]
        kept = self.items_done.get(step.id, {})
        for i, (item, output) in kept.items():  # a resume: items that succeeded already
            if i < len(items) and item == items[i]:
                results[i] = Result(True, output)
        todo = [i for i, r in enumerate(results) if r is None]
        order = iter(todo)
        on_item = self.on_item

        keyed = self.memo.effect(step).may_rerun

        async def worker() -> None:
            for i in order:
                try:
                    res = results[i] = await self._unit(job, (i, items[i]), tallies[i])
                except asyncio.CancelledError:
                    if tallies[i].attempts and not keyed:  # its call may have been under way
                        results[i] = Result(False, exc=_cut_off(step, i))
                    raise
                if not res.ok:
                    raise _ItemFailed
                if on_item is not None:
                    on_item(step, i, items[i], res.output)

        width = min(step.max_parallel or self.policy.default_max_parallel, max(len(todo), 1))
        try:
            async with asyncio.TaskGroup() as group:
                for _ in range(width):
                    group.create_task(worker())
        except* _ItemFailed:
            pass
        return fan_in(results, tallies)


_POLICY_FIELDS = frozenset(
    (
        "for_each",
        "repeat",
        "fallback",
        "timeout",
        "total_timeout",
        "retry",
        "resource",
        "compute",
        "remote_output",
    )
)
"""Step fields that put a policy around the call; a step that set none of them (pydantic's
``model_fields_set``) has them all at their default (None, or False for ``remote_output``)."""


async def _now(outcome: Outcome) -> Outcome:
    return outcome


class _ItemFailed(Exception):
    """Internal: an item of a fan-out failed for good; the others are cancelled."""


def _cut_off(step: Step, index: int) -> CallCrashedError:
    """The error of an item of an unsafe fan-out cancelled (another item failed) once its call
    may have started: its effect is unknown."""
    return CallCrashedError(
        f"item {index} was stopped while its call was under way (another item failed): it may"
        " or may not have happened; decide with `planrail resolve --item`",
        in_doubt=True,
        step_id=step.id,
    )


def _resolve(parse: Parse, outputs: Mapping[str, Any], value: Any) -> Any:
    return compile_args(value, parse)(outputs)


def escaped(step_id: str, attempt: int, exc: BaseException) -> NoReturn:
    """Raise what a step's action raising a :class:`BaseException` that is no
    :class:`Exception` becomes: the attempt's :class:`ToolError` — for ``SystemExit``
    (``sys.exit()`` in a tool, an ``argparse`` error: asyncio would otherwise stop the run's
    loop, and ``planrail run`` exit with the tool's code), ``GeneratorExit``, a
    ``BaseException`` subclass of the tool's own, and a ``CancelledError`` the tool raised
    while nothing cancelled its step (each left the step's task dead and the run waiting for
    it for ever). A real cancellation goes on as it is, and so does a ``KeyboardInterrupt`` on
    the main thread, where a Ctrl-C arrives (:func:`~planrail.engine.runners.is_ctrl_c`); a run
    driven on another thread (the dashboard's resumes) gets none, so there it is the tool's and
    fails the attempt."""
    if is_ctrl_c(exc):
        raise exc
    if isinstance(exc, asyncio.CancelledError):
        task = asyncio.current_task()
        if task is None or task.cancelling():
            raise exc
    if isinstance(exc, SystemExit):
        said = f"tried to end the process (SystemExit({exc.code!r}), as sys.exit() raises)"
    elif isinstance(exc, KeyboardInterrupt):
        said = "raised KeyboardInterrupt in a run off the main thread, where no Ctrl-C arrives"
    else:
        said = f"raised {type(exc).__name__}({error_message(exc)!r}), which is not an Exception"
    raise ToolError(
        f"step '{step_id}' {said}: the attempt failed instead", step_id=step_id, attempt=attempt
    ) from None
