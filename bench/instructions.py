"""Instructions per step, counted by callgrind: steady where wall time is not (a shared machine).

For each source tree given (this checkout's ``src`` first, then each ``--against DIR``), runs a
layered DAG of zero-duration steps through planrail's bench adapter (``prepare`` + ``run``:
validation, build and execution — what ``planrail.arun(plan)`` does) once and three times under
``valgrind --tool=callgrind``, and reports ``(Ir(3 runs) - Ir(1 run)) / (2 * steps)``: the
instructions one more run costs per step, start-up and imports cancelled out. Two more rows
say what that is against: the same DAG run by the bare asyncio baseline (one task per step,
``bench/engines/bare_asyncio.py``: the floor of ``bench.overhead``), and, per tree,
``validate`` alone on ``bench.validation``'s plan of the same size, ``run()`` alone (three
executions prepared either way, one or three of them run), and ``run()`` alone on the durable
path: the same DAG with ``keyed`` tools and a SQLite store (each step's intent, then its outcome,
committed; fsync is a system call, so callgrind counts the CPU work of durability, not the
disk's). Every child runs with ``PYTHONHASHSEED=0``: with a random seed the same code's count
moved by up to 2.5% between runs. Needs valgrind (Debian's package).

With ``--phases``, one child instead counts where ``arun``'s instructions go, phase by phase,
on the same DAG: loading, each validation pass, building the compiled plan, building the
``Execution``, running it. Callgrind writes its counts each time the child calls a marker
(``os.getppid``, a C function of the interpreter: ``--dump-before=os_getppid``) between two
phases; the second of two rounds is reported (the first warms caches and imports). The passes
are called one by one, as ``check_plan`` calls them, on one validation (without warnings, as
a run validates, in a tree whose ``check_plan`` has ``warnings``); "compiled plan" is a whole
``check_plan`` minus those passes. Beside bare asyncio's count, the table says what
``arun`` <= 3x bare asyncio leaves for validation once the rest is paid.

With ``--cache``, ``validate`` alone on ``bench.validation``'s plans of 1,000 and 10,000
steps runs under ``valgrind --tool=cachegrind`` with a fixed cache: a 32 KB, 8-way first level
and a 2 MB, 16-way last level (an L2's size, the level a 1,000-step plan's validation fits in
and a 10,000-step one's does not). Per step of one more validation (3 runs minus 1, as
above): instructions, first-level data misses, and *L2-sized misses* — the accesses served
from beyond 2 MB (L3 or memory) on a real machine. These do not depend on the host or its
load; the growth of the L2-sized misses from 1,000 to 10,000 steps is what makes validation's
CPU time grow faster than its work (docs/benchmarks.md section 25).

    python -m bench.instructions [--steps 2000] [--against /tmp/planrail-before]
    python -m bench.instructions --cache [--against /tmp/planrail-before]
    python -m bench.instructions --phases [--against /tmp/planrail-before]
    # e.g. git worktree add --detach /tmp/planrail-before 0fa02f0
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.report import table

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
BARE = """
import sys
from bench.dags import layered
from bench.engines import bare_asyncio
runs, n = int(sys.argv[1]), int(sys.argv[2])
dag = layered(n, width=100, seed=1, durations="zero")
for _ in range(runs):
    assert bare_asyncio.run(dag, scale=0.0).per_node_inputs_ok
"""
_EXECUTE = """
import asyncio, sys, tempfile
from pathlib import Path
import planrail
from bench.dags import layered
from bench.engines import planrail_adapter
from planrail.plan.loader import PlanLimits
from planrail.store import SQLiteStore
runs, n, durable = int(sys.argv[1]), int(sys.argv[2]), DURABLE
plan = planrail_adapter.to_plan(layered(n, width=100, seed=1, durations="zero"), 0.0)

@planrail.tool(side_effects="keyed" if durable else "none")
async def node(id: str, duration: float, inputs: list[str]) -> str:
    return id

