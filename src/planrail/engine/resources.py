"""Per-resource admission: concurrency slots and a token bucket, on the injected clock.

A :class:`ResourceGate` admits calls to each named resource (an upstream such as ``"openai"`` or
``"crm"``) one at a time, **highest priority first** (ties in arrival order): a call waits while
the resource has ``max_concurrency`` calls in flight or its :class:`TokenBucket` is empty. The
engine passes each step's remaining critical path as its priority, so the longest remaining
path is admitted first even when a resource is the bottleneck. All waiting is done through the
injected clock, so tests run in virtual time and can assert exact admission times.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from planrail.clock import SYSTEM_CLOCK
from planrail.policies.limits import ResourceLimit
from planrail.types import Clock

__all__ = ["ResourceGate", "TokenBucket"]

_MARGIN = 1e-6
"""Requests are spaced this fraction more than ``per / rate`` apart, so float rounding can never
let a window of time see one request more than the configured rate."""

_EPSILON = 1e-9


class TokenBucket:
    """``rate`` tokens per ``per`` seconds, at most ``burst`` stored (the GCRA formulation).

    Pure bookkeeping over times read from a clock: :meth:`delay` says how long until a token is
    available, :meth:`take` spends one. :meth:`acquire` does both, sleeping on the clock.
    """

    def __init__(
        self, rate: float, per: float = 1.0, burst: int = 1, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        if rate <= 0 or per <= 0 or burst < 1:
            raise ValueError("a token bucket needs rate > 0, per > 0 and burst >= 1")
        self.interval = per / rate * (1 + _MARGIN)
        self.burst = burst
        self.clock = clock
        self._tat: float | None = None
        """Theoretical arrival time: when the bucket will be full again."""

    def delay(self, now: float) -> float:
        """Seconds from ``now`` until a token is available (0 if one is)."""
        if self._tat is None:
            return 0.0
        wait = self._tat - (self.burst - 1) * self.interval - now
        return wait if wait > _EPSILON else 0.0

    def take(self, now: float) -> None:
        """Spend a token at ``now`` (call only when :meth:`delay` is 0)."""
        tat = now if self._tat is None else max(self._tat, now)
        self._tat = tat + self.interval

    async def acquire(self) -> None:
        """Wait for a token and spend it."""
        while (wait := self.delay(self.clock.monotonic())) > 0:
            await self.clock.sleep(wait)
        self.take(self.clock.monotonic())


@dataclass
class _Resource:
    limit: ResourceLimit
    bucket: TokenBucket | None
    in_flight: int = 0
    waiters: list[tuple[float, int, asyncio.Future[None]]] = field(default_factory=list)
    timer: asyncio.Task[None] | None = None


class ResourceGate:
    """Admits calls per resource within its :class:`ResourceLimit`, highest priority first."""

    def __init__(
        self, limits: Mapping[str, ResourceLimit] | None = None, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self.clock = clock
        self._resources: dict[str, _Resource] = {}
        for name, lim in (limits or {}).items():
            lim = ResourceLimit.parse(lim)
            bucket = (
                TokenBucket(lim.rate, lim.per, lim.burst, clock) if lim.rate is not None else None
            )
            self._resources[name] = _Resource(lim, bucket)
        self._seq = itertools.count()

    def limited(self, resource: str | None) -> bool:
        """Whether calls to ``resource`` go through the gate at all."""
        return resource is not None and resource in self._resources

    def in_flight(self, resource: str) -> int:
        state = self._resources.get(resource)
        return 0 if state is None else state.in_flight

    def waiting(self, resource: str) -> int:
        state = self._resources.get(resource)
        return 0 if state is None else sum(not f.done() for _, _, f in state.waiters)

    @asynccontextmanager
    async def slot(self, resource: str | None, priority: float = 0.0) -> AsyncIterator[None]:
        """Hold one admission to ``resource`` for the body (a no-op for unlimited resources)."""
        if resource is None or resource not in self._resources:
            yield
            return
        await self.acquire(resource, priority)
        try:
            yield
        finally:
            self.release(resource)

    async def acquire(self, resource: str, priority: float = 0.0) -> None:
        """Wait until ``resource`` admits this call; pair with :meth:`release`."""
        state = self._resources.get(resource)
        if state is None:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(state.waiters, (-priority, next(self._seq), fut))
        self._pump(state)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():  # admitted just as we were cancelled
                state.in_flight -= 1
            fut.cancel()
            self._pump(state)
            raise

    def release(self, resource: str) -> None:
        """A call admitted by :meth:`acquire` has finished."""
        state = self._resources.get(resource)
        if state is None:
            return
        state.in_flight -= 1
        self._pump(state)

    def _pump(self, state: _Resource) -> None:
        """Admit waiters, best first, while the limits allow; arm a timer for the next token."""
        waiters = state.waiters
        while True:
            while waiters and waiters[0][2].done():
                heapq.heappop(waiters)
            if not waiters:
                if state.timer is not None and not state.timer.done():
                    state.timer.cancel()
                state.timer = None
                return
            cap = state.limit.max_concurrency
            if cap is not None and state.in_flight >= cap:
                return
            if state.bucket is not None:
                now = self.clock.monotonic()
                wait = state.bucket.delay(now)
                if wait > 0:
                    if state.timer is None or state.timer.done():
                        state.timer = asyncio.get_running_loop().create_task(
                            self._wake(state, wait)
                        )
                    return
                state.bucket.take(now)
            _, _, fut = heapq.heappop(waiters)
            state.in_flight += 1
            fut.set_result(None)

    async def _wake(self, state: _Resource, wait: float) -> None:
        await self.clock.sleep(wait)
        state.timer = None
        self._pump(state)
