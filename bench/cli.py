"""``planrail run`` as a user runs it: a fresh process, the default SQLite store, progress off
and on — beside a no-engine asyncio program calling the same tool, in one command.

DAGs: the four shared real workflows (``bench/dags.py``) and a 1 → 1,000 → 1 fan-out, each
scaled so that its critical path lasts ``--cp`` seconds (1.5; 0.5 with ``--quick``). The tool
(``bench/cli_tools.py``) is ``keyed``, so every step commits its intent before its call (group
commit) and its outcome after it, as a side-effecting step does; each call waits its duration
the way completed I/O wakes the loop (``bench.engines.timer``).

Configurations, each a fresh process per run, in rounds that run every configuration on every
DAG once (so a change of the machine's load hits them alike):

- ``floor``: ``python -m bench.cli_floor PLAN`` — one task per step, no engine;
- ``quiet``: ``planrail run PLAN --tools bench.cli_tools --yes --quiet`` in an empty folder
  (the default store: ``./.planrail/planrail.db``, SQLite, ``synchronous=FULL``);
- ``progress``: the same without ``--quiet``, its output a pseudo-terminal (Rich's live
  display, as in a user's terminal);
- ``log``: the same with its output a pipe, as in CI or ``planrail run ... | tee run.log``
  (one progress line per event), and ``PYTHONUNBUFFERED=1``, as CI images often set.

Makespan = the last call's end minus the first call's start, recorded by the tool inside the
process; ``/ CP`` divides it by the critical path. The process's wall time (start-up, import,
validation, store, the run, exit) is printed too. Ratios to the floor are medians of per-round
ratios. ``--against DIR`` (repeatable) runs ``quiet``, ``progress`` and ``log`` with another source
tree's ``planrail`` too (``DIR/src`` first on the path), in the same rounds. Writes
``bench/results/cli[-quick].json``.

    python -m bench.cli [--quick] [--rounds N] [--cp SECONDS] [--dags a,b] [--configs a,b]
                        [--against DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench import dags
from bench.engines.base import short_ids
from bench.engines.planrail_adapter import to_plan
from bench.report import table, write_json

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ("montage-2mass-619", "epigenomics-1095", "blast-303", "airrflow-212")
FAN = 1_000
CONFIGS = ("floor", "quiet", "progress", "log")
TARGET = 1.03
TIMEOUT_S = 300.0


def fan_out(width: int) -> dict[str, Any]:
    """``src`` → ``width`` parallel steps → ``sink``, each lasting 1 (scaled later)."""
    steps = [{"id": "src", "depends_on": [], "duration_s": 1.0}]
    steps += [{"id": f"w{i}", "depends_on": ["src"], "duration_s": 1.0} for i in range(width)]
    steps.append({"id": "sink", "depends_on": [f"w{i}" for i in range(width)], "duration_s": 1.0})
    return {"name": f"fan-1-{width}-1", "steps": steps}


def load(name: str) -> dict[str, Any]:
    return fan_out(FAN) if name.startswith("fan") else dags.load_wfinstance(name)


def _pty_run(cmd: list[str], cwd: str, env: dict[str, str]) -> int:
    """Run ``cmd`` with a pseudo-terminal as its stdout and stderr, draining what it prints."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=slave, stderr=slave, stdin=slave)
    os.close(slave)

    def drain() -> None:
        try:
            while os.read(master, 65536):
                pass
        except OSError:  # the child closed the terminal
            pass

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        code = proc.wait(timeout=TIMEOUT_S)
    finally:
        reader.join(timeout=5)
        os.close(master)
    return code


