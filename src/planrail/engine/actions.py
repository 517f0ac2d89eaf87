"""The actions a step can perform, behind one seam: an :class:`ActionHandler` gets a :class:`Call`.

``tool_call`` is :class:`ToolAction`, ``condition_check`` is :class:`ConditionAction`; the LLM
layer provides ``llm_call``. A handler performs *one attempt*: retries, timeouts, resource
limits and fallbacks are wrapped around it by :class:`~planrail.engine.step_runner.StepRunner`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from planrail.errors import ArgumentError, OutputError
from planrail.plan.model import Step
from planrail.plan.predicates import Predicate, compile_predicate
from planrail.plan.refs import Parse, parse_template
from planrail.plan.strict_json import odd_value
from planrail.plan.tools import StepContext, Tool, ToolProtocol, ToolRegistry, ToolRunner

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
    stage_goal: str | None = None
    """The sub-goal of the step's stage (``None`` for a step in no stage)."""
    parse: Parse = parse_template
    """The parsed form of the plan's strings (the run's compiled plan's ``template``)."""


class ActionHandler(Protocol):
    """Performs one attempt of a step's action and returns its plain-JSON output."""

    async def __call__(self, call: Call) -> Any: ...


class ToolAction:
    """``tool_call``: call the step's tool through the tool seam.

    A Python :class:`~planrail.plan.tools.Tool` is validated here and its function runs on
    ``runner`` (the tool-runner seam); any other :class:`~planrail.plan.tools.ToolProtocol`
    implementation is invoked as it is (it checks its own arguments).
    """

    def __init__(self, registry: ToolRegistry, runner: ToolRunner) -> None:
        self.registry = registry
        self.runner = runner
        self._placed: dict[str, Tool] = {}
        """Per step with its own ``compute`` or ``remote_output``: its tool placed so."""

    async def __call__(self, call: Call) -> Any:
        step = call.step
        tool = self.registry.executable(step.tool or "")
        keep = step.remote_output and bool(getattr(self.runner, "keeps_outputs", False))
        if (step.compute is not None or keep) and isinstance(tool, Tool):
            placed = self._placed.get(step.id)
            if placed is None or placed.fn is not tool.fn:
                placed = tool.placed(step.compute, remote_output=keep)
                self._placed[step.id] = placed
            tool = placed
        return await self.call_tool(tool, call.args, call.ctx)

    async def call_tool(self, tool: ToolProtocol, args: Any, ctx: StepContext) -> Any:
        """Validate ``args``, call ``tool``, return its output as plain JSON data."""
        if isinstance(tool, Tool):
            return tool.output(await self.start(tool, args, ctx))
        output = await tool.invoke(args, ctx)
        odd = odd_value(output)
        if odd is not None:
            raise OutputError(f"tool '{tool.name}' returned a value that is not strict JSON: {odd}")
        return output

    def start(self, tool: Tool, args: Any, ctx: StepContext | None) -> Awaitable[Any]:
        """Validate ``args`` (:class:`ArgumentError`) and start the call: its awaitable."""
        return self.runner.call(tool, tool.call_kwargs(args, ctx))

    @staticmethod
    def finish(tool: Tool, value: Any) -> Any:
        """The tool's return value as plain JSON data (:class:`OutputError` if it does not fit)."""
        return tool.output(value)


class ConditionAction:
    """``condition_check``: evaluate the step's ``condition`` predicate; the output is a boolean."""

    def __init__(self, parse: Parse = parse_template) -> None:
        self._compiled: dict[str, tuple[Any, Predicate]] = {}
        self._parse = parse

    async def __call__(self, call: Call) -> Any:
        step = call.step
        cached = self._compiled.get(step.id)
        if cached is None or cached[0] is not step.condition:
            predicate = compile_predicate(step.condition, self._parse)
            cached = self._compiled[step.id] = (step.condition, predicate)
        return cached[1].evaluate(call.outputs)
