"""The first validator passes: reading the document, aliases, and each step's shape.

Reports ``parse_error``, ``duplicate_key``, ``limit_exceeded``, ``schema_error``, ``invalid_id``,
``duplicate_id``, ``invalid_action`` and ``invalid_policy``, and the ``normalized`` warnings.

A step with a malformed field is still checked for everything else: the field is left out
(recorded in :attr:`Context.skipped`, so later passes do not report what its absence implies),
an unknown action is read from the step's other fields, a bad or repeated id is still the
step's name in messages. Fixing what is reported therefore never reveals a problem that was
already there (``tests/plan/test_all_at_once.py``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pydantic

from planrail.errors import PlanLoadError
from planrail.plan import schema as js
from planrail.plan.loader import (
    PlanLimits,
    check_bounds,
    load_document,
    normalize,
    read_plan_file,
    within_bounds,
)
from planrail.plan.model import ACTIONS, Plan, Step, plain_step
from planrail.plan.validate_context import Context

__all__ = ["POLICY_FIELDS", "load_pass", "normalize_pass", "shape_pass"]

PlanSource = str | bytes | Path | Mapping[str, Any] | Plan
"""What a plan may be read from (a compiled plan is validated as its :class:`Plan`)."""

_ID_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")

POLICY_FIELDS = frozenset(
    {
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
)
"""Step fields whose malformed values are ``invalid_policy`` rather than ``schema_error``."""

# Scalar fields Pydantic would convert without a word ("5" → 5.0, 1 → True): their JSON type.
_SCALARS = {
    "timeout": "number",
    "total_timeout": "number",
    "estimated_duration": "number",
    "max_parallel": "integer",
    "requires_approval": "boolean",
}
_SCALAR_FIELDS = frozenset({*_SCALARS, "retry", "repeat"})
_NESTED_SCALARS = {
    "retry": {
        "max_attempts": "integer",
        "initial_delay": "number",
        "backoff": "number",
        "max_delay": "number",
        "jitter": "number",
    },
    "repeat": {"max_iterations": "integer"},
}


def load_pass(ctx: Context, source: PlanSource) -> None:
    """parse_error / duplicate_key / limit_exceeded: the document is readable and bounded."""
    duplicates: list[tuple[str, str]] = []
    try:
        if isinstance(source, Plan):  # built in Python: its values may not be JSON yet
            data: Any = _plan_data(source, ctx.limits)
        elif isinstance(source, Path):
            text = read_plan_file(source, ctx.limits)
            data = load_document(text, ctx.limits, fmt=_fmt(source.suffix), duplicates=duplicates)
        elif isinstance(source, str | bytes):
            data = load_document(source, ctx.limits, duplicates=duplicates)
        else:
            check_bounds(source, ctx.limits)
            data = dict(source) if isinstance(source, Mapping) else source
    except PlanLoadError as exc:
        ctx.error(exc.code, None, "$", exc.message)
        return
    for path, message in duplicates:
        ctx.error("duplicate_key", None, path, message)
    if not isinstance(data, dict):
        ctx.error(
            "parse_error",
            None,
            "$",
            f"a plan is an object with a 'steps' list, not {js.json_kind(data)}",
        )
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


def _plan_data(plan: Plan, limits: PlanLimits) -> Any:
    """``plan`` as JSON data, refused (:class:`PlanLoadError`) as a dict plan would be.

    Pydantic keeps ``args``, ``output``, ``metadata`` (every free-form field) as given, and its
    JSON dump would turn NaN into null, a set or bytes into a list or text, an int key into
    text, and fail on an arbitrary object with no place named. So the Python dump is checked,
    by the walk that checks dict plans, with the model's own tuples read as lists. Only Plan
    objects take this path: dict and text plans pay nothing for it.
    """
    try:
        data = plan.model_dump(exclude_defaults=True)
    except (ValueError, TypeError) as exc:
        raise PlanLoadError(f"the plan cannot be read as data: {exc}") from exc
    _model_lists(data)
    if within_bounds(data, limits):  # plain JSON already: what the JSON dump would give
        return data
    try:
        check_bounds(data, limits)
    except PlanLoadError:  # a tuple given in a free-form field is a list: look again
        check_bounds(_as_lists(data, limits), limits)
    try:  # str or int subclasses (enums) and tuples: as their JSON
        return plan.to_json_data()
    except (ValueError, TypeError) as exc:  # checked above; a last guard, never a traceback
        raise PlanLoadError(f"the plan cannot be written as JSON: {exc}") from exc


def _model_lists(data: dict[str, Any]) -> None:
    """Make the lists the model keeps as tuples (``steps``, ``depends_on``, ``retry_on``,
    ``stages`` and their ``steps``) lists again, in place: every dict changed is the dump's
    own, made for a model, never a value the plan was given."""
    steps = data.get("steps")
    if type(steps) is tuple:
        data["steps"] = steps = list(steps)
        for step in steps:
            if type(step) is not dict:
                continue
            if type(step.get("depends_on")) is tuple:
                step["depends_on"] = list(step["depends_on"])
            retry = step.get("retry")
            if type(retry) is dict and type(retry.get("retry_on")) is tuple:
                retry["retry_on"] = list(retry["retry_on"])
    stages = data.get("stages")
    if type(stages) is tuple:
        data["stages"] = stages = list(stages)
        for stage in stages:
            if type(stage) is dict and type(stage.get("steps")) is tuple:
                stage["steps"] = list(stage["steps"])


def _as_lists(data: Any, limits: PlanLimits) -> Any:
    """A copy of ``data`` with each tuple a list, for :func:`check_bounds`. Iterative, and no
    deeper than ``limits.max_depth`` nor past ``limits.max_nodes`` values (a container that
    holds itself ends there): what is left as it was, ``check_bounds`` refuses anyway."""
    holder = [data]
    stack: list[tuple[Any, Any, int]] = [(holder, 0, 0)]
    nodes = 0
    while stack:
        parent, key, depth = stack.pop()
        value = parent[key]
        if isinstance(value, dict):
            fresh: Any = dict(value)
            keys: Any = fresh.keys()
        elif type(value) is tuple or isinstance(value, list):
            fresh = list(value)
            keys = range(len(fresh))
        else:
            continue
        parent[key] = fresh
        nodes += len(fresh)
        if depth < limits.max_depth and nodes <= limits.max_nodes:
            stack.extend((fresh, k, depth + 1) for k in keys)
    return holder[0]


def _fmt(suffix: str) -> str | None:
    return {".json": "json", ".yaml": "yaml", ".yml": "yaml"}.get(suffix.lower())


def normalize_pass(ctx: Context) -> None:
    """Warnings (``normalized``): aliases LLMs write, rewritten to the canonical form."""
    ctx.raw, notes = normalize(ctx.raw)
    for sid, path, message in notes:
        ctx.warn("normalized", sid, path, message)


def shape_pass(ctx: Context) -> None:
    """schema_error / invalid_id / duplicate_id / invalid_action / invalid_policy per step."""
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
    known, first, where, steps = ctx.known, ctx.first, ctx.where, ctx.steps
    max_dependencies = ctx.limits.max_dependencies
    for i, raw in enumerate(ctx.raw["steps"]):
        if not isinstance(raw, dict):
            ctx.error("schema_error", None, f"$.steps[{i}]", "a step must be an object")
            continue
        sid: Any = raw.get("id")
        if not _plain_id(sid) and (not isinstance(sid, str) or not _ID_RE.match(sid)):
            ctx.error(
                "invalid_id",
                sid if isinstance(sid, str) else None,
                f"$.steps[{i}].id",
                f"step id {repr(sid)[:80]} must match ^[A-Za-z_][A-Za-z0-9_]{{0,63}}$"
                " (a letter or _, then letters, digits or _)",
            )
            if not isinstance(sid, str):
                continue  # nothing to call the step by: it is not checked further
        if sid in known:
            ctx.error(
                "duplicate_id",
                sid,
                f"$.steps[{i}].id",
                f"step id '{sid}' is already used by steps[{known[sid]}]; ids are unique",
            )
        step = plain_step(raw) or _read_step(ctx, sid, raw, i)  # the usual step built directly
        if step is None:
            continue
        if len(step.depends_on) > max_dependencies:
            ctx.error(
                "limit_exceeded",
                sid,
                f"$.steps[{i}].depends_on",
                f"{len(step.depends_on):,} dependencies; the limit is {max_dependencies:,}",
            )
            continue
        if sid not in known:
            known[sid] = i
            first[sid] = step
        where[id(step)] = i
        steps.append(step)
        if not _SCALAR_FIELDS.isdisjoint(raw):  # the usual step sets none of them
            _converted_scalars(ctx, step, raw, f"$.steps[{i}]")
        if (step.action != "tool_call" or not step.tool) and (
            not ctx.skipped or not ctx.skips(step, "action")
        ):
            _action_fields(ctx, step, i)  # (a tool_call step with a tool has nothing to check)


def _plain_id(sid: Any) -> bool:
    """Whether ``sid`` is a valid step id, by str methods (an ASCII identifier is exactly
    ``[A-Za-z_][A-Za-z0-9_]*``); ``False`` leaves it to the pattern (``_ID_RE``)."""
    return type(sid) is str and len(sid) <= 64 and sid.isascii() and sid.isidentifier()


def _read_step(ctx: Context, sid: str, raw: dict[str, Any], i: int) -> Step | None:
    """The step, with malformed fields reported and left out; None if nothing can be read."""
    if raw.get("action", "tool_call") in ACTIONS:
        try:
            return Step.model_validate(raw)
        except pydantic.ValidationError:
            pass
    at = f"$.steps[{i}]"
    left_out: set[str] = set()
    action = raw.get("action", "tool_call")
    if action not in ACTIONS:
        ctx.error(
            "invalid_action",
            sid,
            f"{at}.action",
            f"unknown action {action!r}; use one of {', '.join(ACTIONS)}",
        )
        left_out.add("action")
        raw = {**raw, "action": _inferred_action(raw)}
    try:
        step = Step.model_validate(raw)
    except pydantic.ValidationError as exc:
        for err in exc.errors(include_url=False):
            loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"])
            code = "invalid_policy" if err["loc"] and err["loc"][0] in POLICY_FIELDS else None
            ctx.error(code or "schema_error", sid, f"{at}{loc}", _pydantic_message(err))
            left_out.add(str(err["loc"][0]) if err["loc"] else "")
        if "" in left_out or "id" in left_out:
            return None
        try:
            step = Step.model_validate({k: v for k, v in raw.items() if k not in left_out})
        except pydantic.ValidationError:  # pragma: no cover - the fields left are all valid
            return None
    if left_out:
        ctx.skipped[id(step)] = frozenset(left_out)
    return step


def _inferred_action(raw: dict[str, Any]) -> str:
    """The action an unknown one most likely meant, read from the step's other fields."""
    if "tool" not in raw and "prompt" in raw:
        return "llm_call"
    if "tool" not in raw and "condition" in raw:
        return "condition_check"
    return "tool_call"