def one(config: str, plan_path: Path, tree: Path | None = None) -> dict[str, Any]:
    """One fresh process: its makespan (from the tool) and its wall time; ``tree``: another
    source tree's planrail (its ``src`` first on the path)."""
    with tempfile.TemporaryDirectory(prefix="planrail-cli-bench-") as tmp:
        times = Path(tmp) / "times.json"
        path = str(ROOT) if tree is None else f"{tree / 'src'}{os.pathsep}{ROOT}"
        env = {**os.environ, "PYTHONPATH": path, "PLANRAIL_BENCH_TIMES": str(times)}
        env.pop("PLANRAIL_STORE", None)
        if config == "floor":
            cmd = [sys.executable, "-m", "bench.cli_floor", str(plan_path)]
        else:
            planrail = str(Path(sys.executable).with_name("planrail"))
            cmd = [planrail, "run", str(plan_path), "--tools", "bench.cli_tools", "--yes"]
            if config == "quiet":
                cmd.append("--quiet")
            if config == "log":
                env["PYTHONUNBUFFERED"] = "1"
        work = Path(tmp) / "work"
        work.mkdir()
        t0 = time.perf_counter()
        said = ""
        if config == "progress":
            code = _pty_run(cmd, str(work), env)
        else:
            proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, timeout=TIMEOUT_S)
            code = proc.returncode
            said = (proc.stderr or proc.stdout).decode(errors="replace").strip()[-300:]
        wall = time.perf_counter() - t0
        if code != 0 or not times.exists():
            return {"error": f"exit code {code}", "output": said}
        span = json.loads(times.read_text())
        if config != "floor" and not (work / ".planrail" / "planrail.db").exists():
            return {"error": "the default store was not used"}
    return {"makespan_s": span["last_end"] - span["first_start"], "wall_s": wall, **span}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="critical path 0.5 s, one round")
    parser.add_argument("--rounds", type=int, default=None, help="default: 3 (--quick: 1)")
    parser.add_argument("--cp", type=float, default=None, help="critical path, s (1.5)")
    parser.add_argument("--dags", default=",".join((*WORKFLOWS, "fan")))
    parser.add_argument("--configs", default=",".join(CONFIGS), help="a subset of: floor,quiet,...")
    parser.add_argument("--against", action="append", default=[], type=Path, help="another tree")
    args = parser.parse_args(argv)
    trees: dict[str, Path | None] = {"": None}
    trees.update({f"@{t}": t.resolve() for t in args.against})
    chosen = [c for c in args.configs.split(",") if c]
    if unknown := sorted(set(chosen) - set(CONFIGS)):
        parser.error(f"unknown configuration(s) {', '.join(unknown)}; known: {', '.join(CONFIGS)}")
    if "floor" not in chosen:
        chosen.insert(0, "floor")  # every ratio is to the floor
    configs = [f"{c}{name}" for name in trees for c in chosen if name == "" or c != "floor"]
    cp = args.cp or (0.5 if args.quick else 1.5)
    rounds = args.rounds or (1 if args.quick else 3)
    names = [n for n in args.dags.split(",") if n]
    if unknown := sorted(set(names) - {*WORKFLOWS, "fan"}):
        parser.error(
            f"unknown DAG(s) {', '.join(unknown)}; known: {', '.join((*WORKFLOWS, 'fan'))}"
        )
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="planrail-cli-plans-") as tmp:
        plans: dict[str, tuple[Path, int]] = {}
        for name in names:
            dag = short_ids(load(name))
            scale = cp / dags.critical_path(dag)
            path = Path(tmp) / f"{name}.json"
            path.write_text(json.dumps(to_plan(dag, scale)))
            plans[name] = (path, len(dag["steps"]))
        runs: dict[str, dict[str, list[dict[str, Any]]]] = {
            n: {c: [] for c in configs} for n in names
        }
        print(f"planrail run vs no engine: critical path {cp} s, {rounds} round(s)")
        for r in range(rounds):
            for name in names:
                k = r % len(configs)
                for config in configs[k:] + configs[:k]:
                    kind, _, tree = config.partition("@")
                    m = one(kind, plans[name][0], trees[f"@{tree}"] if tree else None)
                    runs[name][config].append(m)
                    shown = f"{m['makespan_s'] / cp:.3f}" if "makespan_s" in m else str(m)
                    print(f"  round {r + 1} {name} {config}: {shown}", flush=True)
    rows = []
    for name in names:
        entry: dict[str, Any] = {"steps": plans[name][1], "runs": runs[name]}
        row: list[Any] = [name, plans[name][1]]
        for config in configs:
            ok = [m for m in runs[name][config] if "makespan_s" in m]
            entry[config] = (
                {
                    "makespan_over_cp": statistics.median(m["makespan_s"] for m in ok) / cp,
                    "wall_s": statistics.median(m["wall_s"] for m in ok),
                }
                if ok
                else {"error": runs[name][config][0].get("error")}
            )
            row.append(entry[config].get("makespan_over_cp"))
        for config in [c for c in configs if c != "floor"]:
            ratios = [
                a["makespan_s"] / f["makespan_s"]
                for a, f in zip(runs[name][config], runs[name]["floor"], strict=True)
                if "makespan_s" in a and "makespan_s" in f
            ]
            entry[f"{config}_over_floor"] = statistics.median(ratios) if ratios else None
            entry[f"{config}_over_floor_rounds"] = ratios
            row.append(entry[f"{config}_over_floor"])
        row += [entry[c].get("wall_s") for c in configs]
        results[name] = entry
        rows.append(row)
    print()
    headers = ["DAG", "steps", *(f"{c} /CP" for c in configs)]
    headers += [f"{c} /floor" for c in configs if c != "floor"]
    headers += [f"{c} wall s" for c in configs]
    print(table(headers, rows))
    worst = max(
        (
            v
            for e in results.values()
            for k in ("quiet_over_floor", "progress_over_floor", "log_over_floor")
            if (v := e.get(k)) is not None
        ),
        default=None,
    )
    if worst is not None:
        verdict = "within" if worst <= TARGET else "OVER"
        print(f"\nworst planrail run / floor = {worst:.3f} ({verdict} the {TARGET} target)")
    load_avg = os.getloadavg()
    print(f"load average: {load_avg}")
    payload = {"critical_path_s": cp, "rounds": rounds, "results": results, "worst": worst}
    path = write_json("cli", args.quick, payload)
    print(f"wrote {path.relative_to(ROOT)}")
    return payload


if __name__ == "__main__":
    main()
