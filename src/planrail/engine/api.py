"""``planrail.run`` and ``planrail.arun``: validate a plan, then execute it by dependency."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from planrail._memory import collector_paused
from planrail.clock import SYSTEM_CLOCK
from planrail.engine.executor import Execution, FailureMode
from planrail.engine.result import RunResult
from planrail.plan.loader import PlanLimits
from planrail.plan.model import Plan
from planrail.plan.tools import AnyTool, ToolRegistry, ToolRunner
from planrail.plan.validate import validate
from planrail.policies.limits import RunPolicy
from planrail.types import Clock, Observer

__all__ = ["arun", "prepare", "run"]

PlanInput = Plan | Mapping[str, Any] | str | Path
ToolsInput = ToolRegistry | Iterable[AnyTool] | None


def prepare(
    plan: PlanInput,
    tools: ToolsInput = None,
    *,
    run_id: str | None = None,
    max_concurrency: int | None = None,
    failure_mode: FailureMode = "continue",
    clock: Clock = SYSTEM_CLOCK,
    observers: Iterable[Observer] = (),
    limits: PlanLimits | None = None,
    policy: RunPolicy | None = None,
    tool_runner: ToolRunner | None = None,
) -> Execution:
    """Validate ``plan`` against ``tools`` and return an :class:`Execution` ready to run.

    Raises :class:`~planrail.PlanValidationError` (with every issue) if the plan is invalid.
    """
    registry = ToolRegistry.of(tools)
    source = Path(plan) if isinstance(plan, str) and _looks_like_path(plan) else plan
    # Everything built here lives as long as the run, which keeps it out of full collections
    # (planrail._memory.long_lived): collecting in between would only scan it once for nothing.
    with collector_paused():
        checked = validate(source, registry, limits=limits).raise_for_errors()
        return Execution(
            checked,
            registry,
            run_id=run_id,
            max_concurrency=max_concurrency,
            failure_mode=failure_mode,
            clock=clock,
            observers=observers,
            policy=policy,
            tool_runner=tool_runner,
        )


def _looks_like_path(s: str) -> bool:
    return (
        "\n" not in s
        and not s.lstrip().startswith(("{", "["))
        and Path(s).suffix in (".json", ".yaml", ".yml")
    )


async def arun(plan: PlanInput, tools: ToolsInput = None, **options: Any) -> RunResult:
    """Validate and execute ``plan``; returns the :class:`RunResult` (status, steps, output).

    Options are those of :func:`prepare`. A failed step does not raise: look at ``status``.
    """
    return await prepare(plan, tools, **options).run()


def run(plan: PlanInput, tools: ToolsInput = None, **options: Any) -> RunResult:
    """The synchronous form of :func:`arun` (runs its own event loop)."""
    return asyncio.run(arun(plan, tools, **options))
