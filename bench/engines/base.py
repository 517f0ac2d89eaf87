"""What every engine returns, and the correctness check shared by all of them."""

from __future__ import annotations

import asyncio
import gc
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
    gc_s: float | None = None
    """Time the garbage collector took during the execution call (asyncio engines)."""
    gc_full_s: float | None = None
    """The part of ``gc_s`` spent in full (generation 2) collections."""

    @classmethod
    def timed(
        cls, ok: bool, elapsed: float, collecting: CollectorTime, **more: Any
    ) -> EngineResult:
        """The result of an execution timed by :func:`run_timed`."""
        return cls(
            makespan_s=elapsed,
            per_node_inputs_ok=ok,
            gc_s=collecting.total,
            gc_full_s=collecting.full,
            **more,
        )

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


class CollectorTime:
    """A ``gc.callbacks`` entry adding up the time spent in collections (and in full ones)."""

    def __init__(self) -> None:
        self.total = self.full = 0.0
        self._began = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
            return
        spent = time.perf_counter() - self._began
        self.total += spent
        if info.get("generation") == 2:
            self.full += spent


def run_timed(start: Callable[[], Awaitable[T]]) -> tuple[T, float, CollectorTime]:
    """``asyncio.run`` the awaitable ``start()`` returns: its result, its wall time and the
    garbage collector's time while it ran, all taken inside the loop (creating and closing the
    loop is not the engine's work)."""
    collecting = CollectorTime()

    async def timed() -> tuple[T, float]:
        gc.callbacks.append(collecting)
        t0 = time.perf_counter()
        try:
            value = await start()
        finally:
            elapsed = time.perf_counter() - t0
            gc.callbacks.remove(collecting)
        return value, elapsed

    value, elapsed = asyncio.run(timed())
    return value, elapsed, collecting
