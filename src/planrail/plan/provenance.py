"""Provenance: where every argument of every step can come from, computed from the plan alone.

A value's *sources* are a set of :class:`Source` s:

- ``user``: literal text and values written in the plan (by a person, or by the planner from
  the user's request);
- ``tool:NAME``: the output of a step calling tool ``NAME`` (a fallback tool included);
- ``llm:STEP``: the answer of the ``llm_call`` step ``STEP``.

Sources flow along references. An ``llm_call`` step's answer carries its own ``llm:`` source
*and* every source of its inputs (prompt, args, the goal): a model can repeat whatever it read.
A tool's output likewise carries the sources of its arguments besides its own ``tool:`` source
(a search tool's results are chosen by its query). A ``condition_check`` output carries the
sources of its condition. ``${item}`` carries the sources of the ``for_each`` list; ``$first``
carries every candidate statically and only the chosen one at run time (pass ``available``).

Trust is per field: a reference into the output of a tool declared trusted (``@tool(trusted=
True)``, a policy's ``trusted`` patterns, ``x-planrail-trusted`` in its output schema) carries a
*trusted* source for that field. A literal of a plan whose author had seen tool outputs (``seen``,
see :mod:`planrail.plan.copied`) that occurs in one of them carries that output's sources,
marked *copied*, instead of ``user``.

What is *not* tracked: control flow. A step guarded by ``when`` on a tool's output, or a
branch chosen by a ``condition_check``, does not make its arguments derive from that output.

Everything here is pure and linear in the plan's size (each step is analysed once, without
recursion). Sources are compared by kind and name, so a step's set never holds more entries
than there are distinct tools and LLM steps upstream of it.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from planrail.errors import ReferenceSyntaxError
from planrail.plan.first import FIRST
from planrail.plan.refs import Parse, Reference, parse_template

if TYPE_CHECKING:
    from planrail.plan.compiled import CompiledPlan
    from planrail.plan.copied import Seen
    from planrail.plan.model import Plan, Step
    from planrail.plan.tools import ToolRegistry, ToolSpec

__all__ = [
    "PATTERN_WORDS",
    "USER",
    "Provenance",
    "Source",
    "SourceKind",
    "Sources",
    "analyze",
    "check_pattern",
    "labels",
    "schema_trusted",
]

SourceKind = Literal["user", "tool", "llm"]


@dataclass(frozen=True, slots=True, order=True)
class Source:
    """One origin of data."""

    kind: SourceKind
    name: str = ""
    """The tool's name (``tool``), the step's id (``llm``), empty for ``user``."""
    sensitivity: str = "public"
    """The producing tool's ``sensitivity`` (``public``, ``private`` or ``secret``)."""
    trusted: bool = False
    """Declared trustworthy: the tool, or the field of its output the value is read from, is
    named in the policy's ``trusted`` list or marked ``x-planrail-trusted`` in its output
    schema (the user's own contacts, the clock, the account's own IBAN)."""
    copied: bool = False
    """A literal of a model-written plan that occurs in this source's output (the model copied
    it, see :mod:`planrail.plan.copied`)."""

    @property
    def label(self) -> str:
        """``user``, ``tool:NAME`` or ``llm:STEP`` — what policies and events show."""
        return self.kind if self.kind == "user" else f"{self.kind}:{self.name}"

    def __str__(self) -> str:
        return self.label

    def matches(self, pattern: str) -> bool:
        """Whether a policy pattern names this source (see :data:`PATTERN_WORDS`)."""
        if pattern in ("*", self.kind):
            return True
        if pattern == "external":
            return self.kind != "user"
        if pattern == "untrusted":
            return self.kind != "user" and not self.trusted
        if pattern == "trusted":
            return self.kind != "user" and self.trusted
        if pattern in ("private", "secret"):
            return self.sensitivity == pattern or (
                pattern == "private" and self.sensitivity == "secret"
            )
        kind, sep, glob = pattern.partition(":")
        return bool(sep) and kind == self.kind and fnmatch.fnmatchcase(self.name, glob)


Sources = frozenset[Source]

USER = Source("user")
_ONLY_USER: Sources = frozenset({USER})
_NONE: Sources = frozenset()

