"""The compact prompt: the same facts as the full one in as few tokens as a small model needs.

The catalog is one line per tool — ``name(arg: type, opt?: type) -> {field: type}  [effects]
description`` — instead of pretty-printed JSON Schemas with Pydantic ``title`` keys; the rules
are said once; one short example, with made-up tools. Repairs send only the
errors and the steps they concern, not the whole transcript. Chosen with
``Planner(prompt="compact")`` / ``planrail plan --prompt compact``, or automatically when the
model's context window is small (:data:`COMPACT_CONTEXT`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from planrail.llm.base import Message
from planrail.plan.effects import tool_effect
from planrail.plan.tools import ToolRegistry, ToolSpec
from planrail.plan.validate import Issue

__all__ = [
    "COMPACT_CONTEXT",
    "COMPACT_INSTRUCTIONS",
    "compact_catalog",
    "compact_messages",
    "compact_repair_message",
    "type_text",
]

COMPACT_CONTEXT = 16_384
"""``prompt="auto"`` picks the compact prompt for a model whose context is at most this."""

COMPACT_INSTRUCTIONS = """\
Write a plan as JSON for a program to run: {"steps": [step, ...]}.
A step: {"id": short lower-case name, "tool": one tool below, "args": {its arguments},
"depends_on": [ids of the steps it needs]}.
Pass an earlier step's output as an argument with "${id.field}" (and put that id in
depends_on). Literal values come only from the goal. Use only the tools and fields below."""

_LLM_RULE = (
    'To have a model write text: {"id", "action": "llm_call", "prompt": "...", "depends_on"}.'
)


def type_text(schema: Any) -> str:
    """A JSON Schema as a short type: ``string``, ``integer[]``, ``{a: string}``, ``a|b``."""
    if not isinstance(schema, dict):
        return "any"
    if "enum" in schema:
        return "|".join(json.dumps(v) for v in schema["enum"][:6])
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            parts = [type_text(s) for s in schema[key] if s.get("type") != "null"]
            return "|".join(dict.fromkeys(parts)) or "null"
    kind = schema.get("type")
    if kind == "array":
        return f"{type_text(schema.get('items'))}[]"
    if kind == "object" or isinstance(schema.get("properties"), dict):
        props = schema.get("properties") or {}
        if not props:
            return "object"
        return "{" + ", ".join(f"{k}: {type_text(v)}" for k, v in props.items()) + "}"
    if isinstance(kind, list):
        return "|".join(str(k) for k in kind if k != "null")
    return str(kind) if kind else "any"


def _resolve(schema: Any, root: Mapping[str, Any]) -> Any:
    ref = schema.get("$ref") if isinstance(schema, dict) else None
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return root.get("$defs", {}).get(ref.removeprefix("#/$defs/"), {})
    return schema


def _args(spec: ToolSpec) -> str:
    schema = spec.input_schema
    props = schema.get("properties") or {}
    required = set(schema.get("required", ()))
    return ", ".join(
        f"{name}{'' if name in required else '?'}: {type_text(_resolve(p, schema))}"
        for name, p in props.items()
    )


def _output(spec: ToolSpec) -> str:
    schema = spec.output_schema
    if not isinstance(schema, dict) or not schema:
        return "any"
    props = schema.get("properties")
    if isinstance(props, dict):
        return (
            "{"
            + ", ".join(f"{k}: {type_text(_resolve(v, schema))}" for k, v in props.items())
            + "}"
        )
    return type_text(schema)


def _line(spec: ToolSpec) -> str:
    effects = f" [{spec.side_effects}]" if tool_effect(spec).changes_world else ""
    description = " ".join((spec.description or "").split())
    if len(description) > 120:
        description = description[:119] + "…"
    return f"{spec.name}({_args(spec)}) -> {_output(spec)}{effects} {description}".rstrip()


def compact_catalog(registry: ToolRegistry) -> str:
    """One line per tool: name, arguments (``?``: optional), output fields, effects, summary."""
    return "\n".join(_line(spec) for spec in registry)


_EXAMPLE = json.dumps(
    {
        "steps": [
            {"id": "user", "tool": "find_user", "args": {"name": "Ann"}, "depends_on": []},
            {
                "id": "note",
                "tool": "send_note",
                "args": {"to": "${user.email}", "text": "hi"},
                "depends_on": ["user"],
            },
        ]
    }
)
"""The one example: its tools are made up (a catalog's own tools in the example were copied
verbatim by small models, whatever the goal), so it shows the shape and nothing to copy."""


def compact_messages(goal: str, registry: ToolRegistry, *, llm_steps: bool = True) -> list[Message]:
    """The first request in compact form: rules, one line per tool, one example, the goal."""
    parts = [COMPACT_INSTRUCTIONS]
    if llm_steps:
        parts.append(_LLM_RULE)
    parts.append(f"Tools:\n{compact_catalog(registry)}")
    parts.append(f"Example with made-up tools (use only the tools above): {_EXAMPLE}")
    parts.append("Answer with the JSON only.")
    return [Message("system", "\n".join(parts)), Message("user", f"Goal: {goal}")]


def compact_repair_message(
    issues: Sequence[Issue], changes: Sequence[str], repaired: Mapping[str, Any] | None
) -> Message:
    """A repair in few tokens: the errors, and only the steps they name (not the whole plan,
    which small models copy back unchanged)."""
    lines = ["Your plan has errors:"]
    lines.extend(f"- {i.step or 'plan'}: {i.message} [{i.code}]" for i in issues)
    named = {i.step for i in issues if i.step}
    steps = repaired.get("steps") if isinstance(repaired, Mapping) else None
    if named and isinstance(steps, list):
        shown = [s for s in steps if isinstance(s, dict) and s.get("id") in named]
        if shown:
            lines.append("The steps concerned:")
            lines.extend(json.dumps(s, ensure_ascii=False) for s in shown)
    if changes:
        lines.append(f"Already fixed: {'; '.join(changes)}")
    lines.append("Answer with the whole corrected plan as JSON only.")
    return Message("user", "\n".join(lines))
