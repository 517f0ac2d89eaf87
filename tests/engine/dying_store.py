"""Resume tests in one process, over any store kind: a runner "killed" mid-call (its store
dies from a moment on: :class:`DyingStore`), then a new runner on a new store object over the
same URL (:func:`resume_later`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import Any

import planrail
from durability.helpers import WALL
from durability.helpers import DyingStore as _DyingProxy
from planrail.plan.tools import Tool
from planrail.store import open_store
from planrail.testing import FakeClock

__all__ = ["WALL", "DyingStore", "resume_later", "run_until"]


class DyingStore(_DyingProxy):
    """The durability tests' dying proxy (every write dropped once :meth:`die` is called, as a
    runner killed at that moment would leave the database) over the store ``url`` names,
    which it opens and closes."""

    def __init__(self, url: str) -> None:
        super().__init__(open_store(url))
        self.url = url

    def close(self) -> None:
        self.inner.close()


async def run_until(died: asyncio.Event, run: Awaitable[Any]) -> None:
    """Run ``run`` until ``died`` is set (its store killed mid-call), then stop it as the
    killed runner's process would stop."""
    task = asyncio.ensure_future(run)
    dead = asyncio.create_task(died.wait())
    done, _ = await asyncio.wait({task, dead}, return_when=asyncio.FIRST_COMPLETED)
    assert dead in done, f"the run ended without being killed: {task.result()}"
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def resume_later(run_id: str, tools: list[Tool], url: str) -> planrail.RunResult:
    """Resume ``run_id`` in a new runner on a new store object over ``url``, past the first
    one's lease (its clock 100 s on)."""
    with open_store(url) as store:
        execution = planrail.resume(
            run_id, tools, store=store, clock=FakeClock(wall=WALL + 100), approve=True
        )
        return await execution.run()
