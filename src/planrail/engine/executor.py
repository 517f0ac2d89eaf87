"""The asyncio executor: drives the scheduler, starts each ready step the moment it is ready.

There is no polling and there are no levels: when a step finishes, the task that ran it tells
the scheduler, and any dependent that became ready is started right there. :meth:`Execution.iter`
yields the events as they happen; :meth:`Execution.run` is a thin loop over it.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

from planrail.clock import SYSTEM_CLOCK
from planrail.engine.events import Event, EventType
from planrail.engine.result import RunResult, StepResult
from planrail.engine.scheduler import Node, Scheduler, Skip
from planrail.engine.step_runner import Outcome, StepRunner, error_info
from planrail.errors import ReferenceResolutionError
from planrail.plan.graph import critical_path_lengths
from planrail.plan.model import Plan, Step
from planrail.plan.refs import resolve_value
from planrail.plan.tools import StepContext, Tool, ToolRegistry, ToolSpec
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
        tools: ToolRegistry | Iterable[Tool | ToolSpec],
        *,
        run_id: str | None = None,
        max_concurrency: int | None = None,
        failure_mode: FailureMode = "continue",
        clock: Clock = SYSTEM_CLOCK,
        observers: Iterable[Observer] = (),
        restored: Mapping[str, StepResult] | None = None,
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
        self.results: dict[str, StepResult] = {s.id: StepResult(s.id) for s in plan.steps}
        self.outputs: dict[str, Any] = {}
        self.status = "pending"
        self.error: str | None = None
        self.run_output: Any = None
        self._restored = dict(restored or {})
        self._events: deque[Event] = deque()
        self._wakeup: asyncio.Event | None = None
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._pool: ThreadPoolExecutor | None = None
        self._runner: StepRunner | None = None
        self._aborted = False
        self.scheduler = Scheduler(self._nodes())
        self.scheduler.close()

    def _nodes(self) -> list[Node]:
        deps = {s.id: s.depends_on for s in self.plan.steps}
        by_id = self.plan.by_id

        def estimate(sid: str) -> float:
            step = by_id[sid]
            if step.estimated_duration is not None:
                return step.estimated_duration
            spec = self.registry.spec(step.tool or "")
            if spec is not None and spec.estimated_duration is not None:
                return spec.estimated_duration
            return 1.0

        priority = critical_path_lengths(deps, estimate)
        return [Node(s.id, s.depends_on, s.join, priority[s.id]) for s in self.plan.steps]

    # ------------------------------------------------------------------ public

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
        self._wakeup = asyncio.Event()
        self._pool = ThreadPoolExecutor(
            max_workers=self.max_concurrency or 64, thread_name_prefix="planrail-tool"
        )
        self._runner = StepRunner(self.registry, self._pool)
        self.status = "running"
        self._emit(E.RUN_STARTED, data={"plan_hash": self.plan.hash, "steps": len(self.results)})
        try:
            self._dispatch()
            while True:
                while self._events:
                    yield self._events.popleft()
                if self.scheduler.finished and not self._tasks:
                    break
                self._wakeup.clear()
                await self._wakeup.wait()
            self._finish()
        except BaseException:
            await self._cancel_all("the run was cancelled")
            self.status = "cancelled"
            self._emit(E.RUN_FINISHED, data={"status": self.status})
            raise
        finally:
            self._pool.shutdown(wait=False, cancel_futures=True)
        while self._events:
            yield self._events.popleft()

    def result(self) -> RunResult:
        return RunResult(
            run_id=self.run_id,
            status=self.status,
            steps=self.results,
            output=self.run_output,
            error=self.error,
            plan_hash=self.plan.hash,
        )

    # ------------------------------------------------------------------ internals

    def _emit(self, type_: EventType, step_id: str | None = None, attempt: int | None = None,
              data: dict[str, Any] | None = None) -> None:
        event = Event(type_, self.run_id, self.clock.now(), step_id, attempt, data or {})
        self._events.append(event)
        for obs in self.observers:
            try:
                obs.on_event(event)
            except Exception:
                log.exception("observer %r failed on %s; the run goes on", obs, type_)
        if self._wakeup is not None:
            self._wakeup.set()

    def _dispatch(self) -> None:
        """Start ready steps, highest priority first, within ``max_concurrency``."""
        sched = self.scheduler
        while sched.has_ready() and not self._aborted:
            room = None if self.max_concurrency is None else self.max_concurrency - len(self._tasks)
            if room is not None and room <= 0:
                return
            for sid in sched.take_ready(room):
                if sid in self._restored:
                    self._restore(sid)
                else:
                    self._launch(sid)

    def _restore(self, sid: str) -> None:
        stored = self._restored[sid]
        self.results[sid] = stored
        self.outputs[sid] = stored.output
        self._emit(E.STEP_RESTORED, sid, stored.attempts)
        self._skipped(self.scheduler.restored(sid))

    def _launch(self, sid: str) -> None:
        step = self.plan.by_id[sid]
        self.scheduler.start(sid)
        res = self.results[sid]
        res.status = S.RUNNING
        res.started_at = self.clock.now()
        self._emit(E.STEP_STARTED, sid, 1)
        self._tasks[sid] = asyncio.get_running_loop().create_task(
            self._run_step(step), name=f"planrail:{sid}"
        )

    def _context(self, step: Step) -> Callable[[int], StepContext]:
        run_id = self.run_id

        def make(attempt: int) -> StepContext:
            return StepContext(run_id, step.id, attempt, f"{run_id}:{step.id}")

        return make

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
        except Exception as exc:  # a bug in planrail, not in the tool: fail the step, not the run
            log.exception("internal error running step %s", step.id)
            outcome = Outcome(S.FAILED, error=error_info(exc))
        self._tasks.pop(step.id, None)
        self._complete(step.id, outcome)

    _abort_reason = "the run was cancelled"

    def _complete(self, sid: str, outcome: Outcome) -> None:
        res = self.results[sid]
        res.finished_at = self.clock.now()
        res.attempts = outcome.attempts
        res.error = outcome.error
        res.reason = outcome.reason
        res.degraded = outcome.degraded
        res.attempt_history = outcome.history
        res.status = outcome.status
        duration = res.finished_at - (res.started_at or res.finished_at)
        sched = self.scheduler
        if outcome.status == S.SUCCEEDED:
            res.output = outcome.output
            self.outputs[sid] = outcome.output
            kind = E.STEP_DEGRADED if outcome.degraded else E.STEP_SUCCEEDED
            self._emit(kind, sid, outcome.attempts, {"duration": duration})
            self._skipped(sched.succeeded(sid))
        elif outcome.status == S.CANCELLED:
            self._emit(E.STEP_CANCELLED, sid, outcome.attempts, {"reason": outcome.reason})
            self._skipped(sched.cancelled(sid))
        else:
            self._emit(E.STEP_FAILED, sid, outcome.attempts,
                       {"duration": duration, "error": outcome.error})
            self._skipped(sched.failed(sid))
            if self.failure_mode == "fail_fast" and not self._aborted:
                self._fail_fast(sid)
        self._dispatch()

    def _skipped(self, skips: list[Skip]) -> None:
        for skip in skips:
            res = self.results[skip.step]
            res.status = S.SKIPPED
            res.reason = skip.reason
            self._emit(E.STEP_SKIPPED, skip.step, data={"reason": skip.reason})

    def _fail_fast(self, failed: str) -> None:
        self._aborted = True
        self._abort_reason = f"cancelled: '{failed}' failed and the run fails fast"
        running, skips = self.scheduler.abort(f"not started: '{failed}' failed and the run fails fast")
        self._skipped(skips)
        for sid in running:
            task = self._tasks.get(sid)
            if task is not None:
                task.cancel()

    async def _cancel_all(self, reason: str) -> None:
        self._aborted = True
        self._abort_reason = reason
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        for sid, res in self.results.items():
            if res.status in (S.PENDING, S.RUNNING):
                if res.status == S.RUNNING:
                    res.finished_at = self.clock.now()
                res.status = S.CANCELLED
                res.reason = reason

    def _finish(self) -> None:
        statuses = [r.status for r in self.results.values()]
        if any(s == S.FAILED for s in statuses):
            self.status = "failed"
        elif any(s in (S.CANCELLED, S.IN_DOUBT, S.PENDING) for s in statuses):
            self.status = "cancelled" if S.CANCELLED in statuses else "failed"
        else:
            self.status = "succeeded"
        if self.plan.output is not None and self.status == "succeeded":
            try:
                self.run_output = resolve_value(self.plan.output, self.outputs)
            except ReferenceResolutionError as exc:
                self.status = "failed"
                self.error = f"the plan's output could not be resolved: {exc.message}"
        self._emit(E.RUN_FINISHED, data={"status": self.status, "error": self.error})
