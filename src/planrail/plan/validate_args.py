"""The typed passes: tools, arguments and fallback values.

Reports ``unknown_tool``, ``missing_argument``, ``unknown_argument`` and ``type_mismatch``.
Literals are checked exactly against JSON Schema: ``2.5`` is not an integer (``2.0`` is, as
JSON Schema says), ``"5"`` is not a number, ``true`` is not ``1``. A reference is checked by
the type its producer declares, and a declared ``number`` may hold an integral value.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from planrail.plan import schema as js
from planrail.plan.model import Step
from planrail.plan.refs import json_path
from planrail.plan.tools import ToolSpec
from planrail.plan.validate_context import Context, unit_output_schema

__all__ = ["ToolArgs", "arguments_pass", "plain_fit", "tools_pass"]


def tools_pass(ctx: Context) -> None:
    """unknown_tool: every tool_call names a registered tool (and every fallback tool)."""
    names = ctx.registry.names()
    for step in ctx.steps:
        if step.action == "tool_call" and step.tool and step.tool not in ctx.registry:
            ctx.error(
                "unknown_tool",
                step.id,
                f"{ctx.at(step)}.tool",
                f"no tool named '{step.tool}'{ctx.did_you_mean(step.tool, names)}",
            )
        if step.fallback and step.fallback.tool and step.fallback.tool not in ctx.registry:
            ctx.error(
                "unknown_tool",
                step.id,
                f"{ctx.at(step)}.fallback.tool",
                f"no tool named '{step.fallback.tool}'"
                f"{ctx.did_you_mean(step.fallback.tool, names)}",
            )


def arguments_pass(ctx: Context) -> None:
    """missing_argument / unknown_argument / type_mismatch against each tool's input schema,
    and a fallback ``value`` against the step's output schema."""
    types_of = ctx.ref_types()
    infos: dict[str, ToolArgs | None] = {}  # tool name -> what its input schema says

    def check(step: Step, tool_name: str | None, args: dict[str, Any], field: str) -> None:
        name = tool_name or ""
        info = infos.get(name, _UNREAD)
        if info is _UNREAD:
            spec = ctx.registry.spec(name)
            info = infos[name] = None if spec is None else ToolArgs.of(spec)
        if info is not None:
            _check_args(ctx, step, info, args, field, types_of)

    for step in ctx.steps:
        if step.action == "tool_call" and not ctx.skips(step, "args"):
            check(step, step.tool, step.args, ".args")
        fallback = step.fallback
        if fallback is not None:
            if fallback.tool:
                check(step, fallback.tool, fallback.args, ".fallback.args")
            if "value" in fallback.model_fields_set:
                _check_fallback_value(ctx, step, ctx.at(step), types_of)


@dataclass(frozen=True, slots=True)
class ToolArgs:
    """What checking arguments against one tool's input schema reads of it, read once per
    validation (thousands of steps call the same tool)."""

    spec: ToolSpec
    schema: Any
    props: dict[str, Any]
    required: list[Any]
    closed: bool
    plain: dict[str, tuple[frozenset[type], frozenset[str] | None]]
    """Per parameter whose schema is a plain ``type`` (or a string ``enum``): the Python types
    of a scalar literal that fits it with nothing more to check, and the strings its enum
    allows (see :func:`plain_fit`)."""
    produced: dict[str, dict[Any, list[Any]]]
    """Per parameter: the problems of text holding references, by the types it produces."""

    @classmethod
    def of(cls, spec: ToolSpec) -> ToolArgs:
        schema = spec.input_schema
        is_dict = isinstance(schema, dict)
        props = schema.get("properties") if is_dict else None
        props = props if isinstance(props, dict) else {}
        required = schema.get("required", []) if is_dict else []
        extra = schema.get("additionalProperties") if is_dict else None
        plain = {}
        for name, sub in props.items():
            fit = plain_fit(sub)
            if fit is not None:
                plain[name] = fit
        return cls(
            spec,
            schema,
            props,
            required if isinstance(required, list) else [],
            extra is False or (bool(props) and extra is None),
            plain,
            {name: {} for name in props},
        )


_UNREAD: Any = object()

_PLAIN_TYPES: dict[str, frozenset[type]] = {
    "string": frozenset({str}),
    "integer": frozenset({int}),
    "number": frozenset({int, float}),
    "boolean": frozenset({bool}),
    "null": frozenset({type(None)}),
}
_ANY_SCALAR: frozenset[type] = frozenset({str, int, float, bool, type(None)})
_PLAIN_IGNORED = frozenset(("$ref", "anyOf", "oneOf", "const"))