limits = PlanLimits(max_steps=10 * n, max_plan_bytes=1 << 30, max_nodes=1000 * n)
with tempfile.TemporaryDirectory() as tmp:
    store = SQLiteStore(Path(tmp) / "runs.db") if durable else None
    built = [
        planrail.prepare(plan, tools=[node], limits=limits, store=store, approve=durable)
        for _ in range(3)
    ]
    for execution in built[:runs]:  # 3 built either way: the difference is execution alone
        assert asyncio.run(execution.run()).status == "succeeded"
    if store is not None:
        store.close()
"""
EXECUTE = _EXECUTE.replace("DURABLE", "False", 1)
DURABLE = _EXECUTE.replace("DURABLE", "True", 1)
VALIDATE = """
import sys
from bench.validation import LIMITS, TOOLS, _cold, generate
from planrail.plan.validate import validate
runs, n = int(sys.argv[1]), int(sys.argv[2])
plan = generate(n)
for _ in range(runs):
    _cold()
    assert validate(plan, TOOLS, limits=LIMITS).valid
"""
PHASES = """
import asyncio, gc, os, sys
import planrail
from bench.dags import layered
from bench.engines import planrail_adapter
from bench.engines.base import short_ids
from planrail.plan import validate as V
from planrail.plan.validate_context import Context, ValidationOptions
from planrail.plan.validate_shape import load_pass
n = int(sys.argv[2])
dag = short_ids(layered(n, width=100, seed=1, durations="zero"))
plan = planrail_adapter.to_plan(dag, 0.0)

@planrail.tool(side_effects="none")
async def node(id: str, duration: float, inputs: list[str]) -> str:
    return id

limits = planrail.PlanLimits(max_steps=10 * n, max_plan_bytes=1 << 30, max_nodes=1000 * n)
registry = planrail.ToolRegistry.of([node])
mark = os.getppid  # callgrind dumps its counts before each call
# validated as a run validates: without warnings, where the tree has that (check_plan's warnings)
quiet = {"with_warnings": False} if "with_warnings" in Context.__dataclass_fields__ else {}
print(",".join(["load", *(p.__name__ for p in V._PASSES), "check_plan", "execution", "run"]))
for _ in range(2):
    gc.collect()
    mark()
    ctx = Context(registry, limits, ValidationOptions(), check_tools=True, **quiet)
    load_pass(ctx, plan)
    for pass_ in V._PASSES:
        mark()
        pass_(ctx)
    mark()
    kept = {"warnings": False} if quiet else {}
    compiled = V.check_plan(plan, registry, limits=limits, **kept).compiled_or_raise()
    mark()
    execution = planrail.prepare(compiled, tools=registry, limits=limits)
    mark()
    assert asyncio.run(execution.run()).status == "succeeded"
    mark()
    del ctx, compiled, execution
"""


def _env(tree: Path) -> dict[str, str]:
    # One hash seed for every child: the layout of dicts and sets (and so the count) moves
    # with it, by up to 2.5% between runs of the same code.
    return {
        **os.environ,
        "PYTHONPATH": f"{tree / 'src'}{os.pathsep}{ROOT}",
        "PYTHONHASHSEED": "0",
    }


def phases(tree: Path, steps: int) -> dict[str, float]:
    """Instructions per step of each phase of ``arun`` (see the module docstring), code from
    ``tree``: validation passes by name, then ``compiled plan``, ``execution`` (building it)
    and ``run``."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        cmd = ["valgrind", "--tool=callgrind", "--dump-before=os_getppid"]
        cmd += [f"--callgrind-out-file={out}", sys.executable, "-c", PHASES, "1", str(steps)]
        done = subprocess.run(cmd, env=_env(tree), capture_output=True, text=True, check=True)
        names = done.stdout.strip().splitlines()[-1].split(",")
        dumps = sorted(Path(tmp).glob("callgrind.out.*"), key=lambda f: int(f.suffix[1:]))
        counts = [int(_SUMMARY.search(f.read_text()).group(1)) for f in dumps]  # type: ignore[union-attr]
    per_round = len(names) + 1  # the dump before each round holds what came before it
    if len(counts) < 2 * per_round:
        raise RuntimeError(
            f"callgrind wrote {len(counts)} dumps, {2 * per_round} expected: is the interpreter"
            " stripped of its symbols (os_getppid)?"
        )
    second = counts[per_round + 1 : 2 * per_round]
    found = {name: ir / steps for name, ir in zip(names, second, strict=True)}
    passes = {name: found[name] for name in names[:-3]}  # load, then each pass
    return {
        **passes,
        "compiled plan": found["check_plan"] - sum(passes.values()),
        "execution": found["execution"],
        "run": found["run"],
    }


