"""A SQLite store that a test can "kill": from :meth:`DyingStore.die` on it drops every write,
as a runner killed at that moment would leave the file (for resume tests in one process)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import planrail
from planrail.plan.tools import Tool
from planrail.store import Event, SQLiteStore
from planrail.testing import FakeClock

__all__ = ["WALL", "DyingStore", "resume_later", "run_until"]

WALL = 1_700_000_000.0
"""The wall clock of the first runner (a resume's is 100 s later)."""


class DyingStore(SQLiteStore):
    """A SQLite store that drops every write once :meth:`die` is called, as a runner killed at
    that moment would leave the file."""

    dead = False

    def die(self) -> None:
        self.dead = True

    def commit(self, **parts: Any) -> list[Event]:
        if self.dead:
            return [dataclasses.replace(e, seq=-1) for e in parts.get("events", ())]
        return super().commit(**parts)

    def renew_lease(self, run_id: str, owner: str, ttl: float, now: float) -> bool:
        return True if self.dead else super().renew_lease(run_id, owner, ttl, now)

    def release_lease(self, run_id: str, owner: str) -> None:
        if not self.dead:
            super().release_lease(run_id, owner)


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


async def resume_later(run_id: str, tools: list[Tool], db: Path) -> planrail.RunResult:
    """Resume ``run_id`` in a new runner on the store file ``db``, past the first one's
    lease (its clock 100 s on)."""
    store = SQLiteStore(db)
    try:
        execution = planrail.resume(
            run_id, tools, store=store, clock=FakeClock(wall=WALL + 100), approve=True
        )
        return await execution.run()
    finally:
        store.close()
