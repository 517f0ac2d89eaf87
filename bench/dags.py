"""Seeded DAG generators and the real WfInstances workflows, as plain data.

A DAG is ``{"name": str, "steps": [{"id": str, "depends_on": [str], "duration_s": float}]}``
with steps in topological order. Durations are in abstract seconds; engines multiply them by
their ``scale`` argument. ``durations="lognormal"`` (median 1, sigma 1, seeded) gives the
heterogeneous work that makes scheduling quality visible; ``durations="zero"`` gives the
overhead DAGs, where only the engine's own cost is measured.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Literal

DAG = dict[str, Any]
Durations = Literal["lognormal", "zero"]

WFINSTANCES_DIR = Path(__file__).parent / "data" / "wfinstances"
WFINSTANCES = ("montage-2mass-619", "epigenomics-1095", "blast-303", "airrflow-212")


def _duration(rng: random.Random, durations: Durations) -> float:
    return 0.0 if durations == "zero" else round(rng.lognormvariate(0.0, 1.0), 6)


def _step(sid: str, deps: list[str], duration: float) -> dict[str, Any]:
    return {"id": sid, "depends_on": deps, "duration_s": duration}


def layered(
    n: int, width: int, seed: int = 0, *, max_deps: int = 3, durations: Durations = "lognormal"
) -> DAG:
    """Layers of ``width`` steps; each step depends on 1..max_deps steps of the layer before."""
    rng = random.Random(seed)
    steps: list[dict[str, Any]] = []
    previous: list[str] = []
    for start in range(0, n, width):
        layer = [f"l{start // width}_{i}" for i in range(min(width, n - start))]
        for sid in layer:
            k = rng.randint(1, min(max_deps, len(previous))) if previous else 0
            deps = sorted(rng.sample(previous, k))
            steps.append(_step(sid, deps, _duration(rng, durations)))
        previous = layer
    return {"name": f"layered-{n}x{width}", "steps": steps}


def random_dag(
    n: int,
    p: float | None = None,
    seed: int = 0,
    *,
    avg_degree: float | None = None,
    durations: Durations = "lognormal",
) -> DAG:
    """Erdős–Rényi style DAG: edge j -> i (j < i) with probability p.

    Pass ``avg_degree`` instead of ``p`` to fix the mean in-degree (p = 2 * avg_degree / (n - 1)).
    """
    if p is None:
        p = 2.0 * (avg_degree if avg_degree is not None else 2.0) / max(n - 1, 1)
    rng = random.Random(seed)
    ids = [f"r{i}" for i in range(n)]
    steps = [
        _step(ids[i], [ids[j] for j in range(i) if rng.random() < p], _duration(rng, durations))
        for i in range(n)
    ]
    return {"name": f"random-{n}", "steps": steps}


def chain(n: int, seed: int = 0, *, durations: Durations = "lognormal") -> DAG:
    """A single chain: the critical path is all the work; no parallelism to find."""
    rng = random.Random(seed)
    steps = [
        _step(f"c{i}", [f"c{i - 1}"] if i else [], _duration(rng, durations)) for i in range(n)
    ]
    return {"name": f"chain-{n}", "steps": steps}


def fan_out_in(n: int, seed: int = 0, *, durations: Durations = "lognormal") -> DAG:
    """One source, ``n - 2`` independent middle steps, one sink joining them all."""
    rng = random.Random(seed)
    middle = [f"m{i}" for i in range(max(n - 2, 0))]
    steps = [_step("src", [], _duration(rng, durations))]
    steps += [_step(m, ["src"], _duration(rng, durations)) for m in middle]
    steps.append(_step("sink", middle, _duration(rng, durations)))
    return {"name": f"fan-out-in-{n}", "steps": steps}


def parallel_chains(
    k: int, length: int, seed: int = 0, *, durations: Durations = "lognormal"
) -> DAG:
    """``k`` independent chains joined by one sink (chain-ish mixture).

    Engines that advance in lock-step supersteps pay the slowest chain's step at every level,
    so this is where their makespan departs furthest from the critical path.
    """
    rng = random.Random(seed)
    steps: list[dict[str, Any]] = []
    for c in range(k):
        for i in range(length):
            deps = [f"k{c}_{i - 1}"] if i else []
            steps.append(_step(f"k{c}_{i}", deps, _duration(rng, durations)))
    steps.append(_step("join", [f"k{c}_{length - 1}" for c in range(k)], 0.0))
    return {"name": f"chains-{k}x{length}", "steps": steps}


def load_wfinstance(name: str, scale: float = 1.0) -> DAG:
    """A real workflow from ``bench/data/wfinstances``; durations multiplied by ``scale``."""
    data = json.loads((WFINSTANCES_DIR / f"{name}.json").read_text())
    steps = [
        _step(s["id"], list(s["depends_on"]), float(s["duration_s"]) * scale) for s in data["steps"]
    ]
    return {"name": name, "steps": steps}


def critical_path(dag: DAG) -> float:
    """Longest dependency chain by summed duration: the lower bound on any makespan."""
    finish: dict[str, float] = {}
    for s in dag["steps"]:
        finish[s["id"]] = max((finish[d] for d in s["depends_on"]), default=0.0) + s["duration_s"]
    return max(finish.values(), default=0.0)


def total_work(dag: DAG) -> float:
    return float(sum(s["duration_s"] for s in dag["steps"]))


def max_width(dag: DAG) -> int:
    """Most steps in one depth level (depth = longest edge count from a root)."""
    depth: dict[str, int] = {}
    counts: dict[int, int] = {}
    for s in dag["steps"]:
        d = max((depth[p] + 1 for p in s["depends_on"]), default=0)
        depth[s["id"]] = d
        counts[d] = counts.get(d, 0) + 1
    return max(counts.values(), default=0)


def ideal_concurrency(dag: DAG) -> int:
    """Most steps running at once when every step starts the moment its dependencies finish.

    That is the worker count an executor with a fixed pool needs to be effectively unbounded.
    Falls back to ``max_width`` for zero-duration DAGs.
    """
    finish: dict[str, float] = {}
    events: list[tuple[float, int]] = []
    for s in dag["steps"]:
        t0 = max((finish[p] for p in s["depends_on"]), default=0.0)
        finish[s["id"]] = t0 + s["duration_s"]
        if s["duration_s"] > 0:
            events += [(t0, 1), (t0 + s["duration_s"], -1)]
    running = peak = 0
    for _, delta in sorted(events):  # at equal times, ends (-1) sort before starts (+1)
        running += delta
        peak = max(peak, running)
    return max(peak, max_width(dag))
