"""What the validator's passes share: the issue type, the options, the context and its helpers.

Every pass (``validate_shape``, ``validate_refs``, ``validate_args``, ``validate_policies``,
``placeholders``, ``lints``) takes a :class:`Context` and appends :class:`Issue` s to it; none
imports another pass, and :mod:`planrail.plan.validate` only orders them.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from planrail.errors import ReferenceSyntaxError
from planrail.plan import schema as js
from planrail.plan.compiled import StepPath, Templates
from planrail.plan.loader import PlanLimits
from planrail.plan.model import Step
from planrail.plan.refs import Parser, Reference, Template, iter_strings_with_dollar, json_path
from planrail.plan.tools import ToolRegistry

__all__ = [
    "LEVELS",
    "LINT_CODES",
    "Context",
    "Issue",
    "Level",
    "ValidationOptions",
    "output_schema_of",
    "unit_output_schema",
]

Level = Literal["off", "warning", "error"]
"""How a check that may be turned up or down reports: not at all, as a warning, as an error."""
LEVELS: tuple[Level, ...] = ("off", "warning", "error")

LINT_CODES = ("side_effect_race", "needless_dependency")
"""The lints: warnings by default; ``ValidationOptions.lints`` turns each up or off."""

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


@dataclass(frozen=True, slots=True)
class ValidationOptions:
    """What :func:`planrail.plan.validate.check_plan` reports beyond the fixed checks.

    :func:`~planrail.plan.validate.validate` uses the defaults.
    """

    strict: bool = False
    """``placeholder_literal`` is an error everywhere (``planrail validate --strict``)."""
    placeholders_in_side_effects: Level = "warning"
    """How ``placeholder_literal`` reports in the arguments of a step whose tool changes the
    world (``side_effects`` other than ``none``): a policy may make it an error there only."""
    lints: Mapping[str, Level] = field(default_factory=dict)
    """Per lint code (``side_effect_race``, ``needless_dependency``): ``off``, ``warning``
    (the default) or ``error`` (``planrail validate --lint CODE=LEVEL``)."""

    def lint_level(self, code: str) -> Level:
        return self.lints.get(code, "warning")


@dataclass
class Context:
    """The state one validation shares between its passes."""

    registry: ToolRegistry
    limits: PlanLimits
    options: ValidationOptions = field(default_factory=ValidationOptions)
    check_tools: bool = True
    """False without a tool registry: tool names, arguments and output fields are not checked."""
    with_warnings: bool = True
    """False: warnings are not kept, and the checks that could only warn are not run (a run's
    validation, which shows no warnings: :func:`planrail.prepare`)."""
    errors: list[Issue] = field(default_factory=list)
    warnings: list[Issue] = field(default_factory=list)
    raw: Any = None
    steps: list[Step] = field(default_factory=list)
    """Every step that could be read as a :class:`Step` (some with broken fields left out)."""
    first: dict[str, Step] = field(default_factory=dict)
    """The first step with each id: the producer a reference reaches."""
    where: dict[int, int] = field(default_factory=dict)
    """``id(step)`` → its index in the plan's steps (:meth:`at` spells its JSONPath)."""
    skipped: dict[int, frozenset[str]] = field(default_factory=dict)
    """``id(step)`` → top-level fields that were malformed and left out (reported already)."""
    invalid: int = 0
    """Steps whose fields did not all fit: the plan cannot be built from ``steps``."""
    known: dict[str, int] = field(default_factory=dict)
    """Every step id seen, with its first index."""
    refs: dict[str, list[tuple[StepPath, Reference]]] = field(default_factory=dict)
    """Per step: (path in the step, reference) for every well-formed reference to a step."""
    compiled_refs: dict[str, list[tuple[StepPath, Reference]]] = field(default_factory=dict)
    """The same with ``item`` / ``self`` references too: what the compiled plan keeps."""
    used: dict[str, set[str]] = field(default_factory=dict)
    """Per step: the steps its references read (the data its edges carry)."""
    dataless: list[str] = field(default_factory=list)
    """Steps with a ``depends_on`` entry they reference nothing of."""
    templates: Templates = field(default_factory=Templates)
    """Parsed strings, so each is parsed once."""
    parser: Parser = field(default_factory=Parser)
    """What parses them (the references they share parsed once too)."""
    output_refs: list[tuple[str, Reference]] = field(default_factory=list)
    literal_checks: dict[tuple[Any, ...], tuple[Any, list[Any]]] = field(default_factory=dict)
    """``(id(parameter schema), id(tool schema), type, scalar)`` — or, for text holding
    references, ``(id(parameter schema), id(tool schema), the JSON types it produces)`` — →
    the schema (so the id stays its own) and the problems :func:`schema.check_literal` found
    (a float by its ``repr``)."""
    _producer_schemas: dict[str, Any] = field(default_factory=dict)
    suggestion_budget: int = _SUGGESTION_BUDGET
    _edges: dict[str, list[str]] | None = None
    _in_order: bool | None = None
    _walks: dict[tuple[int, tuple[str | int, ...]], tuple[Any, _Walk]] = field(default_factory=dict)
    """``(id(schema), path)`` → the schema (so the id stays its own) and the walk's result:
    thousands of steps reference the same fields of the same tools' outputs."""

    def error(self, code: str, step: str | None, path: str, message: str) -> None:
        self.errors.append(Issue(code, step, path, message))

    def warn(self, code: str, step: str | None, path: str, message: str) -> None:
        if self.with_warnings:
            self.warnings.append(Issue(code, step, path, message))

    def level(self, level: Level) -> Level:
        """How an issue at ``level`` is reported here: ``off`` for a warning when warnings are
        not kept (so a check whose every finding is a warning can be skipped)."""
        return "off" if level == "warning" and not self.with_warnings else level

    def report(self, level: Level, code: str, step: str | None, path: str, message: str) -> None:
        """An issue at a configurable level (nothing when ``off``)."""
        if level == "error":
            self.error(code, step, path, message)
        elif level == "warning":
            self.warn(code, step, path, message)

    def template(self, s: str) -> Template:
        t = self.templates.get(s)
        if t is None:
            t = self.templates[s] = self.parser(s)
        return t

    def at(self, step: Step) -> str:
        """The JSONPath of ``step`` in the plan (``$.steps[3]``)."""
        return f"$.steps[{self.where[id(step)]}]"

    def skips(self, step: Step, name: str) -> bool:
        """Whether ``name`` was malformed in ``step`` (so checks that read it are skipped)."""
        return bool(self.skipped) and name in self.skipped.get(id(step), ())

    def edges(self) -> dict[str, list[str]]:
        """Each step id → the steps it waits for (``depends_on`` and references, no self-loops;
        for a repeated id, the first step's). Built once, after the references pass."""
        if self._edges is None:
            known = self.known
            is_known = known.__contains__
            refs = self.refs
            deps: dict[str, list[str]] = {}  # in the order of known (first has its keys)
            for sid, step in self.first.items():
                ds = step.depends_on
                if sid not in ds and all(map(is_known, ds)):  # the usual step: all of them
                    edges = list(ds)
                else:
                    edges = [d for d in ds if d in known and d != sid]
                found = refs.get(sid)
                if found:  # the references pass keeps only references to known other steps
                    edges += [r.step for _, r in found]
                deps[sid] = edges
            self._edges = deps
        return self._edges

    def in_plan_order(self) -> bool:
        """Whether every edge leads to a step listed earlier: the plan's order is then a
        topological order (plans are nearly always written so)."""
        if self._in_order is None:
            self._in_order = _in_order(self.known, self.edges())
        return self._in_order

    def reference_to(self, step_id: str, path: tuple[str, ...] = ()) -> Reference | None:
        """The reference to suggest for ``step_id`` (and ``path``): ``None`` when the path is
        not in its output; without a path, its one field when its output declares just one."""
        producer = self.first.get(step_id)
        schema = output_schema_of(producer, self.registry) if producer is not None else None
        ref = Reference(step_id, path)
        if path:
            return None if walk_schema(schema, ref)[0] == "missing" else ref
        props = schema.get("properties") if isinstance(schema, dict) else None
        if isinstance(props, dict) and len(props) == 1:
            return Reference(step_id, (next(iter(props)),))
        return ref

    def did_you_mean(self, name: str, candidates: Collection[str]) -> str:
        """``"; did you mean 'x'?"`` for the closest candidate, or ``""``."""
        # Each hint compares ``name`` with every candidate; a shared budget keeps a plan with
        # thousands of misspellings linear (later issues simply get no hint).
        if len(candidates) > self.suggestion_budget:
            return ""
        self.suggestion_budget -= len(candidates)
        match = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.75)
        return f"; did you mean '{match[0]}'?" if match else ""

    def walk(self, ref: Reference, walked: _Walk) -> tuple[str, str | None]:
        """:func:`walk_schema` of ``ref`` from its :meth:`ref_walk`."""
        status, depth, detail, _ = walked
        if status == "missing":
            where = Reference(ref.step, ref.path[:depth])
            return (
                "missing",
                f"{ref}: the output of {where} has no field {ref.path[depth]!r} ({detail})",
            )
        return status, None if status == "ok" else str(ref.path[depth])

    def ref_walk(self, ref: Reference) -> _Walk | None:
        """``ref``'s path walked through its producer's output schema (the producer must exist;
        ``None`` when its shape is unknown), walked once per (output schema, path): the output
        fields and the argument types read the same walks. Not remembered per (producer,
        path): that cost ~80 bytes per step at the peak of validating a big plan and saved
        nothing measurable (238.2k instructions per step without it, 238.7k with)."""
        schema = self.producer_schema(ref.step)
        return None if schema is None else self._walk(schema, ref.path)

    def _walk(self, schema: Any, path: tuple[str | int, ...]) -> _Walk:
        key = (id(schema), path)
        hit = self._walks.get(key)
        if hit is None or hit[0] is not schema:
            hit = self._walks[key] = (schema, _walk(schema, path))
        return hit[1]

    def producer_schema(self, step_id: str) -> Any:
        """:func:`output_schema_of` the first step with ``step_id`` (which must exist), once per
        validation (a fan-out's is a new dict: asked again, its walks would be lost)."""
        schemas = self._producer_schemas
        if step_id in schemas:
            return schemas[step_id]
        schema = schemas[step_id] = output_schema_of(self.first[step_id], self.registry)
        return schema

    def ref_types(self) -> Callable[[str], Any]:
        """``types_of(s)`` for :func:`schema.check_literal`: ``True`` for a plain string, the
        JSON types a string holding one reference produces, ``frozenset({"string"})`` for
        interpolated text, ``False`` when unknown."""
        first = self.first
        templates = self.templates
        by_ref: dict[int, tuple[Reference, Any]] = {}  # id(reference) -> it, its types

        def types_of(s: str) -> Any:
            if "$" not in s:
                return True
            t = templates.get(s)
            if t is None:
                try:
                    t = self.template(s)
                except ReferenceSyntaxError:
                    return False
            if not t.references:
                return True
            ref = t.single
            if ref is None:
                return _TEXT
            hit = by_ref.get(id(ref))  # the parser gives equal references as one object
            if hit is not None and hit[0] is ref:
                return hit[1]
            found = produced(ref)
            by_ref[id(ref)] = (ref, found)
            return found

        def produced(ref: Reference) -> Any:
            if ref.step not in first:
                return False
            walked = self.ref_walk(ref)
            return walked[3] if walked is not None and walked[0] == "ok" else False

        return types_of


