"""The validator: named passes over a plan, reporting every problem at once with a stable code.

Each pass reads the shared :class:`_Ctx` and appends :class:`Issue` s; later passes skip what
earlier ones found broken (a step whose shape is wrong is not type-checked). Every pass is
linear in the size of the plan.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pydantic

from planrail._memory import collector_paused
from planrail.errors import PlanLoadError, PlanValidationError, ReferenceSyntaxError
from planrail.plan import schema as js
from planrail.plan.duplicates import duplicate_calls_pass
from planrail.plan.graph import cycles
from planrail.plan.loader import PlanLimits, load_document, normalize, read_plan_file
from planrail.plan.model import ACTIONS, Plan, Step
from planrail.plan.refs import (
    Reference,
    Template,
    iter_strings_with_dollar,
    json_path,
    parse_reference,
    parse_template,
)
from planrail.plan.stages import STAGE_CODES, stages_pass
from planrail.plan.tools import AnyTool, ToolRegistry, ToolSpec
from planrail.plan.validate_policies import policies_pass

__all__ = ["CODES", "Issue", "ValidationReport", "load_plan", "validate"]

CODES = (
    "parse_error",
    "schema_error",
    "invalid_id",
    "duplicate_id",
    "unknown_dependency",
    "self_dependency",
    "cycle",
    "invalid_reference",
    "unknown_step_reference",
    "undeclared_dependency",
    "unknown_tool",
    "invalid_action",
    "missing_argument",
    "unknown_argument",
    "unknown_output_field",
    "type_mismatch",
    "limit_exceeded",
    "invalid_policy",
    "invalid_predicate",
    *STAGE_CODES,
)
"""Stable error codes. More may be added; none is ever renamed."""

_ID_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")

_SUGGESTION_BUDGET = 20_000
"""Most names compared for "did you mean" hints in one validation (difflib is not linear)."""


@dataclass(frozen=True, slots=True)
class Issue:
    """One problem: a stable ``code``, the ``step`` it is in, a ``path`` to the field, a message."""

    code: str
    step: str | None
    path: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "step": self.step, "path": self.path, "message": self.message}

    def __str__(self) -> str:
        where = f"step '{self.step}'" if self.step else "plan"
        return f"[{self.code}] {where} at {self.path}: {self.message}"


@dataclass
class ValidationReport:
    """The outcome of :func:`validate`. ``plan`` is set exactly when ``valid`` is true."""

    errors: list[Issue] = field(default_factory=list)
    warnings: list[Issue] = field(default_factory=list)
    plan: Plan | None = None

    @property
    def valid(self) -> bool:
        return not self.errors

    def to_dict(self) -> dict[str, Any]:
        """The ``validate --json`` object: ``{valid, errors, warnings}``."""
        return {
            "valid": self.valid,
            "errors": [i.to_dict() for i in self.errors],
            "warnings": [i.to_dict() for i in self.warnings],
        }

    def raise_for_errors(self) -> Plan:
        if self.plan is None:
            raise PlanValidationError(self.errors)
        return self.plan


@dataclass
class _Ctx:
    registry: ToolRegistry
    limits: PlanLimits
    errors: list[Issue] = field(default_factory=list)
    warnings: list[Issue] = field(default_factory=list)
    raw: Any = None
    steps: list[Step] = field(default_factory=list)
    """Steps whose shape is valid."""
    broken: set[str] = field(default_factory=set)
    """Ids of steps with shape errors (known to exist, but not checked further)."""
    known: dict[str, int] = field(default_factory=dict)
    """Every step id seen, with its first index."""
    refs: dict[str, list[tuple[str, Reference]]] = field(default_factory=dict)
    """Per step: (path, reference) for every well-formed reference it holds."""
    templates: dict[str, Template] = field(default_factory=dict)
    """Parsed strings, so each is parsed once."""
    output_refs: list[tuple[str, Reference]] = field(default_factory=list)
    suggestion_budget: int = _SUGGESTION_BUDGET

    def error(self, code: str, step: str | None, path: str, message: str) -> None:
        self.errors.append(Issue(code, step, path, message))

    def warn(self, code: str, step: str | None, path: str, message: str) -> None:
        self.warnings.append(Issue(code, step, path, message))

    def template(self, s: str) -> Template:
        t = self.templates.get(s)
        if t is None:
            t = self.templates[s] = parse_template(s)
        return t


PlanSource = str | bytes | Path | Mapping[str, Any] | Plan


def validate(
    source: PlanSource,
    tools: ToolRegistry | Iterable[AnyTool] | None = None,
    *,
    limits: PlanLimits | None = None,
    check_tools: bool = True,
) -> ValidationReport:
    """Check a plan statically and report every problem found.

    ``source`` is plan text (JSON or YAML), a path, a dict or a :class:`Plan`. Without ``tools``
    (or with ``check_tools=False``) tool names, arguments and output fields are not checked.
    """
    ctx = _Ctx(ToolRegistry.of(tools), limits or PlanLimits())
    # Validating a big plan allocates millions of objects that live until it ends; the cyclic
    # collector's full passes over them grew the time faster than the plan (15.5x per 10x steps
    # at 100,000, against 12.1x with the collector paused). Nothing here makes reference
    # cycles, so the collector is paused while the passes run.
    with collector_paused():
        _load(ctx, source)
        if ctx.raw is not None:  # could not load: nothing else to check
            with_tools = check_tools and tools is not None
            for pass_ in _PASSES:
                if with_tools or pass_ not in _TOOL_PASSES:
                    pass_(ctx)
    report = ValidationReport(ctx.errors, ctx.warnings)
    if not ctx.errors:
        report.plan = Plan.model_validate(
            {**{k: v for k, v in ctx.raw.items() if k != "steps"}, "steps": ctx.steps}
        )
    return report


def load_plan(
    source: PlanSource,
    tools: ToolRegistry | Iterable[AnyTool] | None = None,
    *,
    limits: PlanLimits | None = None,
) -> Plan:
    """Load and validate a plan; :class:`PlanValidationError` (with every issue) if invalid."""
    return validate(source, tools, limits=limits).raise_for_errors()


# ---------------------------------------------------------------- passes


def _load(ctx: _Ctx, source: PlanSource) -> None:
    """parse_error / limit_exceeded: the document is readable, bounded and plan-shaped."""
    try:
        if isinstance(source, Plan):
            data: Any = source.to_json_data()
        elif isinstance(source, Path):
            data = load_document(
                read_plan_file(source, ctx.limits), ctx.limits, fmt=_fmt(source.suffix)
            )
        elif isinstance(source, str | bytes):
            data = load_document(source, ctx.limits)
        else:
            data = load_document_from_mapping(source, ctx.limits)
    except PlanLoadError as exc:
        ctx.error(exc.code, None, "$", exc.message)
        return
    if not isinstance(data, dict):
        ctx.error("parse_error", None, "$", "a plan is an object with a 'steps' list")
        return
    steps = data.get("steps")
    if not isinstance(steps, list):
        ctx.error("schema_error", None, "$.steps", "a plan needs 'steps': a list of steps")
        return
    if len(steps) > ctx.limits.max_steps:
        ctx.error(
            "limit_exceeded",
            None,
            "$.steps",
            f"{len(steps):,} steps; the limit is {ctx.limits.max_steps:,} (PlanLimits.max_steps)",
        )
        return
    ctx.raw = data


def _fmt(suffix: str) -> str | None:
    return {".json": "json", ".yaml": "yaml", ".yml": "yaml"}.get(suffix.lower())


def load_document_from_mapping(source: Mapping[str, Any], limits: PlanLimits) -> Any:
    from planrail.plan.loader import check_bounds

    check_bounds(source, limits)
    return dict(source)


def _normalize(ctx: _Ctx) -> None:
    """Warnings (``normalized``): aliases LLMs write, rewritten to the canonical form."""
    ctx.raw, notes = normalize(ctx.raw)
    for sid, path, message in notes:
        ctx.warn("normalized", sid, path, message)


def _shape(ctx: _Ctx) -> None:
    """schema_error / invalid_id / duplicate_id / invalid_action: each step's fields."""
    allowed = {"goal", "steps", "output", "metadata", "stages"}
    for key in ctx.raw:
        if key not in allowed:
            ctx.error(
                "schema_error",
                None,
                f"$.{key}",
                f"unknown plan field '{key}' (allowed: {', '.join(sorted(allowed))})",
            )
    if "goal" in ctx.raw and not isinstance(ctx.raw["goal"], str):
        ctx.error("schema_error", None, "$.goal", "'goal' must be a string")
    if not isinstance(ctx.raw.get("metadata", {}), dict):
        ctx.error("schema_error", None, "$.metadata", "'metadata' must be an object")
    for i, raw in enumerate(ctx.raw["steps"]):
        at = f"$.steps[{i}]"
        if not isinstance(raw, dict):
            ctx.error("schema_error", None, at, "a step must be an object")
            continue
        sid = raw.get("id")
        if not isinstance(sid, str) or not _ID_RE.match(sid):
            shown = repr(sid)[:80]
            ctx.error(
                "invalid_id",
                sid if isinstance(sid, str) else None,
                f"{at}.id",
                f"step id {shown} must match ^[A-Za-z_][A-Za-z0-9_]{{0,63}}$"
                " (a letter or _, then letters, digits or _)",
            )
            continue
        if sid in ctx.known:
            ctx.error(
                "duplicate_id",
                sid,
                f"{at}.id",
                f"step id '{sid}' is already used by steps[{ctx.known[sid]}]; ids are unique",
            )
            continue
        ctx.known[sid] = i
        action = raw.get("action", "tool_call")
        if action not in ACTIONS:
            ctx.error(
                "invalid_action",
                sid,
                f"{at}.action",
                f"unknown action {action!r}; use one of {', '.join(ACTIONS)}",
            )
            ctx.broken.add(sid)
            continue
        try:
            step = Step.model_validate(raw)
        except pydantic.ValidationError as exc:
            ctx.broken.add(sid)
            for err in exc.errors(include_url=False):
                loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"])
                code = (
                    "invalid_policy"
                    if err["loc"] and err["loc"][0] in _POLICY_FIELDS
                    else ("schema_error")
                )
                ctx.error(code, sid, f"{at}{loc}", _pydantic_message(err))
            continue
        if len(step.depends_on) > ctx.limits.max_dependencies:
            ctx.error(
                "limit_exceeded",
                sid,
                f"{at}.depends_on",
                f"{len(step.depends_on):,} dependencies; the limit is"
                f" {ctx.limits.max_dependencies:,}",
            )
            ctx.broken.add(sid)
            continue
        _action_fields(ctx, step, at)
        ctx.steps.append(step)


