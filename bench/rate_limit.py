"""Scheduling under a rate-limited resource: FIFO vs critical-path-first, in virtual time.

Every step calls one upstream (resource ``api``) limited to ``--slots`` calls at once and
``--rate`` calls per second. Each call takes its step's duration. The same DAG runs twice through
planrail's real executor: once with priorities = remaining critical path (planrail's default:
the ready queue and the resource's waiters both put the longest remaining path first), once FIFO
(every priority 0, so ties go in arrival order). The event loop runs in virtual time
(``looptime``), so makespans are exact and the run takes seconds, not hours.

Reported per DAG: both makespans and the lower bound ``max(critical path, work / slots,
(calls - 1) / rate)`` — no schedule can beat it.

    python -m bench.rate_limit [--slots 4] [--rate 8] [--seed 1]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

import looptime

import planrail
from bench import dags
from bench.report import table, write_json
from planrail.engine.executor import Execution
from planrail.engine.scheduler import Node
from planrail.plan.model import Step
from planrail.policies import RunPolicy


class FifoExecution(Execution):
    """The same executor with every priority 0: ready steps and resource waiters go FIFO."""

    def _nodes(self, steps: Iterable[Step], priority: Mapping[str, float]) -> list[Node]:
        flat = dict.fromkeys(priority, 0.0)
        self._priority = flat  # what resource waiters are ordered by (read at run start)
        return [dataclasses.replace(n, priority=0.0) for n in super()._nodes(steps, flat)]


@planrail.tool(resource="api", side_effects="none")
async def call(duration: float) -> float:
    """One call to the rate-limited upstream, taking ``duration`` seconds."""
    await asyncio.sleep(duration)
    return duration


def to_plan(dag: dict[str, Any]) -> dict[str, Any]:
    return {
        "steps": [
            {
                "id": s["id"],
                "tool": "call",
                "args": {"duration": s["duration_s"]},
                "depends_on": list(s["depends_on"]),
                "estimated_duration": s["duration_s"],
            }
            for s in dag["steps"]
        ]
    }


def makespan(dag: dict[str, Any], policy: RunPolicy, fifo: bool) -> float:
    plan = planrail.validate(to_plan(dag), [call]).raise_for_errors()
    cls = FifoExecution if fifo else Execution
    loop = looptime.new_event_loop(start=0.0)  # created enabled: its time is virtual
    try:
        result = loop.run_until_complete(cls(plan, [call], policy=policy).run())
        end = loop.time()
    finally:
        loop.close()
    if result.status != "succeeded":
        raise RuntimeError(f"{dag['name']}: the run {result.status}")
    return end


def dag_set(seed: int) -> list[dict[str, Any]]:
    return [
        dags.layered(120, 12, seed=seed),
        dags.random_dag(120, avg_degree=2, seed=seed + 1),
        dags.parallel_chains(6, 12, seed=seed + 2),
        dags.fan_out_in(80, seed=seed + 3),
    ]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--slots", type=int, default=4, help="max_concurrency of the resource")
    parser.add_argument("--rate", type=float, default=8.0, help="calls per second")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--quick", action="store_true", help="same DAGs (virtual time is fast); *-quick results"
    )
    args = parser.parse_args(argv)
    policy = RunPolicy(resources={"api": {"max_concurrency": args.slots, "rate": args.rate}})
    rows = []
    for dag in dag_set(args.seed):
        cp, work, n = dags.critical_path(dag), dags.total_work(dag), len(dag["steps"])
        bound = max(cp, work / args.slots, (n - 1) / args.rate)
        cpf, fifo = makespan(dag, policy, fifo=False), makespan(dag, policy, fifo=True)
        rows.append(
            {
                "dag": dag["name"],
                "steps": n,
                "critical_path": cp,
                "work": work,
                "lower_bound": bound,
                "critical_path_first": cpf,
                "fifo": fifo,
                "cpf_over_bound": cpf / bound,
                "fifo_over_bound": fifo / bound,
            }
        )
    print(f"resource 'api': {args.slots} slots, {args.rate:g} calls/s (virtual time)")
    print(
        table(
            [
                "dag",
                "steps",
                "CP",
                "work/slots",
                "bound",
                "CP-first",
                "FIFO",
                "CP-first/bound",
                "FIFO/bound",
            ],
            [
                [
                    r["dag"],
                    r["steps"],
                    f"{r['critical_path']:.1f}",
                    f"{r['work'] / args.slots:.1f}",
                    f"{r['lower_bound']:.1f}",
                    f"{r['critical_path_first']:.1f}",
                    f"{r['fifo']:.1f}",
                    f"{r['cpf_over_bound']:.3f}",
                    f"{r['fifo_over_bound']:.3f}",
                ]
                for r in rows
            ],
        )
    )
    out = {"slots": args.slots, "rate": args.rate, "seed": args.seed, "rows": rows}
    write_json("rate_limit", args.quick, out)
    return out


if __name__ == "__main__":
    main()