def plain_fit(schema: Any) -> tuple[frozenset[type], frozenset[str] | None] | None:
    """For a parameter schema :func:`schema.check_literal` reads only the ``type`` (or the
    ``enum``) of: the exact Python types of a scalar literal that passes it with no problem —
    text without ``$`` under ``string``, an ``int`` under ``integer`` or ``number``, ... —
    and, with an ``enum``, the strings it lists. ``None``: not such a schema. A literal of
    another type (``2.0`` under ``integer``, ``True`` under ``number``, text with ``$``) takes
    the full check, which gives what it gives for every schema."""
    if type(schema) is not dict or not _PLAIN_IGNORED.isdisjoint(schema):
        return None
    enum = schema.get("enum")
    if "enum" in schema:
        if type(enum) is not list or not enum:
            return None
        # a string in the enum passes: it is one of the enum's values, of type string
        return frozenset(), frozenset(v for v in enum if type(v) is str)
    t = schema.get("type")
    if type(t) is not str:
        return None
    if t in ("array", "object"):
        return frozenset(), None  # no scalar fits: the full check says why
    return _PLAIN_TYPES.get(t, _ANY_SCALAR), None  # an unknown type name accepts any


def _check_args(
    ctx: Context,
    step: Step,
    info: ToolArgs,
    args: dict[str, Any],
    field: str,
    types_of: Callable[[str], Any],
) -> None:
    """The arguments ``args`` of ``step`` (at ``field``: ``.args``, ``.fallback.args``)."""
    spec = info.spec
    props = info.props
    for name in info.required:
        if name not in args:
            ctx.error(
                "missing_argument",
                step.id,
                f"{ctx.at(step)}{field}.{name}",
                f"tool '{spec.name}' requires argument '{name}'"
                f"{_param_hint(props.get(name), info.schema)}",
            )
    plain = info.plain
    for name, value in args.items():
        if name not in props:
            if info.closed:
                ctx.error(
                    "unknown_argument",
                    step.id,
                    f"{ctx.at(step)}{field}.{name}",
                    f"tool '{spec.name}' has no parameter '{name}' (parameters:"
                    f" {', '.join(props) or 'none'}){ctx.did_you_mean(name, props)}",
                )
            continue
        fit = plain.get(name)
        if fit is not None and _fits_plainly(value, fit):
            continue
        problems = _reference_problems(info, name, value, types_of)
        if problems is None:
            problems = _literal_problems(ctx, value, props[name], info.schema, types_of)
        for sub, problem in problems:
            ctx.error(
                "type_mismatch",
                step.id,
                json_path(f"{ctx.at(step)}{field}.{name}", tuple(sub)),
                f"argument '{name}' of tool '{spec.name}': {problem}",
            )


def _reference_problems(
    info: ToolArgs, name: str, value: Any, types_of: Callable[[str], Any]
) -> list[Any] | None:
    """The problems of text holding references (``None`` for any other value): what
    :func:`schema.check_literal` finds depends only on the JSON types the text produces, so
    they are found once per (parameter, types) — ``${a.body}`` and ``${b.body}`` alike."""
    if type(value) is not str or "$" not in value:
        return None
    produced = types_of(value)
    if produced is True:  # no reference after all ("$5", "$${x}"): a literal
        return None
    seen = info.produced[name]
    problems = seen.get(produced)
    if problems is None:
        problems = seen[produced] = list(
            js.check_literal(value, info.props[name], info.schema, types_of)
        )
    return problems


def _fits_plainly(value: Any, fit: tuple[frozenset[type], frozenset[str] | None]) -> bool:
    """Whether ``value`` passes its parameter's plain schema with nothing to check (``False``:
    the full check decides)."""
    kind = type(value)
    if kind is str:
        if "$" in value:
            return False
        enum = fit[1]
        return value in enum if enum is not None else str in fit[0]
    return kind in fit[0]


_SCALARS = frozenset((str, int, float, bool, type(None)))


def _literal_problems(
    ctx: Context, value: Any, schema: Any, root: Any, types_of: Callable[[str], Any]
) -> list[tuple[tuple[str | int, ...], str]]:
    """:func:`schema.check_literal` of one argument, each (parameter schema, non-string scalar)
    and (parameter schema, types a text holding references produces) checked once per
    validation: thousands of steps pass the same kind of reference to the same parameter of the
    same tool (what the check finds depends only on those types). A list under a plain
    ``array`` schema is checked item by item the same way (what ``check_literal`` does)."""
    kind = type(value)
    if kind is list and _plain_array(schema):
        items = schema["items"]
        found: list[tuple[tuple[str | int, ...], str]] = []
        for i, v in enumerate(value):
            problems = _literal_problems(ctx, v, items, root, types_of)
            if problems:
                found.extend(((i, *sub), problem) for sub, problem in problems)
        return found
    if kind not in _SCALARS or (kind is str and "$" not in value):
        # plain text is checked at once; remembering every distinct one would cost more memory
        # than the check costs time (a 100,000-step plan holds ~100,000 ids)
        return list(js.check_literal(value, schema, root, types_of))
    produced = types_of(value) if kind is str else True
    if produced is not True:  # text holding references: its problems are those of its types
        key: tuple[Any, ...] = (id(schema), id(root), produced)
    else:
        key = (id(schema), id(root), kind, repr(value) if kind is float else value)  # -0.0, 0.0
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
