"""planrail, through its public API (``planrail.tool`` + ``planrail.prepare``).

    @planrail.tool(side_effects="none")
    async def node(id: str, duration: float, inputs: list[str]) -> str: ...

    execution = planrail.prepare(plan, tools=[node], limits=...)  # validates: "build" time
    result = await execution.run()                                  # in memory: "exec" time
    result.status == "succeeded"            # a str, or a str-valued Enum
    result.steps[step_id].output          # a mapping by step id (a list of steps also works)

Validation runs in ``prepare`` and is reported as build time, the way LangGraph's graph
compilation is; ``wall`` figures include it. Each step's ``args.inputs`` is a list of
whole-output references ``["${dep}", ...]``, so planrail must resolve them to the
dependencies' real outputs for the correctness check to pass. The tool is defined per run
(inside ``run``) so the inputs it records belong to that run alone.
"""

from __future__ import annotations

import time
from typing import Any

from bench.engines import timer
from bench.engines.base import EngineResult, EngineUnavailable, inputs_ok, run_timed, short_ids

try:
    import planrail
except ImportError as exc:  # not installed, or the package does not import yet
    planrail = None
    _IMPORT_ERROR: str = str(exc)
else:
    _IMPORT_ERROR = ""

LIMITS: Any = None
"""Plan limits raised for benchmark sizes (the safe defaults stop at 10,000 steps)."""


def check_available() -> None:
    if planrail is None:
        raise EngineUnavailable(f"planrail: import failed ({_IMPORT_ERROR})")
    missing = [name for name in ("prepare", "tool") if not hasattr(planrail, name)]
    if missing:
        raise EngineUnavailable(f"planrail: API not there yet (missing {', '.join(missing)})")


def to_plan(dag: dict[str, Any], scale: float) -> dict[str, Any]:
    """The benchmark DAG as a planrail plan (ids must already be valid step ids)."""
    steps = [
        {
            "id": s["id"],
            "tool": "node",
            "args": {
                "id": s["id"],
                "duration": s["duration_s"] * scale,
                "inputs": [f"${{{d}}}" for d in s["depends_on"]],
            },
            "depends_on": list(s["depends_on"]),
        }
        for s in dag["steps"]
    ]
    return {"goal": "bench", "steps": steps}


def _make_tool(seen: dict[str, list[str]]) -> Any:
    @planrail.tool(side_effects="none")  # pure: nothing to approve, as in the other engines
    async def node(id: str, duration: float, inputs: list[str]) -> str:
        seen[id] = list(inputs)
        await timer.sleep(duration)
        return id

    return node


def _outputs(result: Any) -> dict[str, Any]:
    steps = result.steps
    if isinstance(steps, dict):
        return {sid: getattr(rec, "output", None) for sid, rec in steps.items()}
    return {rec.id: rec.output for rec in steps}


def run(dag: dict[str, Any], *, scale: float = 1.0) -> EngineResult:
    check_available()
    dag = short_ids(dag)  # planrail ids: ^[A-Za-z_][A-Za-z0-9_]{0,63}$
    seen: dict[str, list[str]] = {}
    t0 = time.perf_counter()  # building = writing the plan + validating it (like a compile)
    plan, tool = to_plan(dag, scale), _make_tool(seen)
    limits = planrail.PlanLimits(
        max_steps=10**6, max_plan_bytes=2**31, max_nodes=10**8, max_dependencies=10**5
    )
    execution = planrail.prepare(plan, tools=[tool], limits=limits)
    build_s = time.perf_counter() - t0
    result, elapsed, collecting = run_timed(execution.run)
    status = str(getattr(result.status, "value", result.status))
    ok = status == "succeeded" and inputs_ok(dag, seen, _outputs(result))
    return EngineResult.timed(ok, elapsed, collecting, build_s=build_s, extra={"status": status})
