"""Dask's threaded scheduler on a raw task-graph dict; nodes ``time.sleep`` in worker threads.

``num_workers`` is set to the DAG's ideal concurrency (the most steps that would run at once if
every step started the moment its dependencies finished; ``bench.dags.ideal_concurrency``),
capped at ``MAX_WORKERS``. That makes the pool effectively unbounded for every DAG here (the
widest, montage, needs 423) while not starting thousands of idle threads for the overhead runs.
"""

from __future__ import annotations

import time
from functools import partial
from typing import Any

import dask.threaded

from bench.dags import ideal_concurrency
from bench.engines.base import EngineResult, inputs_ok

MAX_WORKERS = 512


def _node(sid: str, duration: float, seen: dict[str, list[str]], inputs: list[str]) -> str:
    seen[sid] = list(inputs)
    time.sleep(duration)
    return sid


def run(dag: dict[str, Any], *, scale: float = 1.0) -> EngineResult:
    seen: dict[str, list[str]] = {}
    t0 = time.perf_counter()
    # The step id is bound with partial: a bare string argument equal to a key would be
    # substituted by that key's value. Keys inside the list argument are the dependencies.
    graph = {
        s["id"]: (partial(_node, s["id"], s["duration_s"] * scale, seen), list(s["depends_on"]))
        for s in dag["steps"]
    }
    keys = [s["id"] for s in dag["steps"]]
    workers = min(MAX_WORKERS, ideal_concurrency(dag))
    build_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    values = dask.threaded.get(graph, keys, num_workers=workers)
    elapsed = time.perf_counter() - t0
    ok = inputs_ok(dag, seen, dict(zip(keys, values, strict=True)))
    return EngineResult(
        makespan_s=elapsed, per_node_inputs_ok=ok, build_s=build_s, extra={"num_workers": workers}
    )
