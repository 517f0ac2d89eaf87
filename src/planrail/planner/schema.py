"""The plan schema the planner sends: generated from the catalog, tight enough that a
grammar-constrained decoder (llama.cpp, vLLM, OpenAI strict mode) can only write steps that
name a real tool with arguments of the right shape.

Each step is one of these shapes (``anyOf``), keyed by the tool:

- a tool step per tool — ``id`` → ``tool`` (an enum of exactly that tool) → ``args`` (that
  tool's input schema; every argument may also be a ``${step.field}`` reference) →
  ``depends_on``, all required in that order (constrained decoders emit required properties
  first and in order, so a model cannot close the step after ``depends_on`` without ``tool``
  and ``args``), then optional ``when`` (a branch), ``join`` and ``for_each`` (fan-out);
- an ``llm_call`` step (``id`` → ``action`` → ``prompt`` → ``depends_on``; optional
  ``output_schema``, ``when``, ``join``);
- a ``condition_check`` step (``id`` → ``action`` → ``condition`` → ``depends_on``).

Step ids follow a bounded pattern (:data:`SCHEMA_STEP_ID`); a plan has 1 to ``max_steps``
steps. What the schema does *not* say: that ``depends_on`` and references name steps written
earlier. A JSON Schema cannot tie one array element to its predecessors short of fixing the ids
in advance (``s1..sN`` with a ``depends_on`` enum per position), which costs every plan
meaningless ids and a schema that grows with the square of ``max_steps``; planrail instead lets
the validator find unknown targets and fixes the mechanical cases without a model call
(:mod:`planrail.planner.fixes`). See ``docs/local-models.md``.
"""

from __future__ import annotations

import copy
from typing import Any

from planrail.plan.model import JOIN_RULES, STEP_ID_PATTERN
from planrail.plan.tools import ToolRegistry, ToolSpec

__all__ = [
    "DEFAULT_MAX_STEPS",
    "REFERENCE_PATTERN",
    "SCHEMA_STEP_ID",
    "STAGE_SCHEMA",
    "plan_schema",
    "tool_args_schema",
]

SCHEMA_STEP_ID = r"^[a-z][a-z0-9_]{0,23}$"
"""Step ids as the schema asks for them: short, lower case (the validator accepts more)."""
REFERENCE_PATTERN = r"^[$][{][A-Za-z_][A-Za-z0-9_]*([.][A-Za-z0-9_]+)*[}]$"
"""A string that is exactly one reference (it keeps the referenced value's type). Written with
character classes, not escapes: llama.cpp's schema-to-grammar converter passes an escaped
dollar through, its grammar parser then fails, and the server process dies."""
DEFAULT_MAX_STEPS = 10
"""Most steps the schema allows in one plan (``Planner(max_steps=...)``)."""

STAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "pattern": STEP_ID_PATTERN},
        "goal": {"type": "string", "minLength": 1},
        "steps": {"type": "array", "items": {"type": "string"}},
        "confirm": {"type": "boolean"},
    },
    "required": ["id", "goal", "steps"],
    "additionalProperties": False,
}
"""One entry of a plan's ``stages`` as the planner asks for it."""


def plan_schema(
    registry: ToolRegistry, *, llm_steps: bool = True, max_steps: int = DEFAULT_MAX_STEPS
) -> dict[str, Any]:
    """The JSON Schema of a plan for ``registry``'s tools (see the module docstring)."""
    if max_steps < 1:
        raise ValueError("max_steps must be at least 1")
    step_id = {"type": "string", "pattern": SCHEMA_STEP_ID}
    depends = {"type": "array", "items": step_id, "maxItems": max(0, max_steps - 1)}
    when: dict[str, Any] = {"type": "object"}
    join = {"type": "string", "enum": list(JOIN_RULES)}
    shapes: list[dict[str, Any]] = [
        _closed(
            {
                "id": step_id,
                "tool": {"type": "string", "enum": [spec.name]},
                "args": tool_args_schema(spec),
                "depends_on": depends,
                "when": when,
                "join": join,
                "for_each": {"type": "string", "pattern": REFERENCE_PATTERN},
            },
            ["id", "tool", "args", "depends_on"],
        )
        for spec in registry
    ]
    if llm_steps:
        shapes.append(
            _closed(
                {
                    "id": step_id,
                    "action": {"type": "string", "enum": ["llm_call"]},
                    "prompt": {"type": "string"},
                    "depends_on": depends,
                    "output_schema": {"type": "object"},
                    "when": when,
                    "join": join,
                },
                ["id", "action", "prompt", "depends_on"],
            )
        )
    shapes.append(
        _closed(
            {
                "id": step_id,
                "action": {"type": "string", "enum": ["condition_check"]},
                "condition": {"type": "object"},
                "depends_on": depends,
            },
            ["id", "action", "condition", "depends_on"],
        )
    )
    return _closed(
        {
            "steps": {
                "type": "array",
                "items": {"anyOf": shapes},
                "minItems": 1,
                "maxItems": max_steps,
            },
            "goal": {"type": "string"},
            "output": {"type": "object"},
            "stages": {"type": "array", "items": STAGE_SCHEMA},
        },
        ["steps"],
    )


def _closed(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def tool_args_schema(spec: ToolSpec) -> dict[str, Any]:
    """A tool's input schema as a step's ``args``: ``$ref`` s inlined, titles and defaults
    dropped, closed, and every argument that is not a string also allowed to be a reference."""
    schema = _inline(copy.deepcopy(spec.input_schema), spec.input_schema.get("$defs", {}), 0)
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(props, dict):
        return {"type": "object", "properties": {}, "additionalProperties": False}
    out: dict[str, Any] = {}
    for name, prop in props.items():
        out[name] = prop if _is_string(prop) else {"anyOf": [prop, _REFERENCE]}
    args: dict[str, Any] = {"type": "object", "properties": out, "additionalProperties": False}
    required = [r for r in schema.get("required", ()) if r in out]
    if required:
        args["required"] = required
    return args


_REFERENCE = {"type": "string", "pattern": REFERENCE_PATTERN}
_DROP = ("title", "default", "description", "examples", "$defs")


def _inline(node: Any, defs: dict[str, Any], depth: int) -> Any:
    if isinstance(node, list):
        return [_inline(n, defs, depth) for n in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        target = defs.get(ref.removeprefix("#/$defs/"))
        if target is None or depth > 8:  # unknown or (too) recursive: any value
            return {}
        return _inline(copy.deepcopy(target), defs, depth + 1)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "properties" and isinstance(value, dict):  # names, not keywords: keep all
            out[key] = {name: _inline(v, defs, depth) for name, v in value.items()}
        elif key not in _DROP:
            out[key] = _inline(value, defs, depth)
    return out


def _is_string(prop: Any) -> bool:
    return isinstance(prop, dict) and prop.get("type") == "string" and "enum" not in prop
