"""A clock whose time only moves when a test says so.

Whole runs are easiest to test in the event loop's own virtual time (``looptime``: planrail's
:class:`~planrail.clock.SystemClock` follows the running loop's clock). :class:`FakeClock` is
for code that takes a ``clock=`` and should be stepped by hand, or driven to completion with
:meth:`FakeClock.run`, which jumps to the next sleeper's wake-up time whenever everything else
is waiting (like trio's ``MockClock(autojump_threshold=0)``; async code only).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Awaitable
from typing import TypeVar

__all__ = ["FakeClock"]

T = TypeVar("T")

_SETTLE_ROUNDS = 50
"""Event-loop turns given to woken tasks before time moves again."""


class FakeClock:
    """Virtual seconds: ``monotonic()`` starts at ``start``; ``now()`` is ``wall + monotonic()``."""

    def __init__(self, start: float = 0.0, wall: float = 1_700_000_000.0) -> None:
        self._t = float(start)
        self._wall = wall - start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self._wall + self._t

    def monotonic(self) -> float:
        return self._t

    async def sleep(self, seconds: float) -> None:
        """Wait until the clock has been moved ``seconds`` forward."""
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._t + seconds, next(self._seq), fut))
        try:
            await fut
        finally:
            fut.cancel()  # a cancelled sleeper is dropped lazily

    @property
    def sleepers(self) -> int:
        """How many tasks are waiting on this clock."""
        return sum(not f.done() for _, _, f in self._sleepers)

    def next_wakeup(self) -> float | None:
        """When the earliest sleeper wakes, or None."""
        self._drop_cancelled()
        return self._sleepers[0][0] if self._sleepers else None

    async def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``, waking sleepers in order, each at its own time."""
        if seconds < 0:
            raise ValueError("time only moves forward")
        target = self._t + seconds
        await _settle()
        while (wake := self.next_wakeup()) is not None and wake <= target:
            self._t = max(self._t, wake)
            self._wake_due()
            await _settle()
        self._t = target
        await _settle()

    async def run(self, awaitable: Awaitable[T]) -> T:
        """Await ``awaitable``, jumping time to the next wake-up whenever nothing else can run.

        Only for code that waits on this clock or on other tasks; code waiting on threads or
        real I/O would see time jump ahead of it.
        """
        task = asyncio.ensure_future(awaitable)
        while not task.done():
            await _settle()
            if task.done():
                break
            wake = self.next_wakeup()
            if wake is None:
                await asyncio.sleep(0.001)  # waiting on something outside this clock
                continue
            self._t = max(self._t, wake)
            self._wake_due()
        return task.result()

    def _wake_due(self) -> None:
        while self._sleepers and self._sleepers[0][0] <= self._t:
            _, _, fut = heapq.heappop(self._sleepers)
            if not fut.done():
                fut.set_result(None)

    def _drop_cancelled(self) -> None:
        while self._sleepers and self._sleepers[0][2].done():
            heapq.heappop(self._sleepers)


async def _settle() -> None:
    for _ in range(_SETTLE_ROUNDS):
        await asyncio.sleep(0)
