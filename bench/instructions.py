"""Instructions per step, counted by callgrind: steady where wall time is not (a shared machine).

For each source tree given (this checkout's ``src`` first, then each ``--against DIR``), runs a
layered DAG of zero-duration steps through planrail's bench adapter (``prepare`` + ``run``:
validation, build and execution) once and three times under ``valgrind --tool=callgrind``, and
reports ``(Ir(3 runs) - Ir(1 run)) / (2 * steps)``: the instructions one more run costs per
step, start-up and imports cancelled out. Needs valgrind (Debian's package).

    python -m bench.instructions [--steps 2000] [--against /tmp/planrail-before]
    # e.g. git worktree add --detach /tmp/planrail-before 0fa02f0
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CHILD = """
import sys
from bench.dags import layered
from bench.engines import planrail_adapter
runs, n = int(sys.argv[1]), int(sys.argv[2])
dag = layered(n, width=100, seed=1, durations="zero")
for _ in range(runs):
    assert planrail_adapter.run(dag).per_node_inputs_ok
"""


def count(tree: Path, runs: int, steps: int) -> int:
    """Instructions of one child process running the DAG ``runs`` times, code from ``tree``."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        env = {**os.environ, "PYTHONPATH": f"{tree / 'src'}{os.pathsep}{ROOT}"}
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
        cmd += [sys.executable, "-c", CHILD, str(runs), str(steps)]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
        found = re.search(r"Collected : (\d+)", done.stderr)
        if found is None:
            raise RuntimeError(f"no instruction count from callgrind:\n{done.stderr[-2000:]}")
        return int(found.group(1))


def per_step(tree: Path, steps: int) -> float:
    return (count(tree, 3, steps) - count(tree, 1, steps)) / (2 * steps)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--against", action="append", default=[], type=Path)
    args = parser.parse_args(argv)
    trees = [ROOT, *args.against]
    results = {str(t): per_step(t, args.steps) for t in trees}
    base = results[str(ROOT)]
    print(f"instructions per step (build + execute, {args.steps}-step layered DAG)")
    for tree, ir in results.items():
        print(f"  {ir / 1000:8.1f}k  {ir / base:6.3f}x  {tree}")
    out = ROOT / "bench" / "results" / "instructions.json"
    out.write_text(json.dumps({"steps": args.steps, "per_step": results}, indent=1) + "\n")
    return results


if __name__ == "__main__":
    main()
