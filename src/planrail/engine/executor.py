"""The asyncio executor: drives the scheduler, starts each ready step the moment it is ready.

There is no polling and there are no levels: when a step finishes, the task that ran it tells
the scheduler, and any dependent that became ready is started right there. :meth:`Execution.iter`
yields the events as they happen; :meth:`Execution.run` is a thin loop over it.

With a store, outcomes are committed before dependents start: completions that arrive in the
same turn of the event loop are committed together in one transaction (then their dependents
start), which keeps the durable path cheap without weakening the guarantee.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import uuid
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any, Literal

from planrail._memory import long_lived
from planrail.clock import SYSTEM_CLOCK
from planrail.engine.checkpoint import Checkpointer, RunBusyError
from planrail.engine.events import Event, EventType
from planrail.engine.result import RunResult, StepResult
from planrail.engine.runners import LocalRunner
from planrail.engine.scheduler import Node, Scheduler, Skip
from planrail.engine.step_runner import (
    ActionHandler,
    Outcome,
    StepRunner,
    ToolAction,
    error_info,
)
from planrail.errors import PlanrailError, ReferenceResolutionError
from planrail.plan.graph import critical_path_lengths
from planrail.plan.model import Plan, Step
from planrail.plan.provenance import Provenance
from planrail.plan.refs import resolve_value
from planrail.plan.secrets import Redactor
from planrail.plan.tools import AnyTool, StepContext, Tool, ToolRegistry, ToolRunner
from planrail.policies.limits import RunPolicy
from planrail.policies.security import (
    ApproveCall,
    SecurityGuard,
    SecurityPolicy,
    check_approval,
    denial_of,
)
from planrail.store.base import Store
from planrail.types import Clock, Observer, StepStatus

__all__ = ["Execution", "FailureMode", "new_run_id"]

log = logging.getLogger("planrail")

FailureMode = Literal["continue", "fail_fast"]

E = EventType
S = StepStatus


def new_run_id() -> str:
    """A fresh run id: ``run_`` and 12 hex digits."""
    return "run_" + uuid.uuid4().hex[:12]


class Execution:
    """One run of a validated plan.

    ``outputs`` holds the plain-JSON output of every succeeded step; arguments are resolved
    from it only, so a step can never see a value that was not really produced.
    """

    def __init__(
        self,
        plan: Plan,
        tools: ToolRegistry | Iterable[AnyTool],
        *,
        run_id: str | None = None,
        max_concurrency: int | None = None,
        failure_mode: FailureMode = "continue",
        clock: Clock = SYSTEM_CLOCK,
        observers: Iterable[Observer] = (),
        handlers: Mapping[str, ActionHandler] | None = None,
        store: Store | None = None,
        lease_ttl: float = 30.0,
        lease_wait: float = 0.0,
        open_plan: bool = False,
        approval: dict[str, Any] | None = None,
        policy: RunPolicy | None = None,
        security: SecurityPolicy | None = None,
        approve_call: ApproveCall | None = None,
        restored: Mapping[str, StepResult] | None = None,
        tool_runner: ToolRunner | None = None,
    ) -> None:
        if max_concurrency is not None and max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        self.plan = plan
        self.registry = ToolRegistry.of(tools)
        self.run_id = run_id or new_run_id()
        self.max_concurrency = max_concurrency
        self.failure_mode = failure_mode
        self.clock = clock
        self.observers = list(observers)
        self.store = store
        self.lease_ttl = lease_ttl
        self.lease_wait = lease_wait
        """Seconds to wait for a run whose lease another runner holds (0: refuse at once)."""
        self.approval = approval
        """Who approved the plan, and its hash (recorded with the run)."""
        self.results: dict[str, StepResult] = {s.id: StepResult(s.id) for s in plan.steps}
        self.outputs: dict[str, Any] = {}
        self.args: dict[str, Any] = {}
        """The resolved arguments each step ran with."""
        self.status = "pending"
        self.error: str | None = None
        self.run_output: Any = None
        self._extra_handlers = dict(handlers or {})
        self._restored: dict[str, StepResult] = dict(restored or {})
        """Steps that already succeeded (a replan or a repaired stream): reused, not run."""
        self._in_doubt: dict[str, StepResult] = {}
        self._ckpt: Checkpointer | None = None
        self._dirty: set[str] = set()
        """Steps whose record changed since the last commit."""
        self._pending_outcomes: dict[str, Outcome] = {}
        """Outcomes waiting for their commit before the scheduler hears of them."""
        self._flush_pending = False
        self._events: deque[Event] = deque()
        self._wakeup: asyncio.Event | None = None
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._own_runner = tool_runner is None
        self.tool_runner: ToolRunner = tool_runner or LocalRunner(max_concurrency or 64)
        """Where the functions of Python tools run (the tool-runner seam)."""
        self._runner: StepRunner | None = None
        self._aborted = False
        self._abort_reason = "the run was cancelled"
        if open_plan and store is not None:
            raise ValueError("a streamed (open) plan cannot be checkpointed before it is sealed")
        self._steps: dict[str, Step] = dict(plan.by_id)
        self.policy = policy or RunPolicy()
        """Resource limits, run deadline, default retry, loop and fan-out caps."""
        self._priority: dict[str, float] = {}
        """Each step's remaining critical path (its priority when it waits for a resource)."""
        self._sealed = not open_plan
        self.redactor = Redactor.for_steps(self._steps, self.registry, always=open_plan)
        """Keeps secrets out of what this run records (None: the plan has none)."""
        self._guard = (
            None
            if security is None
            else SecurityGuard(
                security,
                Provenance(self._steps, self.registry),
                run_id=self.run_id,
                approve_call=approve_call,
                on_decision=self._decided,
                redactor=self.redactor,
            )
        )
        self._held: list[str] = []
        """Ready steps of an open plan that change the world: they wait for :meth:`seal`."""
        self.scheduler = Scheduler(self._nodes(plan.steps))
        if self._sealed:
            self.scheduler.close()

    def _nodes(self, steps: Iterable[Step]) -> list[Node]:
        steps = list(steps)
        by_id = self._steps
        deps = {s.id: s.depends_on for s in steps}

        def estimate(sid: str) -> float:
            step = by_id[sid]
            if step.estimated_duration is not None:
                return step.estimated_duration
            spec = self.registry.spec(step.tool or "")
            if spec is not None and spec.estimated_duration is not None:
                return spec.estimated_duration
            return 1.0

        priority = critical_path_lengths(deps, estimate)
        self._priority.update(priority)
        return [Node(s.id, s.depends_on, s.join, priority[s.id]) for s in steps]

    # ------------------------------------------------------------------ open plans

    def extend(self, steps: Iterable[Step]) -> None:
        """Add steps to an open plan (streamed or replanned) while it runs.

        Their dependencies must be known already. Steps that change the world are held until
        :meth:`seal`; read-only steps start as soon as their dependencies are done.
        """
        if self._sealed:
            raise RuntimeError("the plan is sealed: no more steps can be added")
        new = list(steps)
        for step in new:
            if step.id in self._steps:
                raise ValueError(f"step {step.id!r} is already in the plan")
            self._steps[step.id] = step
            self.results[step.id] = StepResult(step.id)
        if self.redactor is not None:
            self.redactor.add_steps(new)
        self._skipped(self.scheduler.add(self._nodes(new)))
        if self.status == "running":
            self._dispatch()

    def seal(self, plan: Plan) -> None:
        """The whole plan has arrived, been validated and approved: release held steps.

        ``plan`` must hold every step added so far, unchanged.
        """
        check_approval(self.approval, plan.hash)
        for step in plan.steps:
            if step.id not in self._steps:
                self.extend([step])
            elif self._steps[step.id] != step:
                raise ValueError(f"step {step.id!r} changed between streaming and sealing")
        if len(plan.steps) != len(self._steps):
            raise ValueError("the sealed plan lacks steps that were streamed")
        self.plan = plan
        self._sealed = True
        self.scheduler.close()
        held, self._held = self._held, []
        for sid in held:
            self._launch(sid)
        if self._wakeup is not None:
            self._wakeup.set()
        if self.status == "running":
            self._dispatch()

    def _python_tools(self) -> list[Tool]:
        """The Python tools this plan calls (primary and fallback), for the runner to prepare;
        every Python tool for an open plan, whose later steps are not known yet."""
        if not self._sealed:
            return self.registry.python_tools()
        names = {s.tool for s in self._steps.values() if s.tool}
        names |= {s.fallback.tool for s in self._steps.values() if s.fallback and s.fallback.tool}
        return [t for t in self.registry.python_tools() if t.name in names]

    def _changes_world(self, step: Step) -> bool:
        if step.action != "tool_call":
            return False
        spec = self.registry.spec(step.tool or "")
        return spec is None or spec.side_effects != "none" or bool(spec.requires_approval)

    # ------------------------------------------------------------------ public

    @property
    def resumed(self) -> bool:
        """Whether this execution continued a run found in the store."""
        return self._ckpt is not None and self._ckpt.resumed

    async def run(self) -> RunResult:
        """Run to the end and return the result."""
        async for _ in self.iter():
            pass
        return self.result()

    async def iter(self) -> AsyncIterator[Event]:
        """Run, yielding each event as it happens. Steps keep running while the caller handles
        an event; cancelling the caller cancels the run cleanly (running steps are cancelled and
        recorded, the run is marked ``cancelled``)."""
        if self.status != "pending":
            raise RuntimeError("an Execution runs once")
        # An open plan's approval is checked when it is sealed; hashing a big plan costs, so
        # only a run bound to an approval computes it.
        if self._sealed and self.approval is not None:
            check_approval(self.approval, self.plan.hash)
        if self.store is not None:
            await self._open_checkpoint()
        self._wakeup = asyncio.Event()
        await self.tool_runner.prepare(self._python_tools())
        self._runner = StepRunner(
            {"tool_call": ToolAction(self.registry, self.tool_runner), **self._extra_handlers},
            goal=self.plan.goal,
            before_attempt=self._before_attempt,
            clock=self.clock,
            policy=self.policy,
            tools=self.registry,
            priorities=self._priority,
            on_attempt=self._on_attempt,
        )
        self.status = "running"
        heartbeat = asyncio.create_task(self._heartbeat()) if self._ckpt else None
        started: dict[str, Any] = {"steps": len(self.results), "resumed": self.resumed}
        if self._ckpt is not None:  # hashing a big plan costs; only durable runs record it
            started["plan_hash"] = self.plan.hash
        if not self.resumed:
            self._emit(E.RUN_CREATED, data=dict(started))
        if self.approval is not None:
            self._emit(E.RUN_APPROVED, data={**self.approval, "resumed": self.resumed})
        self._emit(E.RUN_STARTED, data=started)
        # The plan and what the run keeps outlive it: out of the collector's full passes.
        with long_lived():
            try:
                self._dispatch()
                while True:
                    while self._events:
                        yield self._events.popleft()
                    if self.scheduler.finished and not self._tasks and not self._flush_pending:
                        break
                    self._wakeup.clear()
                    await self._wakeup.wait()
                self._finish()
            except BaseException as exc:
                await self._cancel_all(_reason(exc))
                self.status = "cancelled"
                if isinstance(exc, PlanrailError):
                    self.error = exc.message
                self._emit(E.RUN_FINISHED, data={"status": self.status, "error": self.error})
                self._save_final()
                raise
            finally:
                if heartbeat is not None:
                    heartbeat.cancel()
                if self._own_runner:
                    await self.tool_runner.aclose()
                if self._ckpt is not None:
                    self._ckpt.release()
        while self._events:
            yield self._events.popleft()

    async def _open_checkpoint(self) -> None:
        """Create or take over the run in the store; while another runner holds its lease,
        wait up to ``lease_wait`` seconds (on the injected clock) for it to be released or to
        expire, then give up with :class:`RunBusyError`."""
        assert self.store is not None
        give_up = self.clock.monotonic() + self.lease_wait
        pause = 0.05
        while True:
            self._ckpt = Checkpointer(
                self.store,
                self.plan,
                self.registry,
                self.run_id,
                self.clock,
                lease_ttl=self.lease_ttl,
                approval=self.approval,
                redactor=self.redactor,
            )
            try:
                stored, self._in_doubt = self._ckpt.open()
            except RunBusyError:
                left = give_up - self.clock.monotonic()
                if left <= 0:
                    raise
                await self.clock.sleep(min(pause, left))
                pause = min(pause * 2, 1.0)
                continue
            self._restored.update(stored)
            return

    def result(self) -> RunResult:
        return RunResult(
            run_id=self.run_id,
            status=self.status,
            steps=self.results,
            output=self.run_output,
            error=self.error,
            plan_hash=self.plan.hash if self._ckpt is not None or self.approval else None,
        )

    # ------------------------------------------------------------------ events

    def _emit(
        self,
        type_: EventType,
        step_id: str | None = None,
        attempt: int | None = None,
        data: dict[str, Any] | None = None,
        at: float | None = None,
        wake: bool = True,
    ) -> None:
        """Queue an event for ``iter()`` (and the store and observers). ``wake=False`` leaves
        waking the run's loop to the caller, who does more first (see :meth:`_apply`)."""
        if self.redactor is not None and data:
            data = self.redactor.scrub(data)
        event = Event(
            type_, self.run_id, self.clock.now() if at is None else at, step_id, attempt, data or {}
        )
        self._events.append(event)
        if self._ckpt is not None:
            self._ckpt.event(event)
        for obs in self.observers:
            try:
                obs.on_event(event)
            except Exception:
                log.exception("observer %r failed on %s; the run goes on", obs, type_)
        if wake and self._wakeup is not None:
            self._wakeup.set()

    # ------------------------------------------------------------------ starting steps

    def _dispatch(self) -> None:
        """Start ready steps, highest priority first, within ``max_concurrency``."""
        sched = self.scheduler
        while sched.has_ready() and not self._aborted:
            room = None if self.max_concurrency is None else self.max_concurrency - len(self._tasks)
            if room is not None and room <= 0:
                return
            for sid in sched.take_ready(room):
                if not self._sealed and self._changes_world(self._steps[sid]):
                    self._held.append(sid)
                    self._emit(
                        E.STEP_READY, sid, data={"held": "waits for the whole plan's approval"}
                    )
                elif sid in self._restored:
                    self._restore(sid)
                elif sid in self._in_doubt:
                    self._hold_in_doubt(sid)
                else:
                    self._launch(sid)

    def _restore(self, sid: str) -> None:
        stored = self._restored[sid]
        self.results[sid] = stored
        self.outputs[sid] = stored.output
        self._emit(E.STEP_RESTORED, sid, stored.attempts)
        self._skipped(self.scheduler.restored(sid))

    def _hold_in_doubt(self, sid: str) -> None:
        self.results[sid] = self._in_doubt[sid]
        self.scheduler.start(sid)
        self.scheduler.in_doubt(sid)
        self._emit(E.STEP_IN_DOUBT, sid, data={"reason": self.results[sid].reason})

    def _launch(self, sid: str) -> None:
        step = self._steps[sid]
        self.scheduler.start(sid)
        res = self.results[sid]
        res.status = S.RUNNING
        res.started_at = now = self.clock.now()
        # The task first, then the event that wakes the run's own loop: the step runs first.
        self._tasks[sid] = asyncio.get_running_loop().create_task(self._run_step(step))
        self._emit(E.STEP_STARTED, sid, 1, at=now)

    def _cancel(self, sid: str, task: asyncio.Task[None]) -> None:
        task.cancel()
        task.add_done_callback(functools.partial(self._task_done, sid))

    def _task_done(self, sid: str, task: asyncio.Task[None]) -> None:
        # A task cancelled before its first step never enters _run_step, whose handler would
        # have removed it from _tasks and recorded the step: without this the run never ends.
        if task.cancelled() and self._tasks.get(sid) is task:
            del self._tasks[sid]
            self._complete(sid, Outcome(S.CANCELLED, reason=self._abort_reason))

    def _context(self, step: Step) -> Callable[[int], StepContext]:
        run_id = self.run_id

        def make(attempt: int) -> StepContext:
            return StepContext(run_id, step.id, attempt, f"{run_id}:{step.id}")

        return make

    def _before_attempt(
        self, step: Step, item: int | None, attempt: int, args: Any
    ) -> Awaitable[None] | None:
        """Called right before each call of a step's action: the security policy vets a tool
        call (when the run has one), then the intent is recorded if it matters."""
        if self.redactor is not None:
            self.redactor.learn_args(step.id, args)
        if self._guard is not None and step.action == "tool_call":
            return self._admit(step, item, attempt, args)
        if self._ckpt is not None and self._ckpt.needs_intent(step):
            self._ckpt.intent(self.results[step.id], step, item, attempt, args)
        return None

    async def _admit(self, step: Step, item: int | None, attempt: int, args: Any) -> None:
        """The security policy vets the call (may raise), then the intent is recorded."""
        assert self._guard is not None
        await self._guard.admit(step, item, attempt, args, self.outputs)
        if self._ckpt is not None and self._ckpt.needs_intent(step):
            self._ckpt.intent(self.results[step.id], step, item, attempt, args)

    def _decided(self, step_id: str, attempt: int, data: dict[str, Any]) -> None:
        self._emit(E.POLICY_DECISION, step_id, attempt, data)

    def _on_attempt(self, step: Step, record: dict[str, Any]) -> None:
        """After each attempt of a step's action: a failed attempt (and its retry) is an event."""
        if record.get("error") is not None:
            self._emit(E.ATTEMPT_FAILED, step.id, record["attempt"], dict(record))
            if "delay" in record:
                self._emit(
                    E.RETRY_SCHEDULED, step.id, record["attempt"], {"delay": record["delay"]}
                )

    async def _run_step(self, step: Step) -> None:
        assert self._runner is not None
        try:
            outcome = await self._runner.run(step, self.outputs, self._context(step))
        except asyncio.CancelledError:
            self._tasks.pop(step.id, None)
            if not self._aborted:
                raise
            self._complete(step.id, Outcome(S.CANCELLED, reason=self._abort_reason))
            return
        except Exception as exc:  # a planrail bug or a store failure: fail the step, not the run
            denied = denial_of(exc)
            if denied is not None:  # a security policy said no: this step fails, the run goes on
                outcome = Outcome(S.FAILED, error=error_info(denied), reason=denied.message)
                self._tasks.pop(step.id, None)
                self._complete(step.id, outcome)
                return
            while isinstance(exc, ExceptionGroup) and exc.exceptions:  # from a fan-out item
                exc = exc.exceptions[0]
            log.exception("error running step %s", step.id)
            outcome = Outcome(
                S.FAILED,
                error=error_info(exc),
                fatal=isinstance(exc, PlanrailError),
                reason=str(exc),
            )
        self._tasks.pop(step.id, None)
        self._complete(step.id, outcome)

    # ------------------------------------------------------------------ finishing steps

    def _complete(self, sid: str, outcome: Outcome) -> None:
        res = self.results[sid]
        res.finished_at = self.clock.now()
        res.attempts = outcome.attempts
        res.error = outcome.error
        res.reason = outcome.reason
        if self.redactor is not None:  # what a person or a trace reads of this step
            res.error, res.reason = self.redactor.scrub((outcome.error, outcome.reason))
        res.degraded = outcome.degraded
        res.attempt_history = outcome.history
        res.usage = outcome.usage
        res.status = outcome.status
        if outcome.args is not None:
            self.args[sid] = outcome.args
        if outcome.status == S.SUCCEEDED:
            res.output = outcome.output
        if self._ckpt is None or self._aborted:
            if self._ckpt is not None:  # recorded with the run's final commit
                self._dirty.add(sid)
            self._apply(sid, outcome)
            return
        # Commit before dependents start; completions of this loop turn share one transaction.
        self._dirty.add(sid)
        self._pending_outcomes[sid] = outcome
        if not self._flush_pending:
            self._flush_pending = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        assert self._ckpt is not None
        outcomes, self._pending_outcomes = self._pending_outcomes, {}
        self._flush_pending = False
        try:
            self._save_dirty()
        except Exception as exc:
            log.exception("could not record step outcomes; stopping the run")
            self.error = f"the store failed: {exc}"
            self._aborted = True  # start nothing more: its outcome could not be recorded either
            for sid, outcome in outcomes.items():
                self._apply(sid, outcome)
            self._fail_fast(next(iter(outcomes)), self.error)
            return
        for sid, outcome in outcomes.items():
            self._apply(sid, outcome)

    def _save_dirty(self) -> None:
        if self._ckpt is not None and self._dirty:
            dirty, self._dirty = self._dirty, set()
            self._ckpt.record([self.results[s] for s in dirty], self.args)

    def _apply(self, sid: str, outcome: Outcome) -> None:
        """Tell the scheduler, emit the events, start what became ready."""
        res = self.results[sid]
        finished = res.finished_at
        duration = (finished or 0.0) - (res.started_at or finished or 0.0)
        sched = self.scheduler
        data: dict[str, Any] = {"duration": duration}
        if outcome.usage:
            data["usage"] = outcome.usage
        try:
            if outcome.status == S.SUCCEEDED:
                self.outputs[sid] = outcome.output
                kind = E.STEP_DEGRADED if outcome.degraded else E.STEP_SUCCEEDED
                if outcome.degraded and outcome.reason:
                    data["reason"] = outcome.reason
                # Not woken yet: the dependents started below run before iter()'s loop does.
                self._emit(kind, sid, outcome.attempts, data, at=finished, wake=False)
                self._skipped(sched.succeeded(sid))
            elif outcome.status == S.SKIPPED:
                self._emit(E.STEP_SKIPPED, sid, outcome.attempts, {"reason": outcome.reason})
                self._skipped(sched.skip(sid, outcome.reason or "skipped")[1:])
            elif outcome.status == S.CANCELLED:
                self._emit(E.STEP_CANCELLED, sid, outcome.attempts, {"reason": outcome.reason})
                self._skipped(sched.cancelled(sid))
            elif outcome.status == S.IN_DOUBT:  # its dependents wait for an operator
                data |= {"error": outcome.error, "reason": outcome.reason}
                self._emit(E.STEP_IN_DOUBT, sid, outcome.attempts, data, at=finished)
                sched.in_doubt(sid)
            else:
                data["error"] = outcome.error
                self._emit(E.STEP_FAILED, sid, outcome.attempts, data, at=finished)
                self._skipped(sched.failed(sid))
                if (self.failure_mode == "fail_fast" or outcome.fatal) and not self._aborted:
                    self._fail_fast(sid, outcome.reason if outcome.fatal else None)
            self._dispatch()
        finally:  # woken once the dependents exist, and woken even if starting one failed
            if self._wakeup is not None:
                self._wakeup.set()

    def _skipped(self, skips: list[Skip]) -> None:
        for skip in skips:
            res = self.results[skip.step]
            res.status = S.SKIPPED
            res.reason = skip.reason
            self._dirty.add(skip.step)
            self._emit(E.STEP_SKIPPED, skip.step, data={"reason": skip.reason})

    def _fail_fast(self, failed: str, why: str | None = None) -> None:
        """Stop everything: ``failed`` failed under fail-fast, or hit a run-wide limit (``why``)."""
        self._aborted = True
        if why is not None and self.error is None:
            self.error = why
        why = why or "the run fails fast"
        self._abort_reason = f"cancelled: '{failed}' failed ({why})"
        running, skips = self.scheduler.abort(f"not started: '{failed}' failed ({why})")
        self._skipped(skips)
        for sid in running:
            task = self._tasks.get(sid)
            if task is not None:
                self._cancel(sid, task)

    async def _heartbeat(self) -> None:
        assert self._ckpt is not None
        while True:
            await self.clock.sleep(self.lease_ttl / 3)
            try:
                self._ckpt.renew()
            except PlanrailError as exc:
                self.error = exc.message
                self._fail_fast("(lease)", exc.message)
                if self._wakeup is not None:
                    self._wakeup.set()
                return

    async def _cancel_all(self, reason: str) -> None:
        self._aborted = True
        self._abort_reason = reason
        running = list(self._tasks.items())
        for sid, task in running:
            self._cancel(sid, task)
        if running:
            await asyncio.gather(*(task for _, task in running), return_exceptions=True)
        for res in self.results.values():
            if res.status in (S.PENDING, S.RUNNING):
                if res.status == S.RUNNING:
                    res.finished_at = self.clock.now()
                res.status = S.CANCELLED
                res.reason = reason
                self._dirty.add(res.id)

    def _finish(self) -> None:
        statuses = {r.status for r in self.results.values()}
        if S.FAILED in statuses or S.IN_DOUBT in statuses:
            self.status = "failed"
        elif S.CANCELLED in statuses or S.PENDING in statuses or self._aborted:
            self.status = "cancelled" if S.CANCELLED in statuses or self._aborted else "failed"
        else:
            self.status = "succeeded"
        doubtful = [r.id for r in self.results.values() if r.status == S.IN_DOUBT]
        if doubtful and self.error is None:
            self.error = (
                f"in doubt: {', '.join(doubtful)} — decide with `planrail resolve "
                f"{self.run_id} STEP --succeeded|--retry`, then resume"
            )
        if self.plan.output is not None and self.status == "succeeded":
            try:
                self.run_output = resolve_value(self.plan.output, self.outputs)
            except ReferenceResolutionError as exc:
                self.status = "failed"
                self.error = f"the plan's output could not be resolved: {exc.message}"
        self._emit(E.RUN_FINISHED, data={"status": self.status, "error": self.error})
        self._save_final()

    def _save_final(self) -> None:
        if self._ckpt is None:
            return
        dirty, self._dirty = self._dirty, set()
        try:
            self._ckpt.finish(
                self.status,
                self.run_output,
                self.error,
                [self.results[s] for s in dirty],
                self.args,
            )
        except Exception:
            log.exception("could not record the end of run %s", self.run_id)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, PlanrailError):
        return exc.message
    return "the run was cancelled"
