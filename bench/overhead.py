"""Engine overhead: zero-duration steps, so all the time measured is the engine's own.

For each engine and size, a fresh subprocess builds a layered DAG (width 100, 1-3 dependencies per
step, all durations 0) and runs it; it reports:

- per-step overhead in µs = wall time of ``run()`` (graph build + execution) / steps, and the
  execution call alone / steps; within a subprocess the median of 3 runs up to 10,000 steps,
  one run above (and with --quick); the time the garbage collector took during the execution
  call (asyncio engines; all collections, and full ones alone); full runs repeat this in 3
  rounds that interleave the engines (see :func:`measure`) and report medians, and ratios as
  medians of per-round ratios;
- peak memory = peak resident set of that subprocess (VmHWM from /proc/self/status, i.e. the
  process's own ``ru_maxrss``; interpreter and imports included), and its increase over the
  same figure taken just before the first run;
- start-up: the engine's import time inside that fresh subprocess, and (full runs) the median
  wall time of ``python -c "import X"`` minus ``python -c "pass"``; plus the wall time of a
  first 1-step run right after import (both from the smallest size's subprocess).

A size is skipped when the smaller sizes project it past half of ``SKIP_ABOVE_S`` of wall time or
``SKIP_ABOVE_MIB`` of memory growth (power law fitted to the two largest sizes measured).

    python -m bench.overhead [--quick] [--engines bare_asyncio,dask_threaded]
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import dags, engines
from bench.report import table, write_json

SIZES = (1_000, 10_000, 100_000)
QUICK_SIZES = (1_000, 5_000)
WIDTH = 100
SKIP_ABOVE_S = 120.0
# The fit misses knees: LangGraph's 100k run, projected at 118-127 s from 1k and 10k, took 232 s
# and 426 s. So a size is skipped once its projection passes half the budget.
SKIP_SAFETY = 2.0
SKIP_ABOVE_MIB = 2048.0  # projected growth of peak RSS; protects a shared machine
TIMEOUT_S = 600.0
ROUNDS = 3
"""Full runs: each engine and size is measured in this many interleaved rounds."""
IMPORTS = {
    "bare_asyncio": "asyncio",
    "langgraph": "langgraph.graph",
    "dask_threaded": "dask.threaded",
    "planrail": "planrail",
}
ROOT = Path(__file__).resolve().parent.parent


def peak_rss_kib() -> int:
    """This process's peak resident set (VmHWM), KiB; ``ru_maxrss`` where /proc is missing.

    Not ``ru_maxrss`` on Linux: it survives fork + exec, so children started by a parent that
    had already grown to 131 MiB reported 131 MiB for every engine.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def child(engine: str, n: int, repeats: int) -> dict[str, Any]:
    """Runs inside the fresh subprocess; the parent reads the JSON it prints."""
    t0 = time.perf_counter()
    run = engines.load(engine)
    import_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    run(dags.chain(1, durations="zero"), scale=1.0)
    first_run_s = time.perf_counter() - t0
    dag = dags.layered(n, WIDTH, seed=0, durations="zero")
    baseline = peak_rss_kib()
    walls, execs, gcs, fulls, ok = [], [], [], [], True
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = run(dag, scale=1.0)
        walls.append(time.perf_counter() - t0)
        execs.append(result.makespan_s)
        gcs.append(result.gc_s)
        fulls.append(result.gc_full_s)
        ok = ok and result.per_node_inputs_ok
    timed_gc = None not in gcs
    return {
        "wall_s": statistics.median(walls),
        "exec_s": statistics.median(execs),
        "gc_s": statistics.median(gcs) if timed_gc else None,
        "gc_full_s": statistics.median(fulls) if timed_gc else None,
        "repeats": repeats,
        "inputs_ok": ok,
        "maxrss_kib": peak_rss_kib(),
        "baseline_kib": baseline,
        "import_s": import_s,
        "first_run_s": first_run_s,
    }


def in_subprocess(engine: str, n: int, repeats: int) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench.overhead", "--child", engine, str(n), str(repeats)]
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"skipped": f"timeout after {TIMEOUT_S:.0f} s"}
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr else "failed"}
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["us_per_step"] = out["wall_s"] / n * 1e6
    out["exec_us_per_step"] = out["exec_s"] / n * 1e6
    if out["gc_s"] is not None:
        out["gc_us_per_step"] = out["gc_s"] / n * 1e6
        out["gc_full_us_per_step"] = out["gc_full_s"] / n * 1e6
    return out


