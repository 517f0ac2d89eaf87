"""Every benchmark in one command: scheduling quality, overhead, then the chart.

    python -m bench.run_all [--quick]

--quick uses small sizes (CI smoke, well under a minute on 2 cores) and writes ``*-quick``
results so that it never replaces the figures of a full run.
"""

from __future__ import annotations

import argparse
import time

from bench import chart, overhead, scheduling


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for CI smoke runs")
    args = parser.parse_args(argv)
    flags = ["--quick"] if args.quick else []
    t0 = time.perf_counter()
    for title, entry in (("scheduling", scheduling.main), ("overhead", overhead.main)):
        print(f"\n=== {title} ===", flush=True)
        entry(flags)
    print("\n=== chart ===")
    chart.main(flags)
    print(f"\nall benchmarks done in {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
