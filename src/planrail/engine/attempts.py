"""The attempt loop: one action, tried under a retry policy, timeouts and resource limits.

For each attempt: wait for the step's resource (highest priority first), call the
``before_attempt`` hook, perform the action raced against the per-attempt timeout (and what is
left of ``total_timeout`` and of the run's deadline), record the attempt, and either return, or
sleep the policy's delay and go again. All waiting goes through the injected clock.
Cancellation is never caught here: it always propagates.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from planrail.engine.resources import ResourceGate
from planrail.engine.result import OneAttempt
from planrail.engine.runners import (
    CallStillRunningError,
    Leftovers,
    keep_running,
    still_running,
    stop_watching,
    watch_calls,
)
from planrail.errors import CallCrashedError, error_dict
from planrail.policies.limits import AttemptTimeoutError, DeadlineExceededError, StepTimeoutError
from planrail.policies.retry import NO_RETRY, Random, RetryPolicy, retry_after_of
from planrail.types import Clock

__all__ = ["Attempt", "AttemptLoop", "Result", "Tally", "race"]

T = TypeVar("T")

BeforeAttempt = Callable[[Any, int | None, int, Any, str | None], Any]
"""``before_attempt(step, item_index, attempt, args, key)``, ``key`` the call's idempotency key
(``StepContext.idempotency_key``; None for the step's own, ``RUN_ID:STEP``, on the plain path,
which makes no context for a tool that takes none); may return an awaitable."""
OnAttempt = Callable[[Any, dict[str, Any]], None]
"""``on_attempt(step, record)`` after every attempt (``record["error"]`` is None on success)."""
CallCheck = Callable[[Any, int | None, dict[str, Any], Any], "BaseException | None"]
"""``guard(step, item_index, extra, args)`` before a call's first attempt: an error refuses the
call (see :mod:`planrail.engine.call_guard`)."""


class TimedOut(Exception):
    """Internal: the timer of :func:`race` fired first."""


async def race(clock: Clock, awaitable: Awaitable[T], seconds: float | None) -> T:
    """Await ``awaitable``, or raise :class:`TimedOut` after ``seconds`` of ``clock`` time.

    On timeout the awaitable's task is cancelled and waited for, so it has really stopped (an
    async tool that honours cancellation) before the caller moves on. Cancelling the caller
    cancels both and propagates.
    """
    if seconds is None:
        return await awaitable
    if seconds <= 0:
        if inspect.iscoroutine(awaitable):
            awaitable.close()
        raise TimedOut
    task = asyncio.ensure_future(awaitable)
    timer = asyncio.ensure_future(clock.sleep(seconds))
    try:
        await asyncio.wait((task, timer), return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        timer.cancel()
        task.add_done_callback(_consume)
        raise
    if task.done():
        timer.cancel()
        return task.result()
    task.cancel()
    await asyncio.wait((task,))
    _consume(task)
    raise TimedOut


def _consume(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


@dataclass(slots=True)
class Tally:
    """Attempts of one unit of work (a step, or one item of a fan-out) across loops/fallback."""

    attempts: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, int] | None = None
    """Token usage, once a call reported some (None: none)."""

    def add_usage(self, usage: dict[str, int] | None) -> None:
        if not usage:
            return
        if self.usage is None:
            self.usage = {}
        for k, v in usage.items():
            self.usage[k] = self.usage.get(k, 0) + v


@dataclass(slots=True)
class Result:
    """How a unit of work ended (before it becomes an :class:`~.step_runner.Outcome`)."""

    ok: bool
    output: Any = None
    exc: BaseException | None = None
    retryable: bool = False
    fatal: bool = False
    degraded: bool = False
    reason: str | None = None
    args: Any = None


@dataclass(frozen=True, slots=True)
class Attempt:
    """What one attempt needs: the action to perform and its limits."""

    step: Any
    perform: Callable[[int], Awaitable[Any]]
    """``perform(attempt)`` runs the action once (it builds the ``Call``)."""
    args: Any
    policy: RetryPolicy
    timeout: float | None
    total_timeout: float | None
    resource: str | None
    priority: float
    item: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    """Added to every attempt record (``iteration``, ``fallback``)."""
    keyed: bool = False
    """The tool honours idempotency keys (:attr:`planrail.plan.effects.Effect.may_rerun`)."""
    overlap: bool = False
    """A retry may start while the call it replaces still runs (an abandoned sync call):
    :attr:`planrail.plan.effects.Effect.retry_may_overlap`."""
    key: str = ""
    """The call's idempotency key (``StepContext.idempotency_key``)."""


