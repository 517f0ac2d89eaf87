"""Baseline: one asyncio task per step, awaiting its dependencies' tasks, then sleeping.

This is the floor for an asyncio executor: no validation, no state, no bookkeeping.
"""

from __future__ import annotations

import asyncio
from typing import Any

from bench.engines import timer
from bench.engines.base import EngineResult, inputs_ok, run_timed


async def _execute(dag: dict[str, Any], scale: float) -> tuple[dict[str, Any], dict]:
    seen: dict[str, list[str]] = {}
    tasks: dict[str, asyncio.Task[str]] = {}

    async def node(sid: str, deps: list[asyncio.Task[str]], duration: float) -> str:
        seen[sid] = [await d for d in deps]
        await timer.sleep(duration)
        return sid

    for s in dag["steps"]:
        deps = [tasks[d] for d in s["depends_on"]]
        tasks[s["id"]] = asyncio.create_task(node(s["id"], deps, s["duration_s"] * scale))
    await asyncio.gather(*tasks.values())
    return {sid: t.result() for sid, t in tasks.items()}, seen


def run(dag: dict[str, Any], *, scale: float = 1.0) -> EngineResult:
    (outputs, seen), elapsed, collecting = run_timed(lambda: _execute(dag, scale))
    return EngineResult.timed(inputs_ok(dag, seen, outputs), elapsed, collecting)