def projected(done: dict[int, dict[str, Any]], n: int, cost: str) -> float | None:
    """``cost`` for ``n`` steps, extrapolated from the two largest sizes measured so far.

    Cost per step is taken to follow a power law ``n ** alpha`` (alpha >= 0) fitted to them.
    """
    sizes = sorted(k for k, v in done.items() if "wall_s" in v)
    if not sizes:
        return None
    last = sizes[-1]
    per_step = _cost(done[last], cost) / last
    if len(sizes) >= 2:
        prev = sizes[-2]
        ratio = max(per_step / (_cost(done[prev], cost) / prev), 1e-9)
        per_step *= (n / last) ** max(math.log(ratio) / math.log(last / prev), 0.0)
    return per_step * n


def _cost(m: dict[str, Any], cost: str) -> float:
    if cost == "s":
        return float(m["wall_s"])
    return max(m["maxrss_kib"] - m["baseline_kib"], 1) / 1024  # MiB grown during the runs


def import_time(module: str, repeats: int) -> float:
    def once(code: str) -> float:
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True)
        return time.perf_counter() - t0

    base = statistics.median(once("pass") for _ in range(repeats))
    return statistics.median(once(f"import {module}") for _ in range(repeats)) - base


def measure(names: list[str], sizes: tuple[int, ...], quick: bool) -> dict[str, dict[int, Any]]:
    """Every engine at every size, in interleaved rounds.

    This machine's speed drifts by tens of percent from one minute to the next (a shared
    host), so engines are not measured one after the other: each round runs every engine
    once, in a rotating order, and the reported figure is the median over the rounds.
    """
    done: dict[str, dict[int, dict[str, Any]]] = {e: {} for e in names}
    for n in sizes:
        active = []
        for engine in names:
            secs, mib = projected(done[engine], n, "s"), projected(done[engine], n, "MiB")
            if secs is not None and secs * SKIP_SAFETY > SKIP_ABOVE_S:
                reason = f"too slow: projected ~{secs:.0f} s from the smaller sizes, often 2x more"
                done[engine][n] = {"skipped": reason}
            elif mib is not None and mib > SKIP_ABOVE_MIB:
                done[engine][n] = {"skipped": f"too much memory: projected +{mib:.0f} MiB peak RSS"}
            else:
                active.append(engine)
        rounds = 1 if quick else ROUNDS
        runs: dict[str, list[dict[str, Any]]] = {e: [] for e in active}
        for r in range(rounds):
            order = active[r % len(active) :] + active[: r % len(active)] if active else []
            for engine in order:
                runs[engine].append(in_subprocess(engine, n, 1 if quick or n > 10_000 else 3))
        for engine in active:
            done[engine][n] = m = _median_round(runs[engine])
            status = f"{m['us_per_step']:.1f} µs/step" if "us_per_step" in m else str(m)
            print(f"  {engine} {n}: {status} ({rounds} round(s))", flush=True)
    return done


