"""The compiled plan: what validation learned about a plan, kept for everything after it.

Validation (:func:`planrail.plan.validate.check_plan`) parses every string of a plan that may
hold a reference, finds each step's references and where they sit, and knows each step's effect.
A :class:`CompiledPlan` keeps all of it beside the :class:`~planrail.plan.model.Plan`:

- ``template(text)``: the parsed form of each string (a :data:`~planrail.plan.refs.Parse`), from
  which the executor builds its argument fillers and predicates;
- ``steps[id].references``: each reference with its path in the step (``("args", "to")``), which
  the redactor reads for secret paths and provenance for the inputs of a step;
- ``steps[id].effect``: the answer of :mod:`planrail.plan.effects`;
- ``hash`` and ``priority()`` (each step's remaining critical path).

Nothing parses a plan's strings again after validation (provenance and the redactor still walk
values for their literals, with these parsed strings), and nothing depends on a process-wide
cache. A plan built in Python without validation is compiled by
:meth:`CompiledPlan.of` (one walk, no checks); an open plan (streamed, replanned) grows with
:meth:`CompiledPlan.extend`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

from planrail.errors import ReferenceSyntaxError
from planrail.plan.effects import Effect, StepEffects
from planrail.plan.graph import critical_path_lengths
from planrail.plan.model import Plan, Step
from planrail.plan.refs import Parse, Reference, Segment, Template, iter_strings_with_dollar
from planrail.plan.refs import parse_template as _parse
from planrail.plan.tools import ToolRegistry

__all__ = ["LOCAL_NAMES", "CompiledPlan", "CompiledStep", "StepPath", "Templates", "step_fields"]

StepPath = tuple[Segment, ...]
"""Where a value sits in a step: ``("args", "to")``, ``("fallback", "args", "to", 0)``."""

LOCAL_NAMES = {"item": "for_each", "self": "repeat"}
"""Names a step may reference besides other steps: the current ``for_each`` item and the
``repeat`` loop's previous output."""


@dataclass(frozen=True, slots=True)
class CompiledStep:
    """One step and what validation learned about it."""

    step: Step
    flat: tuple[Any, ...]
    """The step's references with their paths, flattened (path, reference, path, ...): one
    tuple per step, not one per reference (a 100,000-step plan holds a few hundred thousand)."""
    effect: Effect

    @classmethod
    def of(
        cls, step: Step, found: Iterable[tuple[StepPath, Reference]], effect: Effect
    ) -> CompiledStep:
        return cls(step, tuple(chain.from_iterable(found)), effect)

    @property
    def references(self) -> list[tuple[StepPath, Reference]]:
        """Every well-formed reference the step holds, with its path, in document order
        (``item`` and ``self`` included)."""
        flat = self.flat
        return list(zip(flat[::2], flat[1::2], strict=True))

    @property
    def reads(self) -> frozenset[str]:
        """The steps whose outputs its references read (locals left out)."""
        refs: tuple[Reference, ...] = self.flat[1::2]
        return frozenset(r.step for r in refs if r.step not in LOCAL_NAMES)

    def references_under(self, *prefix: Segment) -> list[Reference]:
        """The references inside the field at ``prefix`` (``"args"``, ``"to"``)."""
        n = len(prefix)
        return [r for p, r in self.references if p[:n] == prefix]


_new = object.__new__
_set_step = vars(CompiledStep)["step"].__set__  # the slot
_set_flat = vars(CompiledStep)["flat"].__set__  # the slot
_set_effect = vars(CompiledStep)["effect"].__set__  # the slot


def _compiled_step(step: Step, flat: tuple[Any, ...], effect: Effect) -> CompiledStep:
    """``CompiledStep(step, flat, effect)``, its slots set directly (the frozen dataclass's
    ``__init__``, an ``object.__setattr__`` per field behind a call from C, cost twice as
    much, once per step of every validated plan)."""
    compiled: CompiledStep = _new(CompiledStep)
    _set_step(compiled, step)
    _set_flat(compiled, flat)
    _set_effect(compiled, effect)
    return compiled


class Templates(dict[str, Template]):
    """Parsed strings by text; a string not met before is parsed on first use and kept.

    ``templates[text]`` is the whole lookup, at C speed: the executor fills references with it
    once per string per call.
    """

    def __missing__(self, text: str) -> Template:
        t = self[text] = _parse(text)
        return t


