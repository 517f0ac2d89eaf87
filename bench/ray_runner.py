"""planrail on Ray vs planrail's local runner vs bare Ray, on the same DAGs, in one command.

    python -m bench.ray_runner [--quick] [--repeats N]

Three engines, each in a fresh subprocess (so each one's peak memory is its own):

- ``local``: planrail with its default runner (async tools on the event loop, sync tools in a
  thread pool);
- ``planrail_ray``: planrail with ``RayRunner`` (async tools on two warm async actors, sync
  tools as Ray tasks), on a local ``ray.init(num_cpus=2)``;
- ``bare_ray``: the same work with Ray alone, on the same runtime: async steps on two async
  actors of the same concurrency, each step's call made by a coroutine once its dependencies'
  calls returned (what any driver must do for an actor pool); sync steps as Ray tasks taking
  their dependencies' ObjectRefs as arguments (Ray resolves them).

Workloads (every step checks it received exactly its dependencies' outputs):

- ``overhead``: zero-work steps — a 200-step chain (latency per step) and 1,000 independent
  steps (throughput), async; a 50-step chain of sync steps (Ray tasks);
- ``workflows``: the four real WfInstances DAGs (``bench/data/wfinstances``), async steps that
  wait their traced durations, scaled so each critical path takes ``TARGET_CP_S`` seconds;
  reported as makespan / critical path;
- ``cpu fan-out``: 1 → 200 → 1 sync steps of real CPU work (pure-Python arithmetic, ~20 ms
  each): threads of one process share one GIL; Ray's worker processes use both cores.

Peak memory is the largest resident set of the engine's whole process tree (the driver and,
for Ray, GCS, raylet and every worker), sampled every 50 ms. Nothing here asserts on timings.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench import dags
from bench.engines.base import short_ids
from bench.report import environment, table, write_json

ENGINES = ("local", "planrail_ray", "bare_ray")
TARGET_CP_S = 1.0
QUICK_TARGET_CP_S = 0.5
CPU_ROUNDS = 200_000  # ~20 ms of one core per step on this machine
FAN = 200
ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------------- workloads as DAGs


def _zero(name: str, dag: dags.DAG) -> dags.DAG:
    return {**dag, "name": name}


def workloads(quick: bool) -> list[tuple[str, str, dags.DAG]]:
    """``(group, kind, dag)``: kind ``io`` (async steps) or ``cpu`` (sync steps)."""
    out: list[tuple[str, str, dags.DAG]] = [
        ("overhead", "io", _zero("chain-200 (async)", dags.chain(200, durations="zero"))),
        ("overhead", "io", _zero("wide-1000 (async)", dags.fan_out_in(1000, durations="zero"))),
        ("overhead", "cpu", _zero("chain-50 (tasks)", dags.chain(50, durations="zero"))),
    ]
    target = QUICK_TARGET_CP_S if quick else TARGET_CP_S
    for name in dags.WFINSTANCES:
        dag = dags.load_wfinstance(name)
        scale = target / dags.critical_path(dag)
        out.append(("workflows", "io", dags.load_wfinstance(name, scale)))
    fan = dags.fan_out_in(FAN + 2, durations="zero")
    for s in fan["steps"][1:-1]:
        s["duration_s"] = 1.0  # cpu steps: > 0 means CPU_ROUNDS of work
    out.append(("cpu fan-out", "cpu", {**fan, "name": f"1-{FAN}-1 cpu"}))
    return [(group, kind, short_ids(dag)) for group, kind, dag in out]


# ---------------------------------------------------------------------- memory of the tree


class TreeMemory:
    """Samples the resident set of this process and all its descendants; keeps the peak."""

    def __init__(self, every: float = 0.05) -> None:
        self.every = every
        self.peak_kib = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TreeMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.peak_kib = max(self.peak_kib, tree_rss_kib(os.getpid()))


def tree_rss_kib(root: int) -> int:
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        pid, ppid = int(entry), int(fields.get("PPid", "0").strip() or 0)
        children.setdefault(ppid, []).append(pid)
        rss[pid] = int(fields.get("VmRSS", "0 kB").split()[0] or 0)
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total


# ---------------------------------------------------------------------- the engines


def _plan(dag: dags.DAG, kind: str) -> dict[str, Any]:
    steps = []
    for s in dag["steps"]:
        deps = list(s["depends_on"])
        work: dict[str, Any] = (
            {"duration": s["duration_s"]}
            if kind == "io"
            else {"rounds": CPU_ROUNDS if s["duration_s"] > 0 else 0}
        )
        steps.append(
            {
                "id": s["id"],
                "tool": "io_node" if kind == "io" else "cpu_node",
                "args": {
                    "id": s["id"],
                    **work,
                    "inputs": [f"${{{d}}}" for d in deps],
                    "expect": deps,
                },
                "depends_on": deps,
            }
        )
    return {"goal": dag["name"], "steps": steps}


class PlanrailEngine:
    def __init__(self, on_ray: bool) -> None:
        import planrail
        from bench import ray_tools

        self.planrail = planrail
        self.tools = [ray_tools.io_node, ray_tools.cpu_node]
        self.runner: Any = None
        if on_ray:
            from planrail.backends.ray import RayRunner

            self.runner = RayRunner(max_concurrency=1024, actors=2)

    async def run(self, dag: dags.DAG, kind: str) -> tuple[float, bool]:
        execution = self.planrail.prepare(_plan(dag, kind), self.tools, tool_runner=self.runner)
        if self.runner is not None:  # warm: the pool exists, the tools are imported
            await self.runner.prepare(self.tools)
        t0 = time.perf_counter()
        result = await execution.run()
        return time.perf_counter() - t0, result.status == "succeeded"


class BareRayEngine:
    def __init__(self) -> None:
        import ray

        from bench import ray_tools

        self.ray = ray

        class Actor:
            async def node(self, *a: Any) -> str:
                return await ray_tools.io_work(*a)

        self.actors = [
            ray.remote(num_cpus=0, max_restarts=0, max_task_retries=0)(Actor)
            .options(max_concurrency=512)
            .remote()
            for _ in range(2)
        ]

        def task(id: str, rounds: int, expect: list[str], *inputs: str) -> str:
            return ray_tools.cpu_work(id, rounds, list(inputs), expect)

        self.task = ray.remote(max_retries=0)(task)

    async def run(self, dag: dags.DAG, kind: str) -> tuple[float, bool]:
        await asyncio.gather(*(a.node.remote("warm", 0.0, [], []) for a in self.actors))
        plan = _plan(dag, kind)["steps"]
        t0 = time.perf_counter()
        if kind == "cpu":
            refs: dict[str, Any] = {}
            for s in plan:
                a = s["args"]
                deps = [refs[d] for d in s["depends_on"]]
                refs[s["id"]] = self.task.remote(a["id"], a["rounds"], a["expect"], *deps)
            outs = await asyncio.gather(*refs.values())
        else:
            done: dict[str, asyncio.Task[str]] = {}

            async def step(i: int, s: dict[str, Any]) -> str:
                inputs = [await done[d] for d in s["depends_on"]]
                a = s["args"]
                actor = self.actors[i % len(self.actors)]
                return str(await actor.node.remote(a["id"], a["duration"], inputs, a["expect"]))

            for i, s in enumerate(plan):
                done[s["id"]] = asyncio.create_task(step(i, s))
            outs = await asyncio.gather(*done.values())
        elapsed = time.perf_counter() - t0
        return elapsed, list(outs) == [s["id"] for s in plan]


def child(engine: str, quick: bool, repeats: int, only: str | None = None) -> dict[str, Any]:
    """Runs in a fresh subprocess; the parent reads the JSON it prints."""
    if engine != "local":
        import ray

        ray.init(
            num_cpus=2,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
            runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}},
        )
    out: dict[str, Any] = {}
    with TreeMemory() as memory:
        runner: Any = BareRayEngine() if engine == "bare_ray" else PlanrailEngine(engine != "local")

        async def main() -> None:
            warm = dags.chain(3, durations="zero")
            await runner.run(warm, "io")
            await runner.run(warm, "cpu")
            for group, kind, dag in workloads(quick):
                if only is not None and only not in dag["name"]:
                    continue
                times, cpu, ok = [], [], True
                for _ in range(repeats):
                    c0 = time.process_time()
                    elapsed, good = await runner.run(dag, kind)
                    cpu.append(time.process_time() - c0)
                    times.append(elapsed)
                    ok = ok and good
                out[dag["name"]] = {
                    "group": group,
                    "steps": len(dag["steps"]),
                    "critical_path_s": dags.critical_path(dag),
                    "makespan_s": statistics.median(times),
                    "runs_s": times,
                    "driver_cpu_s": statistics.median(cpu),
                    "ok": ok,
                }
            if getattr(runner, "runner", None) is not None:
                await runner.runner.aclose()

        asyncio.run(main())
    return {"workloads": out, "peak_tree_rss_kib": memory.peak_kib}


def in_subprocess(
    engine: str, quick: bool, repeats: int, only: str | None = None
) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench.ray_runner", "--child", engine, "--repeats", str(repeats)]
    if quick:
        cmd.append("--quick")
    if only is not None:
        cmd += ["--only", only]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["failed"])[-1]}
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def merged(runs: list[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per engine and workload: the median over rounds of each round's median makespan, and
    the median over rounds of planrail_ray / bare_ray (measured in the same round)."""
    out: dict[str, dict[str, Any]] = {}
    for engine in ENGINES:
        done = [r[engine] for r in runs if "workloads" in r[engine]]
        if not done:
            out[engine] = runs[-1][engine]
            continue
        names = done[0]["workloads"]
        out[engine] = {
            "peak_tree_rss_kib": max(d["peak_tree_rss_kib"] for d in done),
            "workloads": {
                n: {
                    **done[0]["workloads"][n],
                    "makespan_s": statistics.median(d["workloads"][n]["makespan_s"] for d in done),
                    "ok": all(d["workloads"][n]["ok"] for d in done),
                }
                for n in names
            },
        }
    ratios: dict[str, float] = {}
    both = [r for r in runs if all("workloads" in r[e] for e in ("planrail_ray", "bare_ray"))]
    for n in out["bare_ray"].get("workloads", {}):
        per_round = [
            r["planrail_ray"]["workloads"][n]["makespan_s"]
            / r["bare_ray"]["workloads"][n]["makespan_s"]
            for r in both
        ]
        if per_round:
            ratios[n] = statistics.median(per_round)
    out["ratio"] = {"planrail_ray_over_bare_ray": ratios}
    return out


