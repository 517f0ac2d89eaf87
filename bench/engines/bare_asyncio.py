"""Baseline: one asyncio task per step, awaiting its dependencies' tasks, then sleeping.

This is the floor for an asyncio executor: no validation, no state, no bookkeeping.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from bench.engines.base import EngineResult, inputs_ok


async def _execute(dag: dict[str, Any], scale: float) -> tuple[dict[str, Any], dict, float]:
    seen: dict[str, list[str]] = {}
    tasks: dict[str, asyncio.Task[str]] = {}

    async def node(sid: str, deps: list[asyncio.Task[str]], duration: float) -> str:
        seen[sid] = [await d for d in deps]
        await asyncio.sleep(duration)
        return sid

    t0 = time.perf_counter()
    for s in dag["steps"]:
        deps = [tasks[d] for d in s["depends_on"]]
        tasks[s["id"]] = asyncio.create_task(node(s["id"], deps, s["duration_s"] * scale))
    await asyncio.gather(*tasks.values())
    elapsed = time.perf_counter() - t0
    return {sid: t.result() for sid, t in tasks.items()}, seen, elapsed


def run(dag: dict[str, Any], *, scale: float = 1.0) -> EngineResult:
    outputs, seen, elapsed = asyncio.run(_execute(dag, scale))
    return EngineResult(makespan_s=elapsed, per_node_inputs_ok=inputs_ok(dag, seen, outputs))
