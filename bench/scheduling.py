"""Scheduling quality: makespan / critical path per DAG and engine (1.0 is a perfect schedule).

Every step sleeps ``duration_s * scale``. The scale is chosen per DAG so that its critical path
takes ``TARGET_CP_S`` seconds of wall time (1.0 s; 0.3 s with --quick): long enough that timer
noise is small, short enough that the whole run stays in minutes. Asyncio engines sleep with
:func:`bench.engines.timer.sleep` (its docstring says why not ``asyncio.sleep``); the table
"floor" shows what each way of sleeping costs with no engine at all: the chain DAG's sleeps, one
after another in a single coroutine or thread. Each measurement is repeated
and the median is reported, after one unmeasured warm-up run at a tenth of the scale (Dask
creates its thread pool on first use; a cold 300-thread pool costs ~0.3 s). A run in which some
step did not receive exactly its dependencies' outputs is marked ``!``: do not trust its figure.

    python -m bench.scheduling [--quick] [--engines bare_asyncio,langgraph] [--repeats N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from bench import dags, engines
from bench.engines import timer
from bench.report import table, write_json

TARGET_CP_S = 1.0
QUICK_TARGET_CP_S = 0.3
SWEEP_DAG = "epigenomics-1095"
SWEEP_TARGETS_S = (0.25, 0.5, 1.0, 2.0)


def dag_set(quick: bool) -> list[dags.DAG]:
    """Synthetic DAGs (heterogeneous lognormal durations) plus the four real workflows."""
    n, width, chains = (100, 10, 4) if quick else (300, 20, 12)
    synthetic = [
        dags.layered(n, width, seed=1),
        dags.random_dag(n, avg_degree=3, seed=2),
        dags.fan_out_in(2 * n // 3, seed=3),
        dags.parallel_chains(chains, 10, seed=4),
        dags.chain(n // 8, seed=5),
    ]
    return synthetic + [dags.load_wfinstance(name) for name in dags.WFINSTANCES]


def available_engines(names: list[str]) -> tuple[dict[str, engines.Runner], dict[str, str]]:
    runners, skipped = {}, {}
    for name in names:
        try:
            runners[name] = engines.load(name)
        except engines.EngineUnavailable as exc:
            skipped[name] = str(exc)
            print(f"note: skipping {exc}")
    return runners, skipped


def measure(run: engines.Runner, dag: dags.DAG, scale: float, repeats: int) -> dict[str, Any]:
    """Median makespan / critical path over ``repeats`` runs, with every raw figure kept."""
    cp = dags.critical_path(dag) * scale
    ratios, ok = [], True
    for i in range(repeats + 1):
        try:
            if i == 0:  # unmeasured warm-up at a tenth of the scale (Dask builds its pool here)
                run(dag, scale=scale / 10)
                continue
            result = run(dag, scale=scale)
        except Exception as exc:  # one engine failing must not stop the others
            return {"error": f"{type(exc).__name__}: {exc}"}
        ratios.append(result.makespan_s / cp)
        ok = ok and result.per_node_inputs_ok
    return {"ratio": statistics.median(ratios), "ratios": ratios, "inputs_ok": ok}


def _cell(m: dict[str, Any] | None) -> str:
    if m is None:
        return "-"
    if "error" in m:
        return "error"
    return f"{m['ratio']:.3f}" + ("" if m["inputs_ok"] else "!")


def run_dags(
    runners: dict[str, engines.Runner], dag_list: list[dags.DAG], target: float, repeats: int
) -> list[dict]:
    rows = []
    for dag in dag_list:
        cp, work = dags.critical_path(dag), dags.total_work(dag)
        scale = target / cp
        row = {
            "dag": dag["name"],
            "steps": len(dag["steps"]),
            "edges": sum(len(s["depends_on"]) for s in dag["steps"]),
            "critical_path": cp,
            "total_work": work,
            "scale_s_per_unit": scale,
            "engines": {name: measure(run, dag, scale, repeats) for name, run in runners.items()},
        }
        print(
            f"  {dag['name']}: " + ", ".join(f"{e} {_cell(m)}" for e, m in row["engines"].items())
        )
        rows.append(row)
    return rows


def sweep(runners: dict[str, engines.Runner], repeats: int) -> list[dict]:
    """How the ratio depends on the time scale: fixed per-step costs weigh more on short steps."""
    dag = dags.load_wfinstance(SWEEP_DAG)
    cp = dags.critical_path(dag)
    return [
        {
            "dag": SWEEP_DAG,
            "target_cp_s": t,
            "engines": {name: measure(run, dag, t / cp, repeats) for name, run in runners.items()},
        }
        for t in SWEEP_TARGETS_S
    ]


def sleep_floor(dag: dags.DAG, target: float, repeats: int) -> dict[str, float]:
    """Makespan / critical path of a chain DAG slept through with no engine, per way of
    sleeping: the floor every engine's figure for that DAG stands on."""
    durations = [s["duration_s"] * target / dags.critical_path(dag) for s in dag["steps"]]

    async def in_loop(sleep: Callable[[float], Awaitable[None]]) -> float:
        t0 = time.perf_counter()
        for d in durations:
            await sleep(d)
        return time.perf_counter() - t0

    def in_thread() -> float:
        t0 = time.perf_counter()
        for d in durations:
            time.sleep(d)
        return time.perf_counter() - t0

    ways: dict[str, Callable[[], float]] = {
        "asyncio.sleep": lambda: asyncio.run(in_loop(asyncio.sleep)),
        "timer.sleep (asyncio engines here)": lambda: asyncio.run(in_loop(timer.sleep)),
        "time.sleep (Dask's workers)": in_thread,
    }
    return {
        name: statistics.median(way() for _ in range(repeats)) / target
        for name, way in ways.items()
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small DAGs, one repeat (CI smoke)")
    parser.add_argument("--engines", default=",".join(engines.ENGINES))
    parser.add_argument("--repeats", type=int, default=None)
    args = parser.parse_args(argv)
    repeats = args.repeats or (1 if args.quick else 5)
    runners, skipped = available_engines(args.engines.split(","))
    print(f"scheduling: makespan / critical path, median of {repeats}")
    target = QUICK_TARGET_CP_S if args.quick else TARGET_CP_S
    dag_list = dag_set(args.quick)
    chain = next(d for d in dag_list if d["name"].startswith("chain-"))
    floor = sleep_floor(chain, target, repeats)
    rows = run_dags(runners, dag_list, target, repeats)
    sweep_rows = [] if args.quick else sweep(runners, max(1, repeats - 2))

    names = list(runners)
    headers = ["dag", "steps", "work/cp", "scale s/s", *names]
    body = [
        [r["dag"], r["steps"], r["total_work"] / r["critical_path"], f"{r['scale_s_per_unit']:.2e}"]
        + [_cell(r["engines"].get(n)) for n in names]
        for r in rows
    ]
    print("\nmakespan / critical path (1.000 = perfect; '!' = wrong inputs)")
    print(table(headers, body))
    if sweep_rows:
        print(f"\n{SWEEP_DAG}: makespan / critical path vs. critical-path length")
        sweep_body = [
            [f"{s['target_cp_s']:.2f} s", *(_cell(s["engines"].get(n)) for n in names)]
            for s in sweep_rows
        ]
        print(table(["critical path", *names], sweep_body))
    print(f"\nfloor: {chain['name']} slept step after step, no engine (makespan / CP)")
    print(table(["way of sleeping", "ratio"], [[k, f"{v:.3f}"] for k, v in floor.items()]))
    payload = {
        "floor": floor,
        "floor_dag": chain["name"],
        "target_cp_s": target,
        "repeats": repeats,
        "skipped": skipped,
        "dags": rows,
        "sweep": sweep_rows,
    }
    path = write_json("scheduling", args.quick, payload)
    print(f"wrote {path}")
    return payload


if __name__ == "__main__":
    main()
