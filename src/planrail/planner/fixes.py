"""Fixes the planner makes to a model's plan before validation, without a model call.

Only what needs no guessing (each fix is recorded in the attempt's ``changes``):

- ``null`` step fields and ``null`` optional arguments are dropped — strict structured output
  (OpenAI's) makes a model write ``null`` for every optional field it does not use;
- a ``depends_on`` entry that names no step but is the tool of exactly one step becomes that
  step's id (small models write the tool they wait for);
- a reference ``${X.field}`` whose ``X`` names no step but is the tool of exactly one other
  step points at that step instead (the same slip, in a reference);
- a step listed in its own ``depends_on`` is taken out of it;
- any other ``depends_on`` entry that names no step, and that no reference of the step uses,
  is dropped: nothing can come from a step that does not exist.

:func:`planrail.plan.repair.repair` then does its own fixes (aliases, undeclared edges).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from planrail.errors import ReferenceSyntaxError
from planrail.plan.refs import Reference, parse_template
from planrail.plan.tools import ToolRegistry

__all__ = ["prefix_fixes", "prefix_ids"]


def prefix_ids(prefix: tuple[dict[str, Any], ...]) -> set[str]:
    """The ids of steps kept from an earlier plan (they may be depended on too)."""
    return {str(s["id"]) for s in prefix if isinstance(s, dict) and "id" in s}


def prefix_fixes(
    data: dict[str, Any], registry: ToolRegistry, known: set[str] | None = None
) -> tuple[dict[str, Any], list[str]]:
    """``data`` with the fixes above applied, and what was changed."""
    steps = data.get("steps")
    if not isinstance(steps, list):
        return data, []
    changes: list[str] = []
    out: list[Any] = []
    for i, raw in enumerate(steps):
        if not isinstance(raw, dict):
            out.append(raw)
            continue
        step = {k: v for k, v in raw.items() if v is not None}
        for key in raw.keys() - step.keys():
            changes.append(f"$.steps[{i}].{key}: dropped (null)")
        args = step.get("args")
        if isinstance(args, dict) and isinstance(step.get("tool"), str):
            spec = registry.spec(step["tool"])
            required = set(spec.input_schema.get("required", ())) if spec is not None else set()
            for name in [n for n, v in args.items() if v is None and n not in required]:
                changes.append(f"$.steps[{i}].args.{name}: dropped (null)")
            step["args"] = {n: v for n, v in args.items() if v is not None or n in required}
        out.append(step)
    ids = {s["id"] for s in out if isinstance(s, dict) and isinstance(s.get("id"), str)}
    ids |= known or set()
    tooled = [
        s
        for s in out
        if isinstance(s, dict) and isinstance(s.get("tool"), str) and isinstance(s.get("id"), str)
    ]
    by_tool = Counter(s["tool"] for s in tooled)
    owner = {s["tool"]: s["id"] for s in tooled if by_tool[s["tool"]] == 1}
    for i, step in enumerate(out):
        if isinstance(step, dict):
            out[i] = _retarget(step, i, {t: o for t, o in owner.items() if t not in ids}, changes)
    for i, step in enumerate(out):
        deps = step.get("depends_on") if isinstance(step, dict) else None
        if not isinstance(deps, list):
            continue
        text = repr({k: v for k, v in step.items() if k != "depends_on"})
        fixed: list[Any] = []
        for dep in deps:
            if dep == step.get("id"):
                changes.append(f"$.steps[{i}].depends_on: dropped '{dep}' (the step itself)")
            elif not isinstance(dep, str) or dep in ids:
                fixed.append(dep)
            elif dep in owner and owner[dep] != step.get("id"):
                fixed.append(owner[dep])
                changes.append(
                    f"$.steps[{i}].depends_on: '{dep}' is a tool; the step calling it is"
                    f" '{owner[dep]}'"
                )
            elif f"${{{dep}" not in text:
                changes.append(f"$.steps[{i}].depends_on: dropped '{dep}' (no such step)")
            else:
                fixed.append(dep)
        step["depends_on"] = list(dict.fromkeys(fixed))
    return {**data, "steps": out}, changes


_NOT_VALUES = frozenset({"id", "tool", "action", "depends_on"})


def _retarget(
    step: dict[str, Any], i: int, owner: dict[str, str], changes: list[str]
) -> dict[str, Any]:
    """``step`` with references to a tool name pointed at the one step calling that tool."""
    mine = {t: o for t, o in owner.items() if o != step.get("id")}
    if not mine:
        return step
    out = dict(step)
    for key in step.keys() - _NOT_VALUES:
        out[key] = _retarget_value(step[key], mine, f"$.steps[{i}].{key}", changes)
    return out


def _retarget_value(value: Any, owner: dict[str, str], at: str, changes: list[str]) -> Any:
    if isinstance(value, dict):
        return {k: _retarget_value(v, owner, f"{at}.{k}", changes) for k, v in value.items()}
    if isinstance(value, list):
        return [_retarget_value(v, owner, f"{at}[{n}]", changes) for n, v in enumerate(value)]
    if not isinstance(value, str) or "${" not in value:
        return value
    try:
        template = parse_template(value)
    except ReferenceSyntaxError:
        return value  # the validator reports it
    if not any(r.step in owner for r in template.references):
        return value
    pieces: list[str] = []
    for part in template.parts:
        if isinstance(part, str):
            pieces.append(part.replace("${", "$${"))
        elif part.step in owner:
            pieces.append(str(Reference(owner[part.step], part.path)))
            changes.append(
                f"{at}: '${{{part.step}...}}' names a tool; the step calling it is"
                f" '{owner[part.step]}'"
            )
        else:
            pieces.append(str(part))
    return "".join(pieces)