def _pydantic_message(err: Any) -> str:
    if err["type"] == "extra_forbidden":
        return f"unknown field '{err['loc'][-1]}'"
    return str(err["msg"])


def _converted_scalars(ctx: Context, step: Step, raw: dict[str, Any], at: str) -> None:
    """``normalized``: a policy scalar of another JSON type that Pydantic converted."""
    sid = step.id
    for name, wanted in _SCALARS.items():
        if name in raw and not ctx.skips(step, name):
            _converted(ctx, sid, raw[name], wanted, f"{at}.{name}")
    for name, fields in _NESTED_SCALARS.items():
        sub = raw.get(name)
        if isinstance(sub, dict) and not ctx.skips(step, name):
            for key, wanted in fields.items():
                if key in sub:
                    _converted(ctx, sid, sub[key], wanted, f"{at}.{name}.{key}")


def _converted(ctx: Context, sid: str, value: Any, wanted: str, path: str) -> None:
    actual = js.json_type(value)
    if value is None or actual == wanted or (wanted == "number" and actual == "integer"):
        return
    a = "an" if wanted == "integer" else "a"
    ctx.warn(
        "normalized", sid, path, f"{value!r} ({actual}) read as {a} {wanted}; write {a} {wanted}"
    )


def _action_fields(ctx: Context, step: Step, i: int) -> None:
    if step.action == "tool_call" and not step.tool and not ctx.skips(step, "tool"):
        ctx.error("schema_error", step.id, f"$.steps[{i}].tool", "a tool_call step needs 'tool'")
    elif step.action == "llm_call":
        if not step.prompt and not ctx.skips(step, "prompt"):
            ctx.error(
                "schema_error", step.id, f"$.steps[{i}].prompt", "an llm_call step needs 'prompt'"
            )
        if step.tool:
            ctx.error(
                "schema_error",
                step.id,
                f"$.steps[{i}].tool",
                "an llm_call step has no 'tool' (did you mean action tool_call?)",
            )
    elif step.action == "condition_check" and step.condition is None:
        ctx.error(
            "schema_error",
            step.id,
            f"$.steps[{i}].condition",
            "a condition_check step needs 'condition'",
        )