_POLICY_FIELDS = {
    "retry",
    "timeout",
    "total_timeout",
    "fallback",
    "repeat",
    "max_parallel",
    "join",
    "estimated_duration",
    "compute",
}


def _pydantic_message(err: Any) -> str:
    if err["type"] == "extra_forbidden":
        return f"unknown field '{err['loc'][-1]}'"
    return str(err["msg"])


def _action_fields(ctx: _Ctx, step: Step, at: str) -> None:
    if step.action == "tool_call" and not step.tool:
        ctx.error("schema_error", step.id, f"{at}.tool", "a tool_call step needs 'tool'")
    elif step.action == "llm_call":
        if not step.prompt:
            ctx.error("schema_error", step.id, f"{at}.prompt", "an llm_call step needs 'prompt'")
        if step.tool:
            ctx.error(
                "schema_error",
                step.id,
                f"{at}.tool",
                "an llm_call step has no 'tool' (did you mean action tool_call?)",
            )
    elif step.action == "condition_check" and step.condition is None:
        ctx.error(
            "schema_error",
            step.id,
            f"{at}.condition",
            "a condition_check step needs 'condition'",
        )


def _dependencies(ctx: _Ctx) -> None:
    """unknown_dependency / self_dependency: every ``depends_on`` entry names another step."""
    for step in ctx.steps:
        at = _at(ctx, step)
        seen: set[str] = set()
        for j, dep in enumerate(step.depends_on):
            if dep == step.id:
                ctx.error(
                    "self_dependency",
                    step.id,
                    f"{at}.depends_on[{j}]",
                    f"step '{step.id}' depends on itself; remove it from depends_on",
                )
            elif dep not in ctx.known:
                ctx.error(
                    "unknown_dependency",
                    step.id,
                    f"{at}.depends_on[{j}]",
                    f"depends on '{dep}', which is not a step of this plan"
                    f"{_did_you_mean(ctx, dep, ctx.known)}",
                )
            elif dep in seen:
                ctx.warn(
                    "duplicate_dependency",
                    step.id,
                    f"{at}.depends_on[{j}]",
                    f"'{dep}' is listed twice",
                )
            seen.add(dep)