def _median_round(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Median of each figure over the rounds; the first failure if any round failed."""
    bad = [m for m in runs if "wall_s" not in m]
    if bad:
        return bad[0]
    out = dict(runs[0])
    figures = ["wall_s", "exec_s", "us_per_step", "exec_us_per_step", "maxrss_kib"]
    if all("gc_us_per_step" in m for m in runs):
        figures += ["gc_us_per_step", "gc_full_us_per_step"]
    for key in figures:
        out[key] = statistics.median(m[key] for m in runs)
    out["baseline_kib"] = statistics.median(m["baseline_kib"] for m in runs)
    out["inputs_ok"] = all(m["inputs_ok"] for m in runs)
    out["rounds_exec_us_per_step"] = [m["exec_us_per_step"] for m in runs]
    out["rounds_us_per_step"] = [m["us_per_step"] for m in runs]
    return out


def _ratio(
    a: dict[str, Any] | None, b: dict[str, Any] | None, key: str = "us_per_step"
) -> float | None:
    """a / b for one figure: the median of the per-round ratios when both ran in rounds (each
    round's pair was measured minutes apart at most), else the ratio of the two figures."""
    if not (a and b and key in a and key in b):
        return None
    ra, rb = a.get(f"rounds_{key}"), b.get(f"rounds_{key}")
    if ra and rb and len(ra) == len(rb):
        return float(statistics.median(x / y for x, y in zip(ra, rb, strict=True)))
    return float(a[key] / b[key])


def _cell(m: dict[str, Any], key: str, fmt: str) -> str:
    if key in m:
        return format(m[key], fmt) + ("" if m.get("inputs_ok", True) else "!")
    return "skipped" if "skipped" in m else "error"


def print_tables(results: dict[str, dict[int, dict[str, Any]]], imports: dict[str, float]) -> None:
    names = list(results)
    sizes = sorted({n for r in results.values() for n in r})
    lo, hi = sizes[0], sizes[-1]
    print("\nper-step overhead, µs (build + execute, zero-duration steps; '!' = wrong inputs)")
    rows = []
    for e in names:
        r = results[e]
        growth = _ratio(r.get(hi), r.get(lo))
        rows.append([e, *(_cell(r[n], "us_per_step", ".1f") for n in sizes), growth])
    print(table(["engine", *map(str, sizes), f"{hi // 1000}k / {lo // 1000}k"], rows))
    print("\nexecution call only (graph already built), µs per step")
    rows = [[e, *(_cell(results[e][n], "exec_us_per_step", ".1f") for n in sizes)] for e in names]
    print(table(["engine", *map(str, sizes)], rows))
    print("\ntime in garbage collection during the execution call, µs per step: all / full only")
    rows = [
        [e]
        + [
            f"{m['gc_us_per_step']:.1f} / {m['gc_full_us_per_step']:.1f}"
            if "gc_us_per_step" in m
            else ("-" if "wall_s" in m else _cell(m, "gc_us_per_step", ""))
            for m in (results[e][n] for n in sizes)
        ]
        for e in names
    ]
    print(table(["engine", *map(str, sizes)], rows))
    for e in names:
        for n in sizes:
            if "skipped" in results[e][n]:
                print(f"  {e} {n}: skipped ({results[e][n]['skipped']})")

    print("\npeak RSS of a fresh subprocess, MiB (VmHWM; + increase during the runs)")
    rows = [
        [e]
        + [
            f"{m['maxrss_kib'] / 1024:.0f} (+{(m['maxrss_kib'] - m['baseline_kib']) / 1024:.0f})"
            if "maxrss_kib" in m
            else _cell(m, "maxrss_kib", "")
            for m in (results[e][n] for n in sizes)
        ]
        for e in names
    ]
    print(table(["engine", *map(str, sizes)], rows))

    print(
        "\nstart-up, fresh interpreter: import time inside the subprocess, `python -c 'import X'`"
    )
    print("minus a bare interpreter (full runs only), and a first 1-step run right after import")
    rows = [
        [
            e,
            IMPORTS[e],
            results[e][lo].get("import_s"),
            imports.get(e),
            results[e][lo].get("first_run_s", 0) * 1000,
        ]
        for e in names
    ]
    print(table(["engine", "module", "import s", "python -c s", "first run ms"], rows))

    pairs = [(e, "bare_asyncio") for e in names if e != "bare_asyncio" and "bare_asyncio" in names]
    if "planrail" in names and "langgraph" in names:
        pairs.append(("planrail", "langgraph"))
    for title, key in (
        ("execution only (the scheduling overhead)", "exec_us_per_step"),
        ("build + execute", "us_per_step"),
    ):
        print(f"\nper-step overhead ratios, {title}; median of the per-round ratios")
        rows = [
            [f"{a} / {b}", *(_ratio(results[a][n], results[b][n], key) for n in sizes)]
            for a, b in pairs
        ]
        print(table(["ratio", *map(str, sizes)], rows))
    print("\ngrowth of the execution overhead per step with plan size")
    rows = [[e, _ratio(results[e].get(hi), results[e].get(lo), "exec_us_per_step")] for e in names]
    print(table(["engine", f"{hi // 1000}k / {lo // 1000}k"], rows))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 and 5,000 steps only")
    parser.add_argument("--engines", default=",".join(engines.ENGINES))
    parser.add_argument(
        "--child", nargs=3, metavar=("ENGINE", "N", "REPEATS"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.child:
        engine, n, repeats = args.child
        print(json.dumps(child(engine, int(n), int(repeats))))
        return {}
    sizes = QUICK_SIZES if args.quick else SIZES
    results: dict[str, dict[int, dict[str, Any]]] = {}
    imports: dict[str, float] = {}
    skipped: dict[str, str] = {}
    print(f"overhead: layered DAGs of {', '.join(map(str, sizes))} zero-duration steps")
    names = []
    for engine in args.engines.split(","):
        try:
            engines.load(engine)
        except engines.EngineUnavailable as exc:
            skipped[engine] = str(exc)
            print(f"note: skipping {exc}")
            continue
        names.append(engine)
    results = measure(names, sizes, args.quick)
    if not args.quick:  # the in-subprocess import time stands in for it in quick runs
        for engine in names:
            imports[engine] = import_time(IMPORTS[engine], 5)
    if results:
        print_tables(results, imports)
    payload = {
        "sizes": list(sizes),
        "width": WIDTH,
        "memory_metric": "peak RSS of a fresh subprocess: VmHWM from /proc/self/status, KiB",
        "skipped": skipped,
        "import_s": imports,
        "results": {e: {str(n): m for n, m in r.items()} for e, r in results.items()},
    }
    path = write_json("overhead", args.quick, payload)
    print(f"wrote {path}")
    return payload


if __name__ == "__main__":
    main()
