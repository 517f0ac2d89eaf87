"""The work of ``bench.ray_runner``'s steps, importable by path on Ray workers.

The same three functions serve every engine (planrail on the local runner, planrail on Ray,
bare Ray): planrail calls them as tools, bare Ray as the bodies of its tasks and actor methods.
Each checks that it received exactly its dependencies' outputs (their ids, in order) and
returns its own id; a wrong input raises, so a fast wrong answer cannot pass for a result.
"""

from __future__ import annotations

import asyncio

import planrail
from bench.engines import timer


def _check(id: str, inputs: list[str], expect: list[str]) -> None:
    if inputs != expect:
        raise ValueError(f"{id}: got inputs {inputs}, expected {expect}")


async def io_work(id: str, duration: float, inputs: list[str], expect: list[str]) -> str:
    """Simulated I/O: wait ``duration`` seconds (``timer.sleep``; see its docstring)."""
    _check(id, inputs, expect)
    if duration > 0:
        await timer.sleep(duration)
    else:
        await asyncio.sleep(0)
    return id


def cpu_work(id: str, rounds: int, inputs: list[str], expect: list[str]) -> str:
    """Real CPU-bound work: ``rounds`` iterations of integer arithmetic in pure Python (it holds
    the GIL: threads of one process cannot run it in parallel, processes can)."""
    _check(id, inputs, expect)
    acc = 0
    for i in range(rounds):
        acc = (acc * 31 + i) % 1_000_003
    return id if acc >= 0 else ""


io_node = planrail.tool(name="io_node", side_effects="none")(io_work)
cpu_node = planrail.tool(name="cpu_node", side_effects="none")(cpu_work)
