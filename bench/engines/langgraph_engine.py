"""LangGraph: a StateGraph with one async node per step and wait-all joins.

Edges: a root gets ``START -> node``; a step with one dependency ``dep -> node``; a step with
several ``add_edge([dep1, dep2, ...], node)``, which LangGraph documents as waiting for ALL
sources. State is one key, ``outputs``, whose reducer merges each node's ``{id: id}`` into the
dict (a new dict per merge, as reducers are meant to be pure). LangGraph executes in Pregel
supersteps, so a step whose inputs are ready still waits for the slowest step of the current
superstep: that is what the makespan / critical path ratio shows.

Nodes are ``functools.partial`` objects over one module-level coroutine function, not closures:
on a closure ``compile()`` disassembles each function's bytecode looking for subgraphs, which made
the build ~3x slower (0.9 ms per node here) and would have charged LangGraph for our style.
"""

from __future__ import annotations

import time
from functools import partial
from typing import Annotated, Any, TypedDict

from langgraph.graph import START, StateGraph

from bench.engines import timer
from bench.engines.base import EngineResult, inputs_ok, run_timed, short_ids


def _merge(left: dict[str, str], right: dict[str, str]) -> dict[str, str]:
    return {**left, **right}


class State(TypedDict):
    outputs: Annotated[dict[str, str], _merge]


async def _node(
    state: State, *, sid: str, deps: list[str], duration: float, seen: dict[str, list[str]]
) -> dict[str, Any]:
    outputs = state["outputs"]
    seen[sid] = [outputs.get(d, "<missing>") for d in deps]
    await timer.sleep(duration)
    return {"outputs": {sid: sid}}


def build(dag: dict[str, Any], scale: float, seen: dict[str, list[str]]) -> Any:
    builder = StateGraph(State)
    for s in dag["steps"]:
        node = partial(
            _node, sid=s["id"], deps=s["depends_on"], duration=s["duration_s"] * scale, seen=seen
        )
        builder.add_node(s["id"], node)
    for s in dag["steps"]:
        deps = s["depends_on"]
        if not deps:
            builder.add_edge(START, s["id"])
        elif len(deps) == 1:
            builder.add_edge(deps[0], s["id"])
        else:
            builder.add_edge(list(deps), s["id"])
    return builder.compile()


def run(dag: dict[str, Any], *, scale: float = 1.0) -> EngineResult:
    # Node names are restricted (no ':' or '|', no reserved names), so use n0, n1, ...
    dag = short_ids(dag)
    seen: dict[str, list[str]] = {}
    t0 = time.perf_counter()
    graph = build(dag, scale, seen)
    build_s = time.perf_counter() - t0
    # One superstep per depth level at most, plus START; the default limit is 25.
    config = {"recursion_limit": len(dag["steps"]) + 10}
    final, elapsed, collecting = run_timed(lambda: graph.ainvoke({"outputs": {}}, config))
    ok = inputs_ok(dag, seen, final["outputs"])
    return EngineResult.timed(ok, elapsed, collecting, build_s=build_s)