def _at(ctx: _Ctx, step: Step) -> str:
    return f"$.steps[{ctx.known[step.id]}]"


def _step_strings(step: Step) -> Iterable[tuple[str, Any]]:
    """The fields of a step that may hold references, with their paths."""
    yield "args", step.args
    if step.prompt is not None:
        yield "prompt", step.prompt
    if step.condition is not None:
        yield "condition", step.condition
    if step.when is not None:
        yield "when", step.when
    if step.for_each is not None:
        yield "for_each", step.for_each
    if step.fallback is not None:
        yield "fallback.args", step.fallback.args
        if "value" in step.fallback.model_fields_set:
            yield "fallback.value", step.fallback.value
    if step.repeat is not None:
        yield "repeat.until", step.repeat.until


def _walk_strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    for segments, text in iter_strings_with_dollar(value):
        yield json_path(path, segments), text


# Names a step may reference besides other steps: the current for_each item / repeat output.
_LOCAL_NAMES = {"item": "for_each", "self": "repeat"}


def _references(ctx: _Ctx) -> None:
    """invalid_reference / unknown_step_reference / self_dependency / undeclared_dependency."""
    for step in ctx.steps:
        at = _at(ctx, step)
        found: list[tuple[str, Reference]] = []
        declared = set(step.depends_on)
        for field_path, value in _step_strings(step):
            for path, s in _walk_strings(value, f"{at}.{field_path}"):
                try:
                    t = ctx.template(s)
                except ReferenceSyntaxError as exc:
                    ctx.error("invalid_reference", step.id, path, exc.message)
                    continue
                for ref in t.references:
                    local = _LOCAL_NAMES.get(ref.step)
                    if local is not None and ref.step not in ctx.known:
                        if not _local_allowed(step, local, field_path):
                            ctx.error(
                                "invalid_reference",
                                step.id,
                                path,
                                f"{ref} is only defined inside a step with '{local}'",
                            )
                        continue
                    if ref.step == step.id:
                        ctx.error(
                            "self_dependency",
                            step.id,
                            path,
                            f"{ref} references this step's own output, which does not"
                            " exist yet; reference an earlier step",
                        )
                    elif ref.step not in ctx.known:
                        ctx.error(
                            "unknown_step_reference",
                            step.id,
                            path,
                            f"{ref} references '{ref.step}', which is not a step of this"
                            f" plan{_did_you_mean(ctx, ref.step, ctx.known)}",
                        )
                    else:
                        if ref.step not in declared:
                            ctx.error(
                                "undeclared_dependency",
                                step.id,
                                path,
                                f"{ref} uses the output of '{ref.step}' but '{ref.step}'"
                                f" is not in depends_on; add it to depends_on",
                            )
                            declared.add(ref.step)  # report each missing edge once
                        found.append((path, ref))
        ctx.refs[step.id] = found
    output = ctx.raw.get("output")
    if output is not None:
        for path, s in _walk_strings(output, "$.output"):
            try:
                t = ctx.template(s)
            except ReferenceSyntaxError as exc:
                ctx.error("invalid_reference", None, path, exc.message)
                continue
            for ref in t.references:
                if ref.step not in ctx.known:
                    ctx.error(
                        "unknown_step_reference",
                        None,
                        path,
                        f"{ref} references '{ref.step}', which is not a step of this plan"
                        f"{_did_you_mean(ctx, ref.step, ctx.known)}",
                    )
                else:
                    ctx.output_refs.append((path, ref))