def _in_order(known: Mapping[str, int], edges: Mapping[str, list[str]]) -> bool:
    position = known.__getitem__
    for sid, ds in edges.items():  # noqa: SIM110 - all() of a generator: a call per step
        if ds and max(map(position, ds)) >= known[sid]:
            return False
    return True


_TEXT = frozenset({"string"})
"""What text with references inside it produces."""


def unit_output_schema(step: Step, registry: ToolRegistry) -> Any:
    """The JSON Schema of one call of ``step`` (one item of a fan-out), ``None`` if unknown."""
    if step.action == "condition_check":
        return {"type": "boolean"}
    if step.action == "llm_call":
        return step.output_schema if step.output_schema is not None else {"type": "string"}
    spec = registry.spec(step.tool or "")
    return None if spec is None else spec.output_schema


def output_schema_of(step: Step, registry: ToolRegistry) -> Any:
    """The JSON Schema of what a step produces, or ``None`` when its shape is unknown."""
    schema = unit_output_schema(step, registry)
    if schema is not None and step.for_each is not None:
        schema = {"type": "array", "items": schema, **_defs(schema)}
    return schema


def _defs(schema: Any) -> dict[str, Any]:
    if isinstance(schema, dict):
        return {k: schema[k] for k in ("$defs", "definitions") if k in schema}
    return {}


