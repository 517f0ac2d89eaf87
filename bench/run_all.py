"""Every benchmark in one command, then the chart.

    python -m bench.run_all [--quick]

--quick uses small sizes (CI smoke, about a minute on 2 cores) and writes ``*-quick``
results so that it never replaces the figures of a full run.
"""

from __future__ import annotations

import argparse
import importlib
import time

BENCHMARKS = (
    ("scheduling: makespan / critical path", "bench.scheduling"),
    ("overhead per step, memory, start-up", "bench.overhead"),
    ("validation time vs plan size", "bench.validation"),
    ("rate-limited resource: FIFO vs critical-path-first", "bench.rate_limit"),
    ("durability: memory vs SQLite vs PostgreSQL store", "bench.durability"),
    ("resume after SIGKILL: same-host takeover vs lease wait", "bench.takeover"),
    ("sync tool call: thread vs isolated process", "bench.isolation"),
    ("OpenTelemetry on vs off", "bench.otel_overhead"),
    ("planrail run (fresh process, default store) vs no engine", "bench.cli"),
    ("reference parsing and fuzzing", "bench.security_fuzz"),
    ("LLM economy: ReAct loop vs plan-then-execute", "bench.llm_economy"),
    ("MCP call overhead vs a plain Python tool call", "bench.mcp_overhead"),
)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for CI smoke runs")
    parser.add_argument("--only", help="comma-separated module names, e.g. overhead,durability")
    args = parser.parse_args(argv)
    flags = ["--quick"] if args.quick else []
    only = set(args.only.split(",")) if args.only else None
    t0 = time.perf_counter()
    for title, module in BENCHMARKS:
        if only is not None and module.rsplit(".", 1)[1] not in only:
            continue
        print(f"\n=== {title} ({module}) ===", flush=True)
        importlib.import_module(module).main(flags)
    print("\n=== chart ===")
    importlib.import_module("bench.chart").main(flags)
    print(f"\nall benchmarks done in {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
