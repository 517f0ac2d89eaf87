"""Running one step: resolve its arguments from real outputs, validate them, perform its action.

The executor decides *when* a step runs; this module decides *how*. It never touches the
scheduler and never writes to a store: it returns an :class:`Outcome`.

Each action is performed by an :class:`ActionHandler`: ``tool_call`` by :class:`ToolAction`
(built in), ``llm_call`` by the LLM layer's handler, ``condition_check`` by the predicate
evaluator. The executor passes the handlers it has; a step whose action has no handler fails
with a clear error.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Mapping
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any, Protocol

import pydantic
import pydantic_core

from planrail.errors import PlanrailError, ReferenceResolutionError
from planrail.plan.compiled import Filler, compile_value
from planrail.plan.model import Step
from planrail.plan.tools import StepContext, Tool, ToolRegistry
from planrail.types import StepStatus

__all__ = [
    "ActionHandler",
    "ArgumentError",
    "Call",
    "Outcome",
    "OutputError",
    "StepRunner",
    "ToolAction",
    "error_info",
]


@dataclass(slots=True)
class Outcome:
    """What happened to one step."""

    status: StepStatus
    output: Any = None
    error: dict[str, Any] | None = None
    attempts: int = 0
    reason: str | None = None
    degraded: bool = False
    args: Any = None
    """The resolved arguments the action was performed with (for records and ``show --step``)."""
    history: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    """LLM token usage (``input_tokens``, ``output_tokens``, ``calls``)."""
    fatal: bool = False
    """The whole run must stop (a budget or limit was exceeded), not just this step."""


@dataclass(slots=True)
class Call:
    """Everything an action handler needs for one attempt of one step."""

    step: Step
    args: Any
    """The step's ``args`` with every reference filled (a fresh copy)."""
    ctx: StepContext
    goal: str
    """The plan's goal anchor."""
    resolve: Callable[[Any], Any]
    """Fill references in any other field of the step (``prompt``, ``condition``, ...)."""
    usage: dict[str, int] = field(default_factory=dict)
    """Handlers add token usage here."""


class ActionHandler(Protocol):
    """Performs one attempt of a step's action and returns its plain-JSON output."""

    async def __call__(self, call: Call) -> Any: ...


def error_info(exc: BaseException, *, retryable: bool | None = None) -> dict[str, Any]:
    """The ``{type, message, retryable}`` object for an exception."""
    if retryable is None:
        retryable = bool(getattr(exc, "retryable", False))
    message = exc.message if isinstance(exc, PlanrailError) else str(exc)
    return {
        "type": type(exc).__name__,
        "message": message or type(exc).__name__,
        "retryable": retryable,
    }


class ArgumentError(PlanrailError):
    """The resolved arguments do not fit the tool's input schema."""

    code = "invalid_arguments"


class OutputError(PlanrailError):
    """The tool returned something that does not fit its declared output type."""

    code = "invalid_output"


class ToolAction:
    """``tool_call``: validate the arguments against the tool's input schema and call it.

    Sync tools run in ``pool`` (a thread each); async tools run on the event loop.
    """

    def __init__(self, registry: ToolRegistry, pool: Executor | None) -> None:
        self.registry = registry
        self.pool = pool

    async def __call__(self, call: Call) -> Any:
        return await self.call_tool(
            self.registry.executable(call.step.tool or ""), call.args, call.ctx
        )

    async def call_tool(self, tool: Tool, args: Any, ctx: StepContext) -> Any:
        """Validate ``args``, call ``tool``, return its output as plain JSON data."""
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


class StepRunner:
    """Runs steps: fills arguments from real outputs, then hands the work to the action."""

    def __init__(
        self,
        handlers: Mapping[str, ActionHandler],
        goal: str = "",
        before_attempt: Callable[[Step, int | None, int, Any], None] | None = None,
    ) -> None:
        self.handlers = dict(handlers)
        self.goal = goal
        self.before_attempt = before_attempt
        """Called right before each attempt with (step, item index, attempt, resolved args)."""
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
        handler = self.handlers.get(step.action)
        if handler is None:
            return Outcome(
                StepStatus.FAILED,
                error={
                    "type": "ConfigurationError",
                    "retryable": False,
                    "message": f"no handler for action '{step.action}' in this run"
                    + (" (pass an llm= client)" if step.action == "llm_call" else ""),
                },
            )
        try:
            args = self.resolve_args(step, outputs)
        except ReferenceResolutionError as exc:
            return Outcome(StepStatus.FAILED, error=error_info(exc), reason=exc.message)
        call = Call(step, args, context(1), self.goal, functools.partial(_resolve, outputs))
        try:
            if self.before_attempt is not None:
                self.before_attempt(step, None, 1, args)
            output = await handler(call)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return Outcome(
                StepStatus.FAILED, error=error_info(exc), attempts=1, args=args, usage=call.usage
            )
        return Outcome(StepStatus.SUCCEEDED, output=output, attempts=1, args=args, usage=call.usage)


def _resolve(outputs: Mapping[str, Any], value: Any) -> Any:
    return compile_value(value)(outputs)


def _brief(exc: Exception) -> str:
    if isinstance(exc, pydantic.ValidationError):
        parts = []
        for err in exc.errors(include_url=False)[:5]:
            loc = ".".join(str(p) for p in err["loc"]) or "(input)"
            parts.append(f"{loc}: {err['msg']}")
        return "; ".join(parts)
    return str(exc)
