"""The actions a step can perform, behind one seam: an :class:`ActionHandler` gets a :class:`Call`.

``tool_call`` is :class:`ToolAction`, ``condition_check`` is :class:`ConditionAction`; the LLM
layer provides ``llm_call``. A handler performs *one attempt*: retries, timeouts, resource
limits and fallbacks are wrapped around it by :class:`~planrail.engine.step_runner.StepRunner`.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

import pydantic
import pydantic_core

from planrail.errors import PlanrailError
from planrail.plan.model import Step
from planrail.plan.predicates import Predicate, compile_predicate
from planrail.plan.tools import StepContext, Tool, ToolRegistry

__all__ = [
    "ActionHandler",
    "ArgumentError",
    "Call",
    "ConditionAction",
    "OutputError",
    "ToolAction",
]


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
    outputs: Mapping[str, Any] = field(default_factory=dict)
    """The outputs references are resolved from (``item``/``self`` included when defined)."""


class ActionHandler(Protocol):
    """Performs one attempt of a step's action and returns its plain-JSON output."""

    async def __call__(self, call: Call) -> Any: ...


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

    async def call_tool(self, tool: Tool, args: Any, ctx: StepContext | None) -> Any:
        """Validate ``args``, call ``tool``, return its output as plain JSON data."""
        return self.finish(tool, await self.start(tool, args, ctx))

    def start(self, tool: Tool, args: Any, ctx: StepContext | None) -> Awaitable[Any]:
        """Validate ``args`` (:class:`ArgumentError`) and start the call: its awaitable."""
        try:
            kwargs = tool.validate_args(args)
        except pydantic.ValidationError as exc:
            raise ArgumentError(
                f"arguments for tool '{tool.name}' do not fit its input schema: {_brief(exc)}"
            ) from exc
        if tool.context_param is not None:
            kwargs[tool.context_param] = ctx
        if tool.is_async:
            return cast(Awaitable[Any], tool.fn(**kwargs))
        loop = asyncio.get_running_loop()
        return loop.run_in_executor(self.pool, functools.partial(tool.fn, **kwargs))

    @staticmethod
    def finish(tool: Tool, value: Any) -> Any:
        """The tool's return value as plain JSON data (:class:`OutputError` if it does not fit)."""
        try:
            return tool.dump_output(value)
        except (pydantic.ValidationError, pydantic_core.PydanticSerializationError) as exc:
            raise OutputError(
                f"tool '{tool.name}' returned a value that does not fit its return type: "
                f"{_brief(exc)}"
            ) from exc


class ConditionAction:
    """``condition_check``: evaluate the step's ``condition`` predicate; the output is a boolean."""

    def __init__(self) -> None:
        self._compiled: dict[str, tuple[Any, Predicate]] = {}

    async def __call__(self, call: Call) -> Any:
        step = call.step
        cached = self._compiled.get(step.id)
        if cached is None or cached[0] is not step.condition:
            cached = self._compiled[step.id] = (step.condition, compile_predicate(step.condition))
        return cached[1].evaluate(call.outputs)


def _brief(exc: Exception) -> str:
    if isinstance(exc, pydantic.ValidationError):
        parts = []
        for err in exc.errors(include_url=False)[:5]:
            loc = ".".join(str(p) for p in err["loc"]) or "(input)"
            parts.append(f"{loc}: {err['msg']}")
        return "; ".join(parts)
    return str(exc)
