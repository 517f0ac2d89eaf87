"""The asyncio engines' sleep: a step's simulated work ends when its time is up, to the tens of µs.

``asyncio.sleep`` is the wrong stand-in for a tool's work here: the event loop waits in
``epoll_wait``, whose timeout has millisecond resolution and is rounded up (twice, in CPython's
selectors module and again in ``select.epoll.poll``), so each sleep overshoots by about 1 ms on
average on this machine. A chain of 37 sleeps lasting 1 s in all then takes about 1.04 s with no
engine at all (``bench.scheduling`` prints this floor), which hides every engine's own cost. A real
tool's work ends with I/O completing — a socket becomes readable and ``epoll_wait`` returns at once
— and :func:`sleep` simulates exactly that: a timer thread waits (with the µs resolution of a lock
timeout) until the deadline, then wakes the event loop through ``call_soon_threadsafe`` (its
self-pipe). Every asyncio engine in ``bench/`` sleeps this way; Dask's worker threads call
``time.sleep``, which is precise already. Zero-duration steps (the overhead benchmark) keep
``asyncio.sleep(0)``: one turn of the loop, no timer.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import threading
import time
from collections.abc import Awaitable
from typing import Any

__all__ = ["sleep"]


class _Timer:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._due: list[tuple[float, int, asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None

    def sleep(self, seconds: float) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._cond:
            heapq.heappush(self._due, (time.monotonic() + seconds, next(self._seq), loop, future))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="bench-timer", daemon=True)
                self._thread.start()
            self._cond.notify()
        return future

    def _run(self) -> None:
        due = self._due
        with self._cond:
            while True:
                if not due:
                    self._cond.wait()
                    continue
                left = due[0][0] - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                _, _, loop, future = heapq.heappop(due)
                with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
                    loop.call_soon_threadsafe(_wake, future)


def _wake(future: asyncio.Future[Any]) -> None:
    if not future.done():  # a cancelled sleep stays cancelled
        future.set_result(None)


_TIMER = _Timer()


def sleep(seconds: float) -> Awaitable[None]:
    """Sleep ``seconds`` (at least), waking the loop as completed I/O would.

    A plain function returning the awaitable, so a zero-duration step awaits exactly what it
    awaited before (``asyncio.sleep(0)``): the overhead figures keep their baseline.
    """
    if seconds <= 0:
        return asyncio.sleep(0)
    return _TIMER.sleep(seconds)
