"""What every engine returns, and the correctness check shared by all of them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")


class EngineUnavailable(Exception):
    """The engine cannot run here (library missing, API not there yet); the message says why."""


@dataclass
class EngineResult:
    makespan_s: float
    """Wall time of the execution call alone (graph already built; for asyncio engines, timed
    inside the event loop, as the bare-asyncio baseline is: see :func:`run_timed`)."""
    per_node_inputs_ok: bool
    """Every step ran once and received exactly its dependencies' outputs, in order."""
    build_s: float = 0.0
    """Wall time spent building/compiling the engine's graph before execution."""
    extra: dict[str, Any] = field(default_factory=dict)


def inputs_ok(dag: dict[str, Any], seen: dict[str, list[str]], outputs: dict[str, Any]) -> bool:
    """Nodes return their own id, so a node's inputs must equal its ``depends_on`` list.

    ``seen`` maps each step id to the inputs its node received; ``outputs`` maps each step id to
    the value the engine reports for it.
    """
    steps = dag["steps"]
    if len(seen) != len(steps):
        return False
    return all(
        seen.get(s["id"]) == list(s["depends_on"]) and outputs.get(s["id"]) == s["id"]
        for s in steps
    )


def short_ids(dag: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``dag`` with ids ``n0, n1, ...`` (valid everywhere) and ``id_map`` new -> old."""
    new = {s["id"]: f"n{i}" for i, s in enumerate(dag["steps"])}
    steps = [
        {
            "id": new[s["id"]],
            "depends_on": [new[d] for d in s["depends_on"]],
            "duration_s": s["duration_s"],
        }
        for s in dag["steps"]
    ]
    return {"name": dag["name"], "steps": steps, "id_map": {v: k for k, v in new.items()}}


def run_timed(start: Callable[[], Awaitable[T]]) -> tuple[T, float]:
    """``asyncio.run`` the awaitable ``start()`` returns; its result and its wall time, timed
    inside the loop (creating and closing the loop is not the engine's work)."""

    async def timed() -> tuple[T, float]:
        t0 = time.perf_counter()
        value = await start()
        return value, time.perf_counter() - t0

    return asyncio.run(timed())
