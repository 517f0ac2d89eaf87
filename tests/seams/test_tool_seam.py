"""The tool protocol and the tool runner: any implementation plugs into the executor."""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from typing import Any

import planrail
from planrail.engine.actions import ToolAction
from planrail.engine.runners import LocalRunner
from planrail.engine.step_runner import StepRunner
from planrail.plan.model import Step
from planrail.plan.tools import StepContext, Tool, ToolProtocol, ToolSpec


class EchoTool:
    """A tool that is not a Python function: a spec and an ``invoke`` (as an MCP tool is)."""

    def __init__(self) -> None:
        self.spec = ToolSpec(
            name="echo",
            input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
            output_schema={"type": "object", "properties": {"text": {"type": "string"}}},
            side_effects="none",
        )
        self.name = self.spec.name
        self.calls: list[tuple[dict[str, Any], StepContext]] = []

    async def invoke(self, args: Mapping[str, Any], ctx: StepContext) -> Any:
        self.calls.append((dict(args), ctx))
        return {"text": str(args["text"]).upper()}


class CountingRunner(LocalRunner):
    """A runner that counts what it was given: every Python tool call goes through it."""

    def __init__(self) -> None:
        super().__init__()
        self.prepared: list[str] = []
        self.called: list[str] = []
        self.closed = 0

    async def prepare(self, tools: Sequence[Tool]) -> None:
        self.prepared = sorted(t.name for t in tools)

    def call(self, tool: Tool, kwargs: dict[str, Any]) -> Awaitable[Any]:
        self.called.append(tool.name)
        return super().call(tool, kwargs)

    async def aclose(self) -> None:
        self.closed += 1
        await super().aclose()


@planrail.tool(side_effects="none")
def shout(text: str) -> str:
    return text + "!"


@planrail.tool(side_effects="none")
async def whisper(text: str) -> str:
    return text.lower()


PLAN = {
    "goal": "seams",
    "steps": [
        {"id": "a", "tool": "echo", "args": {"text": "hi"}},
        {"id": "b", "tool": "shout", "args": {"text": "${a.text}"}, "depends_on": ["a"]},
        {"id": "c", "tool": "whisper", "args": {"text": "${b}"}, "depends_on": ["b"]},
    ],
}


def test_a_protocol_tool_is_registered_and_called_with_the_step_context() -> None:
    """An object with ``spec`` and ``invoke`` is a tool: validated against its spec, called
    with the step's context (idempotency key included), its output flows on."""
    echo = EchoTool()
    assert isinstance(echo, ToolProtocol)
    result = planrail.run(PLAN, [echo, shout, whisper])
    assert result.status == "succeeded"
    assert result.steps["c"].output == "hi!"
    (args, ctx), *_ = echo.calls
    assert args == {"text": "hi"}
    assert (ctx.step_id, ctx.attempt, ctx.idempotency_key) == ("a", 1, f"{result.run_id}:a")


def test_every_python_tool_call_goes_through_the_given_runner() -> None:
    """The runner is prepared with the plan's Python tools, runs each of their calls, and is
    left open for its owner (the execution closes only a runner it made itself)."""
    runner = CountingRunner()
    result = planrail.run(PLAN, [EchoTool(), shout, whisper], tool_runner=runner)
    assert result.status == "succeeded"
    assert runner.prepared == ["shout", "whisper"]
    assert runner.called == ["shout", "whisper"]
    assert runner.closed == 0


class LoggedToolAction(ToolAction):
    """A subclass of the tool action, as an integration might write."""


async def test_a_tool_action_subclass_keeps_the_plain_path() -> None:
    """Subclassing ToolAction must not silently lose the short path for policy-free steps."""
    runner = StepRunner(
        {"tool_call": LoggedToolAction(planrail.ToolRegistry([shout]), LocalRunner())}
    )
    step = Step.model_validate({"id": "a", "tool": "shout", "args": {"text": "x"}})
    assert runner._plain_tool(step, runner.handlers["tool_call"]) is shout
