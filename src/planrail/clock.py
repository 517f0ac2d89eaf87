"""The one module that touches real time. Everything else receives a :class:`Clock`."""

from __future__ import annotations

import asyncio
import time

__all__ = ["SYSTEM_CLOCK", "SystemClock"]


class SystemClock:
    """Real time. ``monotonic`` follows the running event loop's clock, so a virtual-time loop
    (such as ``looptime``) moves it too and tests can assert exact delays."""

    now = staticmethod(time.time)
    """Seconds since the epoch (``time.time`` itself: it is read twice per step)."""

    def monotonic(self) -> float:
        try:
            return asyncio.get_running_loop().time()
        except RuntimeError:
            return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


SYSTEM_CLOCK = SystemClock()
