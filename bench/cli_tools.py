"""The tool of ``bench.cli``: ``planrail run --tools bench.cli_tools`` and the no-engine program
(``bench.cli_floor``) call this same function.

Each call waits its duration (``bench.engines.timer``: woken like completed I/O) and returns its
id. The process records the first call's start and the last call's end (``time.time()``) and,
at exit, writes them to the file named by ``$PLANRAIL_BENCH_TIMES``: the makespan is measured
from inside the process, from the first step's start to the last step's end.
"""

from __future__ import annotations

import atexit
import json
import os
import time

import planrail
from bench.engines import timer

_span = [float("inf"), float("-inf"), 0]
"""First start, last end, calls."""


@planrail.tool(side_effects="keyed")
async def node(ctx: planrail.StepContext, id: str, duration: float, inputs: list[str]) -> str:
    """Waits ``duration`` seconds (keyed: its intent is committed before the call)."""
    return await work(id, duration)


async def work(id: str, duration: float) -> str:
    """The tool's work, shared with the no-engine program."""
    start = time.time()
    _span[0] = min(_span[0], start)
    await timer.sleep(duration)
    _span[1] = max(_span[1], time.time())
    _span[2] += 1
    return id


def _write() -> None:
    path = os.environ.get("PLANRAIL_BENCH_TIMES")
    if path and _span[2]:
        with open(path, "w") as f:
            json.dump({"first_start": _span[0], "last_end": _span[1], "calls": _span[2]}, f)


atexit.register(_write)
