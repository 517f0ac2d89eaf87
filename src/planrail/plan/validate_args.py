"""The typed passes: tools, arguments and fallback values.

Reports ``unknown_tool``, ``missing_argument``, ``unknown_argument`` and ``type_mismatch``.
Literals are checked exactly against JSON Schema: ``2.5`` is not an integer (``2.0`` is, as
JSON Schema says), ``"5"`` is not a number, ``true`` is not ``1``. A reference is checked by
the type its producer declares, and a declared ``number`` may hold an integral value.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from planrail.plan import schema as js
from planrail.plan.model import Step
from planrail.plan.refs import json_path
from planrail.plan.tools import ToolSpec
from planrail.plan.validate_context import Context, unit_output_schema

__all__ = ["arguments_pass", "tools_pass"]


def tools_pass(ctx: Context) -> None:
    """unknown_tool: every tool_call names a registered tool (and every fallback tool)."""
    names = ctx.registry.names()
    for step in ctx.steps:
        at = ctx.at(step)
        if step.action == "tool_call" and step.tool and step.tool not in ctx.registry:
            ctx.error(
                "unknown_tool",
                step.id,
                f"{at}.tool",
                f"no tool named '{step.tool}'{ctx.did_you_mean(step.tool, names)}",
            )
        if step.fallback and step.fallback.tool and step.fallback.tool not in ctx.registry:
            ctx.error(
                "unknown_tool",
                step.id,
                f"{at}.fallback.tool",
                f"no tool named '{step.fallback.tool}'"
                f"{ctx.did_you_mean(step.fallback.tool, names)}",
            )


def arguments_pass(ctx: Context) -> None:
    """missing_argument / unknown_argument / type_mismatch against each tool's input schema,
    and a fallback ``value`` against the step's output schema."""
    types_of = ctx.ref_types()
    for step in ctx.steps:
        at = ctx.at(step)
        calls: list[tuple[str | None, dict[str, Any], str]] = []
        if step.action == "tool_call" and not ctx.skips(step, "args"):
            calls.append((step.tool, step.args, f"{at}.args"))
        if step.fallback is not None and step.fallback.tool:
            calls.append((step.fallback.tool, step.fallback.args, f"{at}.fallback.args"))
        for tool_name, args, where in calls:
            spec = ctx.registry.spec(tool_name or "")
            if spec is not None:
                _check_args(ctx, step, spec, args, where, types_of)
        if step.fallback is not None and "value" in step.fallback.model_fields_set:
            _check_fallback_value(ctx, step, at, types_of)


def _check_args(
    ctx: Context,
    step: Step,
    spec: ToolSpec,
    args: dict[str, Any],
    where: str,
    types_of: Callable[[str], Any],
) -> None:
    schema = spec.input_schema
    root = schema
    props = schema.get("properties") if isinstance(schema, dict) else None
    props = props if isinstance(props, dict) else {}
    required = schema.get("required", []) if isinstance(schema, dict) else []
    extra = schema.get("additionalProperties") if isinstance(schema, dict) else None
    closed = extra is False or (bool(props) and extra is None)
    for name in required if isinstance(required, list) else []:
        if name not in args:
            ctx.error(
                "missing_argument",
                step.id,
                f"{where}.{name}",
                f"tool '{spec.name}' requires argument '{name}'"
                f"{_param_hint(props.get(name), root)}",
            )
    for name, value in args.items():
        if name not in props:
            if closed:
                ctx.error(
                    "unknown_argument",
                    step.id,
                    f"{where}.{name}",
                    f"tool '{spec.name}' has no parameter '{name}' (parameters:"
                    f" {', '.join(props) or 'none'}){ctx.did_you_mean(name, props)}",
                )
            continue
        for sub, problem in _literal_problems(ctx, value, props[name], root, types_of):
            ctx.error(
                "type_mismatch",
                step.id,
                json_path(f"{where}.{name}", tuple(sub)),
                f"argument '{name}' of tool '{spec.name}': {problem}",
            )


_SCALARS = frozenset((str, int, float, bool, type(None)))


def _literal_problems(
    ctx: Context, value: Any, schema: Any, root: Any, types_of: Callable[[str], Any]
) -> list[tuple[tuple[str | int, ...], str]]:
    """:func:`schema.check_literal` of one argument, each (parameter schema, reference text or
    non-string scalar) checked once per validation: thousands of steps pass the same reference
    to the same parameter of the same tool. A list under a plain ``array`` schema is checked item
    by item the same way (what ``check_literal`` does for it)."""
    kind = type(value)
    if kind is list and _plain_array(schema):
        items = schema["items"]
        return [
            ((i, *sub), problem)
            for i, v in enumerate(value)
            for sub, problem in _literal_problems(ctx, v, items, root, types_of)
        ]
    if kind not in _SCALARS or (kind is str and "$" not in value):
        # plain text is checked at once; remembering every distinct one would cost more memory
        # than the check costs time (a 100,000-step plan holds ~100,000 ids)
        return list(js.check_literal(value, schema, root, types_of))
    key = (id(schema), id(root), kind, repr(value) if kind is float else value)  # -0.0 != 0.0
    hit = ctx.literal_checks.get(key)
    if hit is None or hit[0] is not schema:
        problems = list(js.check_literal(value, schema, root, types_of))
        hit = ctx.literal_checks[key] = (schema, problems)
    return hit[1]


_ARRAY_ONLY = frozenset(("type", "items", "description", "title"))


def _plain_array(schema: Any) -> bool:
    """``{"type": "array", "items": {...}}`` (a description or title aside): a list fits it
    exactly when each item fits ``items``."""
    return (
        type(schema) is dict
        and schema.get("type") == "array"
        and type(schema.get("items")) is dict
        and _ARRAY_ONLY.issuperset(schema)
    )


def _check_fallback_value(
    ctx: Context, step: Step, at: str, types_of: Callable[[str], Any]
) -> None:
    assert step.fallback is not None
    # the fallback stands in for one call: one item of a fan-out, one iteration of a loop
    schema = unit_output_schema(step, ctx.registry)
    if schema is None:
        return
    root = schema if isinstance(schema, dict) else None
    value = step.fallback.value
    for sub, problem in js.check_literal(value, schema, root, types_of, target="the output"):
        ctx.error(
            "type_mismatch",
            step.id,
            json_path(f"{at}.fallback.value", tuple(sub)),
            f"the fallback value stands in for the step's output: {problem}",
        )


def _param_hint(schema: Any, root: Any) -> str:
    types = js.schema_types(schema, root) if schema is not None else None
    return f" ({'/'.join(sorted(types))})" if types else ""
