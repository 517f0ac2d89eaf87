"""A plain ReAct loop: the model calls one tool per turn, reading the growing transcript.

The baseline planrail's plan-then-execute is measured against (``evaluate --react``). Built
like the loops agent frameworks run, and given what planrail's planner is given:

- the same client (:class:`planrail.llm.openai_client.OpenAIClient`, a fresh one per goal),
  the same model, the same catalog rendering (``compact_catalog``, one line per tool);
- the same kind of constraint: a JSON Schema sent with every request (through the same
  dialect fallback), whose answer is one tool call ``{"tool", "args"}`` — ``tool`` fixed per
  shape, ``args`` that tool's input schema — or ``{"final": "..."}``;
- every turn sends the whole transcript: the instructions, the goal, then each earlier answer
  and the tool's result (or error) as the next user message.

The loop ends with a final answer, or after ``max_turns`` model calls, or when a request no
longer fits the model's context. Tools are called in process, directly (no planrail engine).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from planrail.llm.base import LLM, Message, Usage
from planrail.llm.errors import LLMAnswerError, LLMContextLengthError
from planrail.plan.tools import Tool, ToolRegistry
from planrail.planner.compact import compact_catalog
from planrail.planner.schema import REFERENCE_PATTERN, tool_args_schema

__all__ = ["REACT_INSTRUCTIONS", "ReactResult", "react", "react_messages", "react_schema"]

REACT_INSTRUCTIONS = """\
You reach a goal by calling tools, one call per answer. Answer with JSON only:
{"tool": one tool below, "args": {its arguments}} to call a tool; you then get its result.
When the goal is reached, answer {"final": "the answer for the user"}.
Literal values come only from the goal and from results you got."""

_FORMAT = 'Answer {"tool": ..., "args": {...}} or {"final": ...}.'
_REFERENCE = {"type": "string", "pattern": REFERENCE_PATTERN}


@dataclass
class ReactResult:
    """One goal through the ReAct loop."""

    turns: int = 0
    """Model calls made."""
    usage: Usage = field(default_factory=Usage)
    seconds: float = 0.0
    final: str | None = None
    """The final answer, when the model gave one."""
    stopped: str = ""
    """Why the loop ended: ``final``, ``max_turns`` or ``context_length``."""
    calls: list[str] = field(default_factory=list)
    """The tools called, in order."""
    errors: int = 0
    """Turns whose answer was unreadable or whose call failed."""
    raws: list[str] = field(default_factory=list)


def react_schema(registry: ToolRegistry) -> dict[str, Any]:
    """One answer of the loop: a call of one tool with its typed arguments, or the final
    answer. The arguments are literal values (no ``${...}`` references: there is no plan)."""
    shapes: list[dict[str, Any]] = []
    for spec in registry:
        args = tool_args_schema(spec)
        args["properties"] = {
            name: _literal(prop) for name, prop in args.get("properties", {}).items()
        }
        shapes.append(
            {
                "type": "object",
                "properties": {"tool": {"type": "string", "enum": [spec.name]}, "args": args},
                "required": ["tool", "args"],
                "additionalProperties": False,
            }
        )
    shapes.append(
        {
            "type": "object",
            "properties": {"final": {"type": "string"}},
            "required": ["final"],
            "additionalProperties": False,
        }
    )
    return {"anyOf": shapes}


def _literal(prop: Any) -> Any:
    alts = prop.get("anyOf") if isinstance(prop, dict) else None
    if isinstance(alts, list) and len(alts) == 2 and alts[1] == _REFERENCE:
        return alts[0]
    return prop


def react_messages(goal: str, registry: ToolRegistry) -> list[Message]:
    """The first request: the instructions and the catalog, then the goal."""
    system = f"{REACT_INSTRUCTIONS}\nTools:\n{compact_catalog(registry)}"
    return [Message("system", system), Message("user", f"Goal: {goal}")]


async def react(llm: LLM, goal: str, tools: Sequence[Tool], *, max_turns: int = 6) -> ReactResult:
    """Run the loop for ``goal`` with ``tools`` (see the module docstring)."""
    registry = ToolRegistry.of(tools)
    by_name = {t.name: t for t in tools}
    schema = react_schema(registry)
    messages = react_messages(goal, registry)
    result = ReactResult()
    started = time.perf_counter()
    while result.turns < max_turns:
        result.turns += 1
        try:
            response = await llm.complete(messages, schema=schema, schema_name="action")
        except LLMContextLengthError:
            result.stopped = "context_length"
            break
        except LLMAnswerError as exc:  # an empty answer: said, as any other unusable one
            result.errors += 1
            result.usage += Usage(calls=1)  # the call was made (its tokens are not reported)
            messages.append(Message("user", f"{exc.message}. {_FORMAT}"))
            continue
        result.usage += response.usage
        result.raws.append(response.text)
        messages.append(Message("assistant", response.text))
        observation = _act(response.data, by_name, result)
        if result.final is not None:
            result.stopped = "final"
            break
        messages.append(Message("user", observation))
    else:
        result.stopped = "max_turns"
    result.seconds = time.perf_counter() - started
    return result


def _act(data: Any, tools: Mapping[str, Tool], result: ReactResult) -> str:
    """Carry out one answer; the observation to send back."""
    if data is None:  # the client could not read JSON out of the answer
        result.errors += 1
        return f"Your answer is not valid JSON. {_FORMAT}"
    if isinstance(data, dict) and isinstance(data.get("final"), str):
        result.final = data["final"]
        return ""
    name = data.get("tool") if isinstance(data, dict) else None
    tool = tools.get(name) if isinstance(name, str) else None
    if tool is None:
        result.errors += 1
        return f"Unknown tool {name!r}: use one of {', '.join(tools)}."
    result.calls.append(tool.name)
    args = data.get("args")
    try:
        kwargs = tool.call_kwargs(args if isinstance(args, dict) else {}, None)
        output = tool.output(tool.fn(**kwargs))
    except Exception as exc:  # a tool's failure is an observation, as in any ReAct loop
        result.errors += 1
        return f"Error from {tool.name}: {exc}"
    return f"Result of {tool.name}: {json.dumps(output, ensure_ascii=False)}"