class CompiledPlan:
    """A plan with what its validation learned (see the module docstring)."""

    def __init__(
        self,
        plan: Plan,
        registry: ToolRegistry,
        templates: dict[str, Template] | None = None,
        references: Mapping[str, Sequence[tuple[StepPath, Reference]]] | None = None,
        *,
        consume: bool = False,
    ) -> None:
        """``references``: each step's, as validation found them (``None``: found here);
        ``consume``: ``references`` is a dict that may be emptied as it is read."""
        self.plan = plan
        self.registry = registry
        if templates is None or type(templates) is not Templates:
            templates = Templates(templates or {})
        self._templates = templates
        self.template: Parse = templates.__getitem__
        """The parsed form of ``text`` (a :data:`~planrail.plan.refs.Parse`): parsed once, then
        kept (raises :class:`~planrail.errors.ReferenceSyntaxError` when malformed)."""
        self.steps: dict[str, CompiledStep] = {}
        self._priority: dict[str, float] | None = None
        self.checked_with: object = None
        """What validation checked it with (its options and limits), set by
        :func:`~planrail.plan.validate.check_plan`; ``None``: compiled without validation."""
        if references is None:
            references = {}
        take = references.pop if consume and isinstance(references, dict) else references.get
        effects = StepEffects(registry)  # for these steps, against the registry as it is now
        steps = self.steps
        for step in plan.steps:
            found = take(step.id, None)
            if found is None:
                found = list(self._walk(step))
            steps[step.id] = _compiled_step(step, tuple(chain.from_iterable(found)), effects(step))

    @classmethod
    def of(cls, plan: Plan | CompiledPlan, registry: ToolRegistry | None = None) -> CompiledPlan:
        """``plan`` compiled (without validation: malformed references are left out, and fail
        their step when it fills them); a compiled plan as it is."""
        if isinstance(plan, CompiledPlan):
            return plan
        return cls(plan, registry if registry is not None else ToolRegistry())

    def for_registry(self, registry: ToolRegistry) -> CompiledPlan:
        """This plan compiled against ``registry`` (itself when it is the same registry): the
        parsed strings and references are kept, the effects are asked again."""
        if registry is self.registry:
            return self
        refs = {sid: c.references for sid, c in self.steps.items()}
        return CompiledPlan(self.plan, registry, self._templates, refs)  # not checked with it

    @property
    def hash(self) -> str:
        """The plan's canonical hash (what an approval is bound to)."""
        return self.plan.hash

    @property
    def effects(self) -> dict[str, Effect]:
        """Each step's effect, by id (a new dict)."""
        return {sid: c.effect for sid, c in self.steps.items()}

    def extend(self, steps: Iterable[Step]) -> list[CompiledStep]:
        """Compile steps added to an open plan."""
        self._priority = None
        effects = StepEffects(self.registry)
        return [self._add(step, None, effects) for step in steps]

    def rebind(self, plan: Plan) -> None:
        """The sealed form of an open plan: the same steps, now one :class:`Plan`."""
        self.plan = plan

    def priority(self, steps: Iterable[str] | None = None) -> dict[str, float]:
        """Each step's remaining critical path (its estimated duration plus its longest chain of
        dependents'): its priority when it waits for a resource. ``steps``: only among these."""
        if steps is None and self._priority is not None:
            return self._priority
        chosen = self.steps if steps is None else {s: self.steps[s] for s in steps}
        deps = {sid: c.step.depends_on for sid, c in chosen.items()}
        spec = self.registry.spec

        def estimate(sid: str) -> float:
            step = self.steps[sid].step
            if step.estimated_duration is not None:
                return step.estimated_duration
            found = spec(step.tool or "")
            if found is not None and found.estimated_duration is not None:
                return found.estimated_duration
            return 1.0

        lengths = critical_path_lengths(deps, estimate)
        if steps is None:
            self._priority = lengths
        return lengths

    # ------------------------------------------------------------------ building

    def _add(
        self,
        step: Step,
        found: Sequence[tuple[StepPath, Reference]] | None,
        effects: StepEffects,
    ) -> CompiledStep:
        if found is None:
            found = list(self._walk(step))
        compiled = self.steps[step.id] = CompiledStep.of(step, found, effects(step))
        return compiled

    def _walk(self, step: Step) -> Iterator[tuple[StepPath, Reference]]:
        for field, value in step_fields(step):
            for segments, text in iter_strings_with_dollar(value, field):
                try:
                    t = self.template(text)
                except ReferenceSyntaxError:
                    continue
                for ref in t.references:
                    yield segments, ref


def step_fields(step: Step) -> Iterator[tuple[StepPath, Any]]:
    """The fields of a step that may hold references, with their paths."""
    yield ("args",), step.args
    if step.prompt is not None:
        yield ("prompt",), step.prompt
    if step.condition is not None:
        yield ("condition",), step.condition
    if step.when is not None:
        yield ("when",), step.when
    if step.for_each is not None:
        yield ("for_each",), step.for_each
    if step.fallback is not None:
        yield ("fallback", "args"), step.fallback.args
        if "value" in step.fallback.model_fields_set:
            yield ("fallback", "value"), step.fallback.value
    if step.repeat is not None:
        yield ("repeat", "until"), step.repeat.until
