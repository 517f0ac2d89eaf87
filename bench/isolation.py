"""Process isolation: what a call of a sync tool costs in a thread vs in a worker process.

One command, both in it: N calls of a trivial sync tool (``x + 1``) through the local runner
(``LocalRunner.call``), one at a time, with ``isolation="thread"`` (the default: a daemon
thread) and ``isolation="process"`` (a warm worker process, ``planrail.engine.isolation``);
plus the one-off start-up of a worker (spawn + import), paid in ``prepare()`` before the run.
Figures are medians over rounds; it writes ``bench/results/isolation[-quick].json``.

    python -m bench.isolation [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path

from bench.isolation_tools import add_one, add_one_isolated
from planrail.engine.runners import LocalRunner

RESULTS = Path(__file__).with_name("results")


async def _per_call(isolated: bool, calls: int) -> tuple[float, float]:
    runner = LocalRunner(8)
    tool = add_one_isolated if isolated else add_one
    began = time.perf_counter()
    await runner.prepare([tool])
    startup = time.perf_counter() - began
    began = time.perf_counter()
    for i in range(calls):
        assert await runner.call(tool, {"x": i}) == i + 1
    per_call = (time.perf_counter() - began) / calls
    await runner.aclose()
    return per_call, startup


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    rounds, calls = (1, 200) if args.quick else (3, 2000)
    thread: list[float] = []
    process: list[float] = []
    startups: list[float] = []
    for _ in range(rounds):
        thread.append(asyncio.run(_per_call(False, calls))[0])
        per_call, startup = asyncio.run(_per_call(True, calls))
        process.append(per_call)
        startups.append(startup)
    result = {
        "calls_per_round": calls,
        "rounds": rounds,
        "thread_us_per_call": round(statistics.median(thread) * 1e6, 1),
        "process_us_per_call": round(statistics.median(process) * 1e6, 1),
        "process_worker_startup_ms": round(statistics.median(startups) * 1e3, 1),
    }
    result["process_over_thread_us"] = round(
        result["process_us_per_call"] - result["thread_us_per_call"], 1
    )
    print(json.dumps(result, indent=2))
    RESULTS.mkdir(exist_ok=True)
    name = "isolation-quick.json" if args.quick else "isolation.json"
    (RESULTS / name).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
