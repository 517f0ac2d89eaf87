"""Running one step: resolve its arguments from real outputs, validate them, call the tool.

The executor decides *when* a step runs; this module decides *how*. It never touches the
scheduler and never writes to a store: it returns an :class:`Outcome`.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Mapping
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

import pydantic
import pydantic_core

from planrail.errors import PlanrailError, ReferenceResolutionError, UnknownToolError
from planrail.plan.model import Step
from planrail.plan.compiled import Filler, compile_value
from planrail.plan.tools import StepContext, Tool, ToolRegistry
from planrail.types import StepStatus

__all__ = ["Outcome", "StepRunner", "error_info"]


@dataclass
class Outcome:
    """What happened to one step."""

    status: StepStatus
    output: Any = None
    error: dict[str, Any] | None = None
    attempts: int = 0
    reason: str | None = None
    degraded: bool = False
    args: Any = None
    """The resolved arguments the tool was called with (for records and ``show --step``)."""
    history: list[dict[str, Any]] = field(default_factory=list)


def error_info(exc: BaseException, *, retryable: bool | None = None) -> dict[str, Any]:
    """The ``{type, message, retryable}`` object for an exception."""
    if retryable is None:
        retryable = bool(getattr(exc, "retryable", False))
    message = exc.message if isinstance(exc, PlanrailError) else str(exc)
    return {"type": type(exc).__name__, "message": message or type(exc).__name__,
            "retryable": retryable}


class ArgumentError(PlanrailError):
    """The resolved arguments do not fit the tool's input schema."""

    code = "invalid_arguments"


class OutputError(PlanrailError):
    """The tool returned something that does not fit its declared output type."""

    code = "invalid_output"


class StepRunner:
    """Calls tools for steps. Sync tools run in ``pool``; async tools on the event loop."""

    def __init__(self, registry: ToolRegistry, pool: Executor | None) -> None:
        self.registry = registry
        self.pool = pool
        self._fillers: dict[str, Filler] = {}

    def resolve_args(self, step: Step, outputs: Mapping[str, Any]) -> Any:
        """The step's arguments with every reference filled from ``outputs`` (a fresh copy)."""
        filler = self._fillers.get(step.id)
        if filler is None:
            filler = self._fillers[step.id] = compile_value(step.args)
        return filler(outputs)

    async def run(
        self, step: Step, outputs: Mapping[str, Any], context: Callable[[int], StepContext]
    ) -> Outcome:
        """Run ``step`` once with its arguments resolved from ``outputs``."""
        try:
            args = self.resolve_args(step, outputs)
        except ReferenceResolutionError as exc:
            return Outcome(StepStatus.FAILED, error=error_info(exc), reason=exc.message)
        try:
            tool = self.registry.executable(step.tool or "")
        except UnknownToolError as exc:
            return Outcome(StepStatus.FAILED, error=error_info(exc), args=args)
        try:
            output = await self.call(tool, args, context(1))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return Outcome(StepStatus.FAILED, error=error_info(exc), attempts=1, args=args)
        return Outcome(StepStatus.SUCCEEDED, output=output, attempts=1, args=args)

    async def call(self, tool: Tool, args: Any, ctx: StepContext) -> Any:
        """Validate ``args`` against the tool's input schema, call it, return plain JSON output."""
        try:
            kwargs = tool.validate_args(args)
        except pydantic.ValidationError as exc:
            raise ArgumentError(
                f"arguments for tool '{tool.name}' do not fit its input schema: {_brief(exc)}"
            ) from exc
        if tool.context_param is not None:
            kwargs[tool.context_param] = ctx
        if tool.is_async:
            value = await tool.fn(**kwargs)
        else:
            loop = asyncio.get_running_loop()
            value = await loop.run_in_executor(self.pool, functools.partial(tool.fn, **kwargs))
        try:
            return tool.dump_output(value)
        except (pydantic.ValidationError, pydantic_core.PydanticSerializationError) as exc:
            raise OutputError(
                f"tool '{tool.name}' returned a value that does not fit its return type: "
                f"{_brief(exc)}"
            ) from exc


def _brief(exc: Exception) -> str:
    if isinstance(exc, pydantic.ValidationError):
        parts = []
        for err in exc.errors(include_url=False)[:5]:
            loc = ".".join(str(p) for p in err["loc"]) or "(input)"
            parts.append(f"{loc}: {err['msg']}")
        return "; ".join(parts)
    return str(exc)
