"""Running plans for the contract suite: built from the engine's named graphs, run on a runner."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from engine.graphs import Graph
from planrail.engine.executor import Execution
from planrail.engine.result import RunResult
from planrail.plan.tools import ToolRunner
from planrail.plan.validate import validate
from planrail.store.base import Store

from . import tools
from .ledger import Ledger

NO_WAIT = {"initial_delay": 0, "jitter": 0}
"""Retry delays of zero: retries need no clock in these tests."""


def graph_plan(graph: Graph, ledger: Ledger, fail: Collection[str] = ()) -> dict[str, Any]:
    """One probe per step of ``graph``, sync (``work``) and async (``awork``) alternating; each
    references its dependencies three ways (whole output, a field, a nested value)."""
    steps = []
    for i, (sid, deps) in enumerate(graph.deps.items()):
        steps.append(
            {
                "id": sid,
                "tool": "work" if i % 2 == 0 else "awork",
                "args": {
                    "ledger": str(ledger),
                    "step": sid,
                    "fail": sid in fail,
                    "inputs": {d: f"${{{d}}}" for d in deps},
                    "fields": {d: f"${{{d}.token}}" for d in deps},
                    "items": {d: f"${{{d}.payload.items}}" for d in deps},
                },
                "depends_on": list(deps),
            }
        )
    return {"goal": f"probe {graph.name}", "steps": steps}


def execution(
    plan: dict[str, Any],
    runner: ToolRunner | None,
    *,
    store: Store | None = None,
    run_id: str | None = None,
    observers: Iterable[Any] = (),
    **options: Any,
) -> Execution:
    """Validate ``plan`` against the suite's tools; an Execution on ``runner`` (``None``: the
    execution's own default ``LocalRunner``)."""
    checked = validate(plan, tools.ALL).raise_for_errors()
    options.setdefault("approve", True)  # the suite is about runners, not approval
    return Execution(
        checked,
        tools.ALL,
        tool_runner=runner,
        store=store,
        run_id=run_id,
        observers=observers,
        **options,
    )


async def run(plan: dict[str, Any], runner: ToolRunner | None, **options: Any) -> RunResult:
    return await execution(plan, runner, **options).run()
