"""Mechanical plan repair: what can be fixed without guessing, fixed and reported.

:func:`repair` rewrites the aliases LLMs commonly write (``dependencies`` → ``depends_on``,
``call_tool`` → ``tool_call``, ...) and adds the ``depends_on`` edges that a step's own
references prove it needs — ``${fetch.body}`` in a step's args means it depends on ``fetch``.
It never adds an edge for a self reference, for a reference to a step that does not exist, or
when the edge would close a cycle of ``depends_on`` edges; those are left for the plan's author
(a person, or the LLM in a planner's repair loop) and listed in ``skipped``. Everything it
changes is listed in ``changes``, and the result is validated again.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from planrail.errors import PlanLoadError, ReferenceSyntaxError
from planrail.plan.compiled import LOCAL_NAMES
from planrail.plan.graph import cycles
from planrail.plan.loader import (
    PlanLimits,
    check_bounds,
    load_document,
    normalize,
    read_plan_file,
)
from planrail.plan.model import Plan
from planrail.plan.refs import Reference, iter_strings_with_dollar, json_path, parse_template
from planrail.plan.resolve import copy_json
from planrail.plan.tools import AnyTool, ToolRegistry
from planrail.plan.validate import ValidationOptions, ValidationReport, check_plan

__all__ = ["RepairResult", "repair"]


@dataclass
class RepairResult:
    """What :func:`repair` produced."""

    plan_data: dict[str, Any]
    """The repaired plan as plain JSON data (``{}`` when the source could not be read at all)."""
    changes: list[str]
    """One human-readable line per change, in the order they were made."""
    report: ValidationReport
    """The repaired plan, validated again."""
    skipped: list[str] = field(default_factory=list)
    """Missing edges deliberately not added (self references, cycles), with the reason."""

    @property
    def valid(self) -> bool:
        return self.report.valid


def repair(
    source: str | bytes | Path | Mapping[str, Any] | Plan,
    tools: ToolRegistry | Iterable[AnyTool] | None = None,
    *,
    limits: PlanLimits | None = None,
    options: ValidationOptions | None = None,
) -> RepairResult:
    """Normalise aliases and add the ``depends_on`` edges a plan's references imply.

    ``source`` is anything :func:`~planrail.plan.validate.validate` accepts; it is never
    modified. A source that cannot be read is returned unrepaired with its validation report.
    The report is :func:`~planrail.plan.validate.check_plan`'s with ``options`` (those of the
    run the plan is for: a strict policy's placeholders are errors to repair).
    """
    limits = limits or PlanLimits()
    try:
        data = _read(source, limits)
    except PlanLoadError:
        return RepairResult({}, [], check_plan(source, tools, limits=limits, options=options))
    if not isinstance(data, dict):
        return RepairResult({}, [], check_plan(source, tools, limits=limits, options=options))
    data, notes = normalize(data)
    changes = [f"{path}: {message}" for _, path, message in notes]
    skipped: list[str] = []
    if isinstance(data.get("steps"), list):
        _add_missing_edges(data["steps"], changes, skipped)
    report = check_plan(data, tools, limits=limits, options=options)
    return RepairResult(data, changes, report, skipped)


def _read(source: str | bytes | Path | Mapping[str, Any] | Plan, limits: PlanLimits) -> Any:
    """The source as a fresh JSON document (never sharing containers with the caller's)."""
    if isinstance(source, Plan):
        return source.to_json_data()
    if isinstance(source, Path):
        fmt = {".json": "json", ".yaml": "yaml", ".yml": "yaml"}.get(source.suffix.lower())
        return load_document(read_plan_file(source, limits), limits, fmt=fmt)
    if isinstance(source, str | bytes):
        return load_document(source, limits)
    check_bounds(source, limits)
    return copy_json(dict(source))


def _add_missing_edges(steps: list[Any], changes: list[str], skipped: list[str]) -> None:
    index: dict[str, int] = {}
    for i, raw in enumerate(steps):
        sid = raw.get("id") if isinstance(raw, dict) else None
        if isinstance(sid, str) and sid not in index:
            index[sid] = i
    # The declared graph: depends_on edges between existing steps (ordering edges included).
    declared: dict[str, list[str]] = {sid: [] for sid in index}
    for sid, i in index.items():
        deps = steps[i].get("depends_on")
        if isinstance(deps, list):
            declared[sid] = [d for d in deps if isinstance(d, str) and d in index and d != sid]
    wanted: list[tuple[str, str, str]] = []  # (step, missing dependency, first path using it)
    for sid, i in index.items():
        raw = steps[i]
        deps = raw.get("depends_on", [])
        if not isinstance(deps, list):
            continue  # a malformed depends_on is the validator's to report, not ours to guess
        have = set(deps)
        for path, ref in _references(raw, f"$.steps[{i}]"):
            target = ref.step
            if target in LOCAL_NAMES and target not in index:
                continue
            if target == sid:
                skipped.append(
                    f"$.steps[{i}]: step '{sid}' references its own output ({ref} at {path});"
                    " no dependency added"
                )
                continue
            if target not in index or target in have:
                continue
            have.add(target)
            wanted.append((sid, target, f"{path} uses {ref}"))
    if not wanted:
        return
    # Fast path: all missing edges together close no cycle (checked once, linear time).
    trial = {sid: list(ds) for sid, ds in declared.items()}
    for sid, target, _ in wanted:
        trial[sid].append(target)
    safe_all = not cycles(trial)
    for sid, target, why in wanted:
        i = index[sid]
        if not safe_all:
            loop = _path(declared, target, sid)
            if loop is not None:
                shown = " -> ".join([sid, *loop])
                skipped.append(
                    f"$.steps[{i}]: step '{sid}' needs '{target}' ({why}), but adding it to"
                    f" depends_on would create the cycle {shown}; not added"
                )
                continue
        raw = steps[i]
        if "depends_on" not in raw:
            raw["depends_on"] = []
        raw["depends_on"].append(target)
        declared[sid].append(target)
        changes.append(
            f"$.steps[{i}].depends_on: added '{target}' to the dependencies of '{sid}' ({why})"
        )


def _path(deps: Mapping[str, list[str]], start: str, goal: str) -> list[str] | None:
    """A chain of dependency edges from ``start`` to ``goal`` (both included), if one exists."""
    parent: dict[str, str | None] = {start: None}
    todo = [start]
    while todo:
        node = todo.pop()
        if node == goal:
            chain = [node]
            while (prev := parent[chain[-1]]) is not None:
                chain.append(prev)
            return chain[::-1]
        for nxt in deps.get(node, ()):
            if nxt not in parent:
                parent[nxt] = node
                todo.append(nxt)
    return None


def _references(step: dict[str, Any], at: str) -> Iterator[tuple[str, Reference]]:
    """Every well-formed reference in the fields of a raw step that may hold them."""
    fields: list[tuple[str, Any]] = [
        (name, step[name])
        for name in ("args", "prompt", "condition", "when", "for_each")
        if name in step
    ]
    fallback = step.get("fallback")
    if isinstance(fallback, dict):
        fields.extend((f"fallback.{k}", fallback[k]) for k in ("args", "value") if k in fallback)
    repeat = step.get("repeat")
    if isinstance(repeat, dict) and "until" in repeat:
        fields.append(("repeat.until", repeat["until"]))
    for name, value in fields:
        for segments, text in iter_strings_with_dollar(value):
            if "${" not in text:
                continue
            try:
                template = parse_template(text)
            except ReferenceSyntaxError:
                continue  # the validator reports it; there is no edge to infer
            path = json_path(f"{at}.{name}", segments)
            for ref in template.references:
                yield path, ref
