"""Tool runners: where the function of a Python tool runs (the tool-runner seam).

:class:`LocalRunner` is the default: async tools on the run's event loop, sync tools in a
thread pool. Other runners implement :class:`planrail.plan.tools.ToolRunner` the same way
(``planrail.backends.ray.RayRunner`` sends each call to a Ray cluster).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

from planrail.plan.tools import Tool

__all__ = ["LocalRunner"]


class LocalRunner:
    """Async tools on the event loop, sync tools in a pool of ``max_workers`` threads.

    A sync call that is cancelled (a timeout, a cancelled run) cannot be stopped: its thread
    runs on until the function returns, and the runner no longer waits for it.
    """

    def __init__(self, max_workers: int = 64) -> None:
        if max_workers < 1:
            raise ValueError("max_workers must be at least 1")
        self.max_workers = max_workers
        self._pool: ThreadPoolExecutor | None = None

    async def prepare(self, tools: Sequence[Tool]) -> None:
        """Nothing to check: every Python function can run in this process."""

    def call(self, tool: Tool, kwargs: dict[str, Any]) -> Awaitable[Any]:
        if tool.is_async:
            return cast(Awaitable[Any], tool.fn(**kwargs))
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                max_workers=self.max_workers, thread_name_prefix="planrail-tool"
            )
        loop = asyncio.get_running_loop()
        return loop.run_in_executor(self._pool, functools.partial(tool.fn, **kwargs))

    async def aclose(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