_SUMMARY = re.compile(r"^(?:summary|totals):\s+(\d+)", re.MULTILINE)


def count(tree: Path, runs: int, steps: int, child: str = CHILD) -> int:
    """Instructions of one child process running ``child`` ``runs`` times, code from ``tree``."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        env = _env(tree)
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
        cmd += [sys.executable, "-c", child, str(runs), str(steps)]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
        found = re.search(r"Collected : (\d+)", done.stderr)
        if found is None:
            raise RuntimeError(f"no instruction count from callgrind:\n{done.stderr[-2000:]}")
        return int(found.group(1))


CACHE = ("--D1=32768,8,64", "--LL=2097152,16,64")
"""The simulated cache of ``--cache``: fixed, so its counts are the same on every host."""
CACHE_SIZES = (1_000, 10_000)
_CG = re.compile(r"(I|D1|LLd) +(?:refs|misses): +([\d,]+)")


def cache_count(tree: Path, runs: int, steps: int) -> dict[str, int]:
    """Instructions (``I``), first-level data misses (``D1``) and last-level data misses
    (``LLd``) of one child validating ``runs`` times under cachegrind, code from ``tree``."""
    cmd = ["valgrind", "--tool=cachegrind", "--cache-sim=yes", *CACHE]
    cmd += ["--cachegrind-out-file=/dev/null", sys.executable, "-c", VALIDATE]
    cmd += [str(runs), str(steps)]
    done = subprocess.run(cmd, env=_env(tree), capture_output=True, text=True, check=True)
    found = {k: int(v.replace(",", "")) for k, v in _CG.findall(done.stderr)}
    if set(found) != {"I", "D1", "LLd"}:
        raise RuntimeError(f"no cache counts from cachegrind:\n{done.stderr[-2000:]}")
    return found


def cache_per_step(tree: Path, steps: int) -> dict[str, float]:
    one, three = cache_count(tree, 1, steps), cache_count(tree, 3, steps)
    return {k: (three[k] - one[k]) / (2 * steps) for k in one}


def print_cache(trees: list[Path]) -> dict[str, Any]:
    found = {str(t): {n: cache_per_step(t, n) for n in CACHE_SIZES} for t in trees}
    small, big = CACHE_SIZES
    print(
        "validate alone under cachegrind (32 KB first level, 2 MB last level), per step of one"
        " more validation"
    )
    headers = ["tree", "steps", "instructions", "D1 misses", "L2-sized misses", "growth ×10"]
    body = []
    for tree, sizes in found.items():
        for n, c in sizes.items():
            grown = c["LLd"] * n / (sizes[small]["LLd"] * small) if n == big else None
            body.append([tree, f"{n:,}", round(c["I"]), round(c["D1"]), round(c["LLd"]), grown])
    print(table(headers, body))
    out = ROOT / "bench" / "results" / "instructions-cache.json"
    record = {"cache": list(CACHE), "per_step": found}
    out.write_text(json.dumps(record, indent=1) + "\n")
    return record


def per_step(tree: Path, steps: int, child: str = CHILD) -> float:
    return (count(tree, 3, steps, child) - count(tree, 1, steps, child)) / (2 * steps)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--against", action="append", default=[], type=Path)
    parser.add_argument("--phases", action="store_true", help="arun's instructions by phase")
    parser.add_argument("--cache", action="store_true", help="validation's cache misses per step")
    args = parser.parse_args(argv)
    trees = [ROOT, *args.against]
    if shutil.which("valgrind") is None:
        parser.exit(2, "bench.instructions needs valgrind (Debian: apt-get install valgrind)\n")
    missing = [t for t in args.against if not (t / "src" / "planrail").is_dir()]
    if missing:
        parser.exit(2, f"--against {missing[0]}: no src/planrail there (a planrail checkout?)\n")
    if args.phases:
        return print_phases(trees, args.steps)
    if args.cache:
        return print_cache(trees)
    results = {str(t): per_step(t, args.steps) for t in trees}
    validation = {str(t): per_step(t, args.steps, VALIDATE) for t in trees}
    execution = {str(t): per_step(t, args.steps, EXECUTE) for t in trees}
    durable = {str(t): per_step(t, args.steps, DURABLE) for t in trees}
    bare = per_step(ROOT, args.steps, BARE)
    base = results[str(ROOT)]
    print(f"instructions per step (build + execute, {args.steps}-step layered DAG)")
    print(f"  {bare / 1000:8.1f}k  {bare / base:6.3f}x  bare asyncio (one task per step)")
    for tree, ir in results.items():
        print(f"  {ir / 1000:8.1f}k  {ir / base:6.3f}x  {tree}  ({ir / bare:.2f}x bare asyncio)")
    print("execution alone (run(), the same DAG)")
    for tree, ir in execution.items():
        print(f"  {ir / 1000:8.1f}k  {ir / bare:6.2f}x bare asyncio  {tree}")
    print("durable execution alone (run(), the same DAG, keyed tools, a SQLite store)")
    for tree, ir in durable.items():
        print(f"  {ir / 1000:8.1f}k  {ir / durable[str(ROOT)]:6.3f}x  {tree}")
    print(f"validate alone ({args.steps}-step plan of bench.validation)")
    for tree, ir in validation.items():
        print(f"  {ir / 1000:8.1f}k  {ir / validation[str(ROOT)]:6.3f}x  {tree}")
    out = ROOT / "bench" / "results" / "instructions.json"
    record = {"steps": args.steps, "per_step": results, "bare_asyncio": bare}
    record["validate_per_step"] = validation
    record["execute_per_step"] = execution
    record["durable_execute_per_step"] = durable
    out.write_text(json.dumps(record, indent=1) + "\n")
    return results


def print_phases(trees: list[Path], steps: int) -> dict[str, Any]:
    found = {str(t): phases(t, steps) for t in trees}
    bare = per_step(ROOT, steps, BARE)
    names = list(found[str(ROOT)])
    print(f"arun's instructions per step by phase ({steps}-step layered DAG), thousands")
    header = "".join(f"{Path(t).name[:14]:>16}" for t in found)
    print(f"  {'phase':<24}{header}")
    for name in names:
        cells = "".join(f"{f.get(name, float('nan')) / 1000:16.1f}" for f in found.values())
        print(f"  {name:<24}{cells}")
    totals: dict[str, dict[str, float]] = {}
    for tree, f in found.items():
        validation = sum(v for k, v in f.items() if k not in ("compiled plan", "execution", "run"))
        rest = f["compiled plan"] + f["execution"] + f["run"]
        totals[tree] = {
            "validation": validation,
            "arun": validation + rest,
            "left_for_validation_at_3x": 3 * bare - rest,
        }
    for key, label in (
        ("validation", "validation (load + passes)"),
        ("arun", "arun (all phases)"),
        ("left_for_validation_at_3x", "3x bare minus the rest"),
    ):
        cells = "".join(f"{t[key] / 1000:16.1f}" for t in totals.values())
        print(f"  {label:<24}{cells}")
    print(f"  {'bare asyncio':<24}{bare / 1000:16.1f}")
    out = ROOT / "bench" / "results" / "instructions-phases.json"
    record = {"steps": steps, "bare_asyncio": bare, "phases": found, "totals": totals}
    out.write_text(json.dumps(record, indent=1) + "\n")
    return record


if __name__ == "__main__":
    main()