class AttemptLoop:
    """Runs :class:`Attempt` s; shared by every step of a run."""

    def __init__(
        self,
        clock: Clock,
        gate: ResourceGate,
        rng: Random,
        *,
        deadline: float | None = None,
        before_attempt: BeforeAttempt | None = None,
        on_attempt: OnAttempt | None = None,
        guard: CallCheck | None = None,
    ) -> None:
        self.clock = clock
        self.gate = gate
        self.rng = rng
        self.deadline = deadline
        """The run's deadline, in ``clock.monotonic()`` seconds."""
        self.before_attempt = before_attempt
        self.on_attempt = on_attempt
        self.guard = guard

    def refused(
        self, step: Any, item: int | None, extra: dict[str, Any], args: Any
    ) -> Result | None:
        """The failed :class:`Result` of a call the guard refuses (it is not made), or None."""
        exc = None if self.guard is None else self.guard(step, item, extra, args)
        return None if exc is None else Result(False, exc=exc, args=args)

    def deadline_error(self, step_id: str) -> DeadlineExceededError:
        return DeadlineExceededError(
            f"the run's deadline passed while step '{step_id}' ran", step_id=step_id
        )

    async def run(self, a: Attempt, tally: Tally) -> Result:
        """Try ``a`` until it succeeds, fails for good, or runs out of attempts or time."""
        clock = self.clock
        start = clock.monotonic()
        total_at = None if a.total_timeout is None else start + a.total_timeout
        stop_at = _earliest(total_at, self.deadline)
        sid = a.step.id
        refused = self.refused(a.step, a.item, a.extra, a.args)  # retries are not new calls
        if refused is not None:
            return refused
        if a.key and not a.overlap and still_running(a.key):
            return Result(False, exc=_still_running(sid, a.key), args=a.args)
        for k in range(1, a.policy.max_attempts + 1):
            running: Leftovers = []
            now = clock.monotonic()
            if stop_at is not None and now >= stop_at:
                return self._out_of_time(sid, total_at, a.total_timeout)
            remaining = None if stop_at is None else stop_at - now
            limited = self.gate.limited(a.resource)
            if limited:
                assert a.resource is not None
                try:
                    await race(clock, self.gate.acquire(a.resource, a.priority), remaining)
                except TimedOut:
                    return self._out_of_time(sid, total_at, a.total_timeout)
            try:
                tally.attempts += 1
                n = tally.attempts
                if self.before_attempt is not None:
                    hooked = self.before_attempt(a.step, a.item, n, a.args, a.key)
                    if hooked is not None and inspect.isawaitable(hooked):
                        await hooked
                began = clock.monotonic()
                cut = a.timeout
                if stop_at is not None and (cut is None or stop_at - began < cut):
                    cut = stop_at - began
                found, token = watch_calls()
                cut_short = False
                try:
                    output = await race(clock, a.perform(n), cut)
                except TimedOut:
                    cut_short = cut is not None and cut > 0  # else the call was never made
                    if a.timeout is not None and cut == a.timeout:
                        exc: Exception = AttemptTimeoutError(
                            f"attempt {n} of step '{sid}' timed out after {a.timeout:g}s",
                            step_id=sid,
                            attempt=n,
                        )
                    else:
                        exc = (
                            self.deadline_error(sid)
                            if stop_at == self.deadline and total_at != stop_at
                            else StepTimeoutError(
                                f"step '{sid}' ran out of its total_timeout of"
                                f" {a.total_timeout:g}s",
                                step_id=sid,
                                attempt=n,
                            )
                        )
                except Exception as caught:
                    exc = caught
                else:
                    record = self._record(tally, n, began, None, False, a.item, a.extra)
                    self._notify(a.step, record)
                    return Result(True, output, args=a.args)
                finally:
                    stop_watching(token)
                    if found.running and a.key:  # timed out or cancelled: a
                        keep_running(a.key, found.running)  # later run here waits for it
                running = [f for f in found.running if not f.done()]
                # An unsafe call that could not be stopped runs on, was killed mid-call, or was
                # cancelled mid-call (an async call; any call not known to have been queued
                # still): it may yet take effect, or may have taken it.
                if not a.keyed and (running or found.killed or (cut_short and not found.queued)):
                    exc = self._abandoned(a, n, exc, running=bool(running), killed=found.killed)
            finally:
                if limited:
                    assert a.resource is not None
                    if running:  # it keeps its resource until its thread returns
                        self._release_after(running, a.resource)
                    else:
                        self.gate.release(a.resource)
            fatal, retryable = self._classify(exc, a.policy)
            if running and retryable and not a.overlap:  # it would overlap the call still running
                retryable = False
                note = "not retried: its call could not be stopped and still runs"
            else:
                note = None
            record = self._record(tally, n, began, exc, retryable, a.item, a.extra)
            if note is not None:
                record["retry"] = note
            if not retryable or k == a.policy.max_attempts:
                self._notify(a.step, record)
                return Result(False, exc=exc, retryable=retryable, fatal=fatal, args=a.args)
            delay = a.policy.delay_for(k, self.rng, retry_after_of(exc, now=clock.now()))
            if stop_at is not None and clock.monotonic() + delay >= stop_at:
                record["retry"] = f"not retried: waiting {delay:g}s would pass the time limit"
                self._notify(a.step, record)
                return Result(False, exc=exc, retryable=retryable, args=a.args)
            record["delay"] = delay
            self._notify(a.step, record)
            await clock.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    @staticmethod
    def _abandoned(a: Attempt, n: int, exc: Exception, *, running: bool, killed: int) -> Exception:
        """The error of an attempt of an unsafe tool whose call was under way when it ended: a
        sync call that timed out and runs on (a retry would overlap it, and it may yet take
        effect), a call whose worker process was killed, or one cancelled mid-call on its
        timeout (it may have taken effect first). In doubt, never retried."""
        why = message_of(exc)
        if running:
            fate = "its call could not be stopped and still runs: it may or may not take effect"
        elif killed:
            fate = "its worker process was killed mid-call: it may or may not have taken effect"
        else:
            fate = "its call was cancelled mid-call: it may or may not have taken effect"
        return CallCrashedError(
            f"{why}; {fate}; decide with `planrail resolve`",
            in_doubt=True,
            step_id=a.step.id,
            attempt=n,
        )

    def _release_after(self, running: Leftovers, resource: str) -> None:
        """Release ``resource`` once every call in ``running`` has returned (from its thread)."""
        loop = asyncio.get_running_loop()
        left = [len(running)]

        def done(_: Any) -> None:
            left[0] -= 1
            if left[0] == 0:
                with contextlib.suppress(RuntimeError):  # a closed loop: the run is over
                    loop.call_soon_threadsafe(self.gate.release, resource)

        for future in running:
            future.add_done_callback(done)

    def _out_of_time(self, sid: str, total_at: float | None, total: float | None) -> Result:
        if total_at is not None and (self.deadline is None or total_at <= self.deadline):
            exc: Exception = StepTimeoutError(
                f"step '{sid}' ran out of its total_timeout of {total:g}s", step_id=sid
            )
            return Result(False, exc=exc)
        return Result(False, exc=self.deadline_error(sid), fatal=True)

    def settle(self, step: Any, began: float) -> OneAttempt:
        """A plain step's one attempt (no retry, timeout, resource or deadline; the step runner
        calls ``before_attempt``) succeeded: the same hook as :meth:`run`, and its record in
        the compact form a step result keeps (:class:`~planrail.engine.result.OneAttempt`)."""
        one = OneAttempt(began, self.clock.monotonic() - began)
        if self.on_attempt is not None:
            self.on_attempt(step, one.record())
        return one

    def settle_failed(
        self, step: Any, args: Any, tally: Tally, began: float, exc: Exception
    ) -> Result:
        """A plain step's attempt raised: the same record, hook and result as :meth:`run`."""
        fatal, retryable = self._classify(exc, NO_RETRY)
        self._notify(step, self._record(tally, tally.attempts, began, exc, retryable))
        return Result(False, exc=exc, retryable=retryable, fatal=fatal, args=args)

    @staticmethod
    def _classify(exc: Exception, policy: RetryPolicy) -> tuple[bool, bool]:
        """(fatal, retryable): a run-wide limit (deadline, LLM budget) stops the whole run; a
        call that crashed with its effect in doubt is never retried, whatever the policy says."""
        fatal = isinstance(exc, DeadlineExceededError) or bool(getattr(exc, "fatal", False))
        if isinstance(exc, CallCrashedError) and exc.in_doubt:
            return fatal, False
        return fatal, not fatal and policy.should_retry(exc)

    def _record(
        self,
        tally: Tally,
        n: int,
        began: float,
        exc: BaseException | None,
        retryable: bool = False,
        item: int | None = None,
        extra: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        record: dict[str, Any] = {
            "attempt": n,
            "started_at": began,
            "duration": self.clock.monotonic() - began,
        }
        if item is not None:
            record["item"] = item
        if extra:
            record.update(extra)
        record["error"] = None if exc is None else error_dict(exc, retryable=retryable)
        tally.history.append(record)
        return record

    def _notify(self, step: Any, record: dict[str, Any]) -> None:
        if self.on_attempt is not None:
            self.on_attempt(step, record)


def _still_running(sid: str, key: str) -> CallStillRunningError:
    return CallStillRunningError(
        f"step '{sid}' was not called: its call with key {key}, made earlier in this process,"
        " could not be stopped and still runs; resume the run once it has returned",
        step_id=sid,
    )


def message_of(exc: BaseException) -> str:
    return str(getattr(exc, "message", None) or exc)


def _earliest(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)