def _local_allowed(step: Step, local: str, field_path: str) -> bool:
    if local == "for_each":
        return step.for_each is not None and field_path != "for_each"
    return step.repeat is not None


def _cycles(ctx: _Ctx) -> None:
    """cycle: no step may (transitively) depend on itself, by depends_on or by reference."""
    known = ctx.known
    deps: dict[str, list[str]] = {sid: [] for sid in known}
    # While every edge leads to a step listed earlier, the plan's order is a topological order
    # and there is no cycle: plans are nearly always written so, and the search is skipped.
    backward = True
    for step in ctx.steps:
        sid = step.id
        edges = deps[sid]
        edges.extend(d for d in step.depends_on if d in known and d != sid)
        edges.extend(r.step for _, r in ctx.refs.get(sid, ()) if r.step != sid)
        if backward:
            here = known[sid]
            backward = all(known.get(d, -1) < here for d in edges)
    if backward:
        return
    for members in cycles(deps):
        loop = " -> ".join([*members, members[0]])
        first = members[0]
        ctx.error(
            "cycle",
            first,
            f"$.steps[{ctx.known[first]}].depends_on",
            f"steps {', '.join(members)} form a cycle ({loop} by depends_on/references);"
            " remove one of these dependencies",
        )


def _tools(ctx: _Ctx) -> None:
    """unknown_tool: every tool_call names a registered tool (and every fallback tool)."""
    names = ctx.registry.names()
    for step in ctx.steps:
        at = _at(ctx, step)
        if step.action == "tool_call" and step.tool and step.tool not in ctx.registry:
            ctx.error(
                "unknown_tool",
                step.id,
                f"{at}.tool",
                f"no tool named '{step.tool}'{_did_you_mean(ctx, step.tool, names)}",
            )
        if step.fallback and step.fallback.tool and step.fallback.tool not in ctx.registry:
            ctx.error(
                "unknown_tool",
                step.id,
                f"{at}.fallback.tool",
                f"no tool named '{step.fallback.tool}'"
                f"{_did_you_mean(ctx, step.fallback.tool, names)}",
            )


