"""Peak memory of ``prepare`` + ``run`` on the overhead DAG, this tree against others.

Each tree runs the layered DAG of zero-duration steps (``bench.dags.layered``, width 100) in a
fresh process: the plan dict is built, then ``planrail.prepare`` (validation, the compiled plan,
the execution) and ``run()``. Printed per tree: peak RSS (``ru_maxrss``) before ``prepare``,
after it, and at the end — what a run adds to the caller's plan. Memory does not depend on the
machine's load, so trees compare in one command.

    python -m bench.memory [--steps 100000] [--against DIR ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CHILD = """
import asyncio, json, resource, sys
from bench.dags import layered
from bench.engines import planrail_adapter
import planrail
from planrail.plan.loader import PlanLimits

def rss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

n = int(sys.argv[1])
plan = planrail_adapter.to_plan(layered(n, width=100, seed=1, durations="zero"), 0.0)
before = rss()

@planrail.tool(side_effects="none")
async def node(id: str, duration: float, inputs: list[str]) -> str:
    return id

limits = PlanLimits(max_steps=10 * n, max_plan_bytes=1 << 30, max_nodes=1000 * n)
execution = planrail.prepare(plan, tools=[node], limits=limits)
prepared = rss()
assert asyncio.run(execution.run()).status == "succeeded"
print(json.dumps({"before": before, "prepared": prepared, "peak": rss()}))
"""


def measure(tree: Path, steps: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": f"{tree / 'src'}{os.pathsep}{ROOT}"}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(steps)], env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"{tree}: {done.stderr[-2000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--against", action="append", default=[], type=Path)
    args = parser.parse_args(argv)
    results = {str(t): measure(t, args.steps) for t in [ROOT, *args.against]}
    print(f"peak RSS, MiB ({args.steps:,}-step layered DAG; plan dict built first)")
    print(f"  {'before prepare':>14} {'after prepare':>14} {'end of run':>11}  tree")
    for tree, r in results.items():
        print(f"  {r['before']:14.0f} {r['prepared']:14.0f} {r['peak']:11.0f}  {tree}")
    out = ROOT / "bench" / "results" / "memory.json"
    out.write_text(json.dumps({"steps": args.steps, "rss_mib": results}, indent=1) + "\n")
    return results


if __name__ == "__main__":
    main()