PATTERN_WORDS: dict[str, str] = {
    "*": "any source",
    "user": "literal values written in the plan",
    "tool": "the output of any tool",
    "tool:GLOB": "the output of tools whose name matches GLOB (fnmatch)",
    "llm": "the answer of any llm_call step",
    "llm:GLOB": "the answer of llm_call steps whose id matches GLOB",
    "external": "anything but user: any tool or LLM output",
    "untrusted": "any tool or LLM output not declared trusted",
    "trusted": "the output (or the field of it) of a tool declared trusted",
    "private": "the output of tools declared sensitivity='private' (or 'secret')",
    "secret": "the output of tools declared sensitivity='secret'",
}
"""The patterns a security rule's ``from`` may use."""


def check_pattern(pattern: str) -> str | None:
    """What is wrong with a source pattern, or ``None`` if it is well-formed."""
    if not isinstance(pattern, str) or not pattern:
        return "a source pattern is a non-empty string"
    if pattern in (
        "*",
        "user",
        "tool",
        "llm",
        "external",
        "untrusted",
        "trusted",
        "private",
        "secret",
    ):
        return None
    kind, sep, glob = pattern.partition(":")
    if sep and kind in ("tool", "llm") and glob:
        return None
    return f"unknown source pattern {pattern!r}; use one of {', '.join(PATTERN_WORDS)}"


def labels(sources: Iterable[Source]) -> list[str]:
    """Sorted labels, for messages and events."""
    return sorted({s.label for s in sources})


@dataclass(frozen=True, slots=True)
class _Static:
    output: Sources
    inputs: Sources
    own: Sources = frozenset()
    """The step's own ``tool:`` source(s) (its tool and fallback tool)."""