_Walk = tuple[str, int, Any, "frozenset[str] | None"]
"""A path walked through a schema: status, the depth it stopped at, the detail, and the JSON
types at its end (when ``ok``)."""


def _walk(schema: Any, path: tuple[str | int, ...]) -> _Walk:
    root = schema if isinstance(schema, dict) else None
    current = schema
    for depth, seg in enumerate(path):
        status, sub = js.child_schema(current, root, seg)
        if status != "ok":
            return status, depth, sub, None
        current = sub
    return "ok", len(path), None, js.schema_types(current, root)


def walk_schema(schema: Any, ref: Reference) -> tuple[str, str | None]:
    """Walk ``ref``'s path through ``schema``: ``("ok", None)``, ``("missing", problem)`` or
    ``("unknown", segment)`` when the schema stops describing the output at ``segment``."""
    root = schema if isinstance(schema, dict) else None
    current = schema
    for depth, seg in enumerate(ref.path):
        status, sub = js.child_schema(current, root, seg)
        if status == "unknown":
            return "unknown", str(seg)
        if status == "missing":
            where = Reference(ref.step, ref.path[:depth])
            return "missing", f"{ref}: the output of {where} has no field {seg!r} ({sub})"
        current = sub
    return "ok", None


def walk_strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """``(JSONPath, text)`` for every string in ``value`` that holds a ``$``."""
    for segments, text in iter_strings_with_dollar(value):
        yield json_path(path, segments), text