def output_schema_of(step: Step, registry: ToolRegistry) -> Any:
    """The JSON Schema of what a step produces, or ``None`` when its shape is unknown."""
    if step.action == "condition_check":
        schema: Any = {"type": "boolean"}
    elif step.action == "llm_call":
        schema = step.output_schema if step.output_schema is not None else {"type": "string"}
    else:
        spec = registry.spec(step.tool or "")
        if spec is None or spec.output_schema is None:
            return None
        schema = spec.output_schema
    if step.for_each is not None:
        schema = {"type": "array", "items": schema, **_defs(schema)}
    return schema


def _defs(schema: Any) -> dict[str, Any]:
    if isinstance(schema, dict):
        return {k: schema[k] for k in ("$defs", "definitions") if k in schema}
    return {}


def _output_fields(ctx: _Ctx) -> None:
    """unknown_output_field: every reference path exists in the producer's output schema."""
    by_id = {s.id: s for s in ctx.steps}
    unchecked_warned: set[str] = set()
    all_refs: list[tuple[str | None, str, Reference]] = [
        (sid, p, r) for sid, refs in ctx.refs.items() for p, r in refs
    ]
    all_refs.extend((None, p, r) for p, r in ctx.output_refs)
    for sid, path, ref in all_refs:
        producer = by_id.get(ref.step)
        if producer is None:
            continue
        schema = output_schema_of(producer, ctx.registry)
        if schema is None:
            if producer.tool in ctx.registry and ref.path and ref.step not in unchecked_warned:
                unchecked_warned.add(ref.step)
                ctx.warn(
                    "unchecked_reference",
                    sid,
                    path,
                    f"tool '{producer.tool}' declares no output schema, so field references"
                    f" into '{ref.step}' (such as {ref}) are not checked",
                )
            continue
        problem = _walk_schema(schema, ref)
        if problem:
            ctx.error("unknown_output_field", sid, path, problem)