class Provenance:
    """The provenance of a plan's steps (and of steps added to an open plan later).

    ``steps`` may be a live mapping that grows (an open plan); each step is analysed once, the
    first time it is asked about.
    """

    def __init__(
        self,
        steps: Mapping[str, Step],
        registry: ToolRegistry | None = None,
        *,
        trusted: Iterable[str] = (),
        seen: Seen | None = None,
        goal: str = "",
        compiled: CompiledPlan | None = None,
    ) -> None:
        self._steps = steps
        self.registry = registry
        self._compiled = compiled
        """The compiled plan the steps belong to: its parsed strings and references are read,
        not parsed or walked again."""
        self._parse: Parse = compiled.template if compiled is not None else parse_template
        self.trusted = tuple(trusted)
        """Patterns of trusted sources: ``tool:NAME`` (the whole output) or
        ``tool:NAME.FIELD`` (a field; ``*`` for list indexes), fnmatch globs."""
        self.seen = seen if seen else None
        """What the plan's author saw (literals found in it are not the user's)."""
        self.goal = goal
        """What the user typed: a resolved value found in it counts as the user's."""
        self._done: dict[str, _Static] = {}

    # ------------------------------------------------------------------ queries

    def spec(self, tool: str | None) -> ToolSpec | None:
        """The tool's spec, when a registry was given and holds it."""
        if self.registry is None or not tool:
            return None
        return self.registry.spec(tool)

    def output(self, step_id: str) -> Sources:
        """Everything the output of ``step_id`` can carry."""
        return self._static(step_id).output

    def inputs(self, step_id: str) -> Sources:
        """Everything the action of ``step_id`` reads (args, prompt, condition, items)."""
        return self._static(step_id).inputs

    def sources(
        self, value: Any, step: Step | None = None, *, available: Container[str] | None = None
    ) -> Sources:
        """The sources of ``value`` (JSON that may hold references) inside ``step``.

        Without ``available`` the answer is static: every ``$first`` candidate counts. With it
        (the ids of steps that have an output), ``$first`` counts only the candidate the
        resolver will pick.
        """
        found: set[Source] = set()
        stack = [value]
        while stack:
            v = stack.pop()
            kind = type(v)
            if kind is str:
                if "$" not in v:
                    found |= self._literal(v)
                    continue
                try:
                    parts = self._parse(v).parts
                except ReferenceSyntaxError:
                    found.add(USER)  # never resolved: the step fails before any call
                    continue
                for part in parts:
                    if isinstance(part, str):
                        if part:
                            found |= self._literal(part)
                    else:
                        found |= self._ref_sources(part, step, available)
            elif kind is dict:
                if FIRST in v and len(v) == 1 and type(v[FIRST]) is list and v[FIRST]:
                    stack.extend(self._candidates(v[FIRST], available))
                elif not v:
                    found.add(USER)
                else:
                    stack.extend(v.values())
            elif kind is list:
                if not v:
                    found.add(USER)
                stack.extend(v)
            else:
                found |= self._literal(v)
        return frozenset(found)

    def saw(self, step_id: str, output: Any) -> None:
        """The plan's author saw ``output`` of ``step_id`` (a step it reused that ran again on
        a resume): literals found in it are not the user's from now on."""
        from planrail.plan.copied import Seen

        if self.seen is None:
            self.seen = Seen(self.goal)
        self.seen.add(output, self.output(step_id))

    def _literal(self, value: Any) -> Sources:
        if self.seen is None:
            return _ONLY_USER
        return self.seen.literal(value) or _ONLY_USER

    def args(self, step: Step, *, available: Container[str] | None = None) -> dict[str, Sources]:
        """The sources of each top-level argument of ``step``'s call.

        ``step`` may be the stand-in the runner builds for a fallback call (same id, the
        fallback tool and its args): its ``args`` are what is analysed.
        """
        return {
            name: self.sources(value, step, available=available)
            for name, value in step.args.items()
        }

    def describe(self, step_id: str) -> dict[str, Any]:
        """A JSON summary of one step: its arguments' sources and its output's (for tools)."""
        step = self._steps[step_id]
        return {
            "args": {k: labels(v) for k, v in self.args(step).items()},
            "output": labels(self.output(step_id)),
        }

    # ------------------------------------------------------------------ analysis

    def _ref_sources(
        self, ref: Reference, step: Step | None, available: Container[str] | None
    ) -> Sources:
        name = ref.step
        if name in self._steps:
            if available is not None and name not in available:
                return _NONE  # not produced (yet): the resolver fails; nothing flows
            done = self._static(name)
            if not done.own or not self._is_trusted(self._steps[name], ref.path):
                return done.output
            kept = done.output - done.own
            return kept | frozenset(replace(s, trusted=True) for s in done.own)
        if name == "item" and step is not None and step.for_each is not None:
            return self.sources(step.for_each, step, available=available)
        return _NONE  # ``self`` (the step's own output) or a name the validator rejected

    def _is_trusted(self, producer: Step, path: tuple[Any, ...]) -> bool:
        """Whether the field ``path`` of ``producer``'s output is declared trusted (the
        policy's ``trusted`` patterns, or ``x-planrail-trusted`` in the output schema)."""
        tool = producer.tool
        if producer.action != "tool_call" or not tool or producer.fallback is not None:
            return False
        field_path = ".".join("*" if isinstance(seg, int) else str(seg) for seg in path)
        subject = f"{tool}.{field_path}" if field_path else tool
        for pattern in self.trusted:
            kind, _, glob = pattern.partition(":")
            if kind == "tool" and (
                fnmatch.fnmatchcase(tool, glob) or fnmatch.fnmatchcase(subject, glob)
            ):
                return True
        spec = self.spec(tool)
        if spec is None:
            return False
        if spec.trusted:
            if not path:  # the whole output: trusted only if no field of it is marked otherwise
                return not _any_untrusted(spec.output_schema)
            return not schema_untrusted(spec.output_schema, path)
        return schema_trusted(spec.output_schema, path)

    def _candidates(self, cands: list[Any], available: Container[str] | None) -> list[Any]:
        if available is None:
            return list(cands)
        for cand in cands:
            if all(s in available for s in _direct_steps(cand, self._parse) if s in self._steps):
                return [cand]
        return []

    def _static(self, step_id: str) -> _Static:
        done = self._done.get(step_id)
        if done is not None:
            return done
        # Iterative post-order over the steps this one reads from (no recursion limit).
        on_path: set[str] = set()
        stack: list[tuple[str, bool]] = [(step_id, False)]
        while stack:
            sid, ready = stack.pop()
            if sid in self._done:
                continue
            if ready:
                on_path.discard(sid)
                self._done[sid] = self._compute(self._steps[sid])
                continue
            if sid in on_path:
                raise ValueError(f"step {sid!r} reads its own output through a cycle")
            on_path.add(sid)
            stack.append((sid, True))
            for dep in self._read_steps(self._steps[sid]):
                if dep in self._steps and dep not in self._done and dep != sid:
                    stack.append((dep, False))
        return self._done[step_id]

    def _read_steps(self, step: Step) -> set[str]:
        """Ids named by references in the fields whose data flows into the step's output."""
        compiled = self._compiled.steps.get(step.id) if self._compiled is not None else None
        if compiled is None or compiled.step is not step:
            return _read_steps(step, self._parse)
        return {r.step for p, r in compiled.references if p[0] in _READ or p[:2] in _READ}

    def _compute(self, step: Step) -> _Static:
        inputs: set[Source] = set()
        produced: set[Source] = set()
        if step.action == "condition_check":
            inputs |= self.sources(step.condition, step)
        else:
            inputs |= self.sources(step.args, step) if step.args else set()
            if step.for_each is not None:
                inputs |= self.sources(step.for_each, step)
            if step.action == "llm_call":
                inputs.add(USER)  # the goal anchor
                if step.prompt is not None:
                    inputs |= self.sources(step.prompt, step)
                produced.add(Source("llm", step.id))
            elif step.tool:
                produced.add(self._tool_source(step.tool))
        output = inputs | produced
        own = {s for s in produced if s.kind == "tool"}
        fb = step.fallback
        if fb is not None:
            if fb.tool:
                own.add(self._tool_source(fb.tool))
                output |= {self._tool_source(fb.tool)}
                output |= self.sources(fb.args, step) if fb.args else set()
            else:
                output |= self.sources(fb.value, step)
        return _Static(frozenset(output), frozenset(inputs), frozenset(own))

    def _tool_source(self, tool: str) -> Source:
        spec = self.spec(tool)
        return Source("tool", tool, spec.sensitivity if spec is not None else "public")