def report(results: dict[str, dict[str, Any]]) -> None:
    names = [n for n in next(iter(results.values())).get("workloads", {})]
    rows = []
    for name in names:
        cells: list[Any] = [name]
        first = results["local"]["workloads"][name]
        for engine in ENGINES:
            w = results[engine].get("workloads", {}).get(name)
            if w is None:
                cells.append(None)
                continue
            mark = "" if w["ok"] else "!"
            if first["group"] == "workflows":
                cells.append(f"{w['makespan_s'] / w['critical_path_s']:.3f}{mark}")
            elif first["group"] == "overhead":
                cells.append(f"{w['makespan_s'] / w['steps'] * 1e6:.0f} µs{mark}")
            else:
                cells.append(f"{w['makespan_s']:.2f} s{mark}")
        ratio = results["ratio"]["planrail_ray_over_bare_ray"].get(name)
        cells.append(None if ratio is None else f"{ratio:.3f}")
        rows.append(cells)
    print("overhead: wall time per step; workflows: makespan / critical path; cpu: makespan")
    print(table(["workload", *ENGINES, "planrail_ray / bare_ray (median of rounds)"], rows))
    print("\npeak RSS of the engine's process tree, MiB")
    print(
        table(
            ["engine", "peak MiB"],
            [[e, results[e].get("peak_tree_rss_kib", 0) / 1024] for e in ENGINES],
        )
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=None, help="runs per workload per round")
    parser.add_argument("--rounds", type=int, default=None, help="fresh subprocesses per engine")
    parser.add_argument(
        "--only", help="run only the workloads whose name contains this (results: a separate file)"
    )
    parser.add_argument("--child", choices=ENGINES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    repeats = args.repeats or (1 if args.quick else 3)
    if args.child:
        print(json.dumps(child(args.child, args.quick, repeats, args.only)))
        return
    rounds = args.rounds or (1 if args.quick else 3)
    runs: list[dict[str, dict[str, Any]]] = []
    for r in range(rounds):  # engines take turns, so a busy minute on the machine hits all
        runs.append({})
        for engine in ENGINES:
            print(f"round {r + 1}/{rounds}: {engine} ...", flush=True)
            runs[-1][engine] = in_subprocess(engine, args.quick, repeats, args.only)
            if "error" in runs[-1][engine]:
                print(f"  {engine} failed: {runs[-1][engine]['error']}")
    results = merged(runs)
    report(results)
    path = write_json(
        "ray_runner" if args.only is None else "ray_runner-only",
        args.quick,
        {
            "environment": environment(),
            "repeats": repeats,
            "rounds": rounds,
            "only": args.only,
            "per_round": runs,
            "target_cp_s": QUICK_TARGET_CP_S if args.quick else TARGET_CP_S,
            "cpu_rounds": CPU_ROUNDS,
            "results": results,
        },
    )
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