def _walk_schema(schema: Any, ref: Reference) -> str | None:
    root = schema if isinstance(schema, dict) else None
    current = schema
    for depth, seg in enumerate(ref.path):
        status, sub = js.child_schema(current, root, seg)
        if status == "unknown":
            return None
        if status == "missing":
            where = Reference(ref.step, ref.path[:depth])
            return f"{ref}: the output of {where} has no field {seg!r} ({sub})"
        current = sub
    return None


def _ref_types(ctx: _Ctx, by_id: Mapping[str, Step]) -> Callable[[str], Any]:
    def types_of(s: str) -> Any:
        if "$" not in s:
            return True
        try:
            t = ctx.template(s)
        except ReferenceSyntaxError:
            return False
        if not t.references:
            return True
        ref = t.single
        if ref is None:
            return frozenset({"string"})
        producer = by_id.get(ref.step)
        if producer is None:
            return False
        schema = output_schema_of(producer, ctx.registry)
        if schema is None:
            return False
        root = schema if isinstance(schema, dict) else None
        current = schema
        for seg in ref.path:
            status, current = js.child_schema(current, root, seg)
            if status != "ok":
                return False
        return js.schema_types(current, root)

    return types_of


def _arguments(ctx: _Ctx) -> None:
    """missing_argument / unknown_argument / type_mismatch against each tool's input schema."""
    by_id = {s.id: s for s in ctx.steps}
    types_of = _ref_types(ctx, by_id)
    for step in ctx.steps:
        at = _at(ctx, step)
        calls: list[tuple[str | None, dict[str, Any], str]] = []
        if step.action == "tool_call":
            calls.append((step.tool, step.args, f"{at}.args"))
        if step.fallback is not None and step.fallback.tool:
            calls.append((step.fallback.tool, step.fallback.args, f"{at}.fallback.args"))
        for tool_name, args, where in calls:
            spec = ctx.registry.spec(tool_name or "")
            if spec is not None:
                _check_args(ctx, step, spec, args, where, types_of)


def _check_args(
    ctx: _Ctx,
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
                    f" {', '.join(props) or 'none'}){_did_you_mean(ctx, name, props)}",
                )
            continue
        for sub, problem in js.check_literal(value, props[name], root, types_of):
            ctx.error(
                "type_mismatch",
                step.id,
                json_path(f"{where}.{name}", tuple(sub)),
                f"argument '{name}' of tool '{spec.name}': {problem}",
            )


def _param_hint(schema: Any, root: Any) -> str:
    types = js.schema_types(schema, root) if schema is not None else None
    return f" ({'/'.join(sorted(types))})" if types else ""


def _did_you_mean(ctx: _Ctx, name: str, candidates: Collection[str]) -> str:
    # Each hint compares ``name`` with every candidate; a shared budget keeps a plan with
    # thousands of misspellings linear (later issues simply get no hint).
    if len(candidates) > ctx.suggestion_budget:
        return ""
    ctx.suggestion_budget -= len(candidates)
    match = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.75)
    return f"; did you mean '{match[0]}'?" if match else ""


def _warnings(ctx: _Ctx) -> None:
    """Warnings for what is allowed but suspicious."""
    if not ctx.raw["steps"]:
        ctx.warn("empty_plan", None, "$.steps", "the plan has no steps")


_PASSES: list[Callable[[_Ctx], None]] = [
    _normalize,
    _shape,
    _dependencies,
    _references,
    _cycles,
    _tools,
    _output_fields,
    _arguments,
    _warnings,
    policies_pass,
    stages_pass,
    duplicate_calls_pass,
]
_TOOL_PASSES = {_tools, _output_fields, _arguments}


def is_reference(s: str) -> bool:
    """Whether ``s`` is exactly one well-formed reference."""
    try:
        parse_reference(s)
    except ReferenceSyntaxError:
        return False
    return True