def analyze(plan: Plan, registry: ToolRegistry | None = None) -> Provenance:
    """The provenance of every step of ``plan`` (computed now, in dependency order)."""
    prov = Provenance(plan.by_id, registry)
    for step in plan.steps:
        prov.output(step.id)
    return prov


def schema_trusted(schema: Any, path: tuple[Any, ...]) -> bool:
    """Whether an output schema marks the field at ``path`` trusted: the deepest
    ``x-planrail-trusted`` on the way down (the root included) decides; none means no."""
    return _deepest_mark(schema, path) is True


def _deepest_mark(schema: Any, path: tuple[Any, ...]) -> bool | None:
    mark: bool | None = None
    node = schema
    for seg in (None, *path):
        if not isinstance(node, dict):
            break
        if seg is not None:
            if isinstance(seg, int):
                node = node.get("items")
            else:
                props = node.get("properties")
                node = props.get(seg) if isinstance(props, dict) else None
            if not isinstance(node, dict):
                break
        flag = node.get("x-planrail-trusted")
        if isinstance(flag, bool):
            mark = flag
    return mark


def schema_untrusted(schema: Any, path: tuple[Any, ...]) -> bool:
    """Whether the output schema of a trusted tool marks the field at ``path`` untrusted
    (``x-planrail-trusted: false``, e.g. a contact's free-text note)."""
    mark = _deepest_mark(schema, path)
    return mark is False


def _any_untrusted(schema: Any) -> bool:
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if node.get("x-planrail-trusted") is False:
                return True
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def _read_steps(step: Step, parse: Parse) -> set[str]:
    """Ids named by references in the fields whose data flows into the step's output."""
    values: list[Any] = [step.args, step.for_each, step.prompt, step.condition]
    if step.fallback is not None:
        values += [step.fallback.args, step.fallback.value]
    return _direct_steps(values, parse, through_first=True)


_READ = frozenset(
    ("args", "for_each", "prompt", "condition", ("fallback", "args"), ("fallback", "value"))
)
"""The fields (:data:`~planrail.plan.compiled.StepPath` heads) :func:`_read_steps` reads."""


def _direct_steps(value: Any, parse: Parse, *, through_first: bool = False) -> set[str]:
    found: set[str] = set()
    stack = [value]
    while stack:
        v = stack.pop()
        kind = type(v)
        if kind is str:
            if "$" in v:
                try:
                    found.update(r.step for r in parse(v).references)
                except ReferenceSyntaxError:
                    continue
        elif kind is dict:
            if FIRST in v and not through_first:
                continue
            stack.extend(v.values())
        elif kind is list:
            stack.extend(v)
    return found
