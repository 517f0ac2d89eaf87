"""The one answer to "does this step change the world?" and "may it run now?".

Every module that needs to know whether a step has side effects, whether its call may be made
again after a crash, whether it needs a person's approval, or whether it may start before its
plan is sealed and approved asks :func:`step_effect` (or :func:`tool_effect` for one tool).
A test keeps it the only place that reads ``side_effects`` / ``requires_approval`` to decide.

The rules, for a step:

- the tools it may call are its own (``tool_call``) and its fallback's; a tool no registry
  knows is taken as ``unsafe`` (the conservative default);
- its side-effect class is the worst of those tools' (``none`` < ``idempotent`` < ``keyed`` <
  ``unsafe``); a step that calls no tool (``llm_call``, ``condition_check``) has ``none``;
- it needs approval if the step asks for it (``requires_approval: true``), else if any of its
  tools says so, else if every tool waives it (the tool's ``requires_approval=False``) it does
  not, else exactly when it changes the world. A step cannot waive approval: its
  ``requires_approval: false`` counts as unset — the plan is what is being approved, and its
  author (often a model) cannot vouch for it; a waiver is the tool owner's;
- it may start before its plan is sealed and approved only if it neither changes the world nor
  needs approval;
- a retry of it may overlap a call of it that still runs (a timed-out sync call that could not
  be stopped) only if every tool it may call says so (``overlapping_retries=True``) and none is
  ``unsafe``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from planrail.plan.model import Step, step_tools
from planrail.plan.tools import SideEffects, ToolRegistry, ToolSpec

__all__ = [
    "Effect",
    "StepEffects",
    "effects_of",
    "needing_approval",
    "self_waivers",
    "step_effect",
    "tool_effect",
]

_ORDER: dict[str, int] = {"none": 0, "idempotent": 1, "keyed": 2, "unsafe": 3}


@dataclass(frozen=True, slots=True)
class Effect:
    """What running a step does to the world, and what follows from it."""

    side_effects: SideEffects
    """The worst side-effect class of the tools the step may call (``none`` if it calls none)."""
    needs_approval: bool
    """A person (or an approver) must approve the plan before this step runs."""
    overlapping_retries: bool = False
    """Every tool the step may call allows a retry while an earlier call still runs."""

    @property
    def changes_world(self) -> bool:
        """Whether a call of this step changes something outside planrail."""
        return self.side_effects != "none"

    @property
    def may_rerun(self) -> bool:
        """Whether a call whose outcome was not recorded may be made again with the same
        idempotency key (read-only, idempotent and keyed tools); otherwise it is in doubt."""
        return self.side_effects != "unsafe"

    @property
    def retry_may_overlap(self) -> bool:
        """Whether a retry may start while the call of an earlier attempt still runs (a sync
        call abandoned on its timeout): only for key-honouring tools that say so; otherwise
        the attempt is not retried while that call runs."""
        return self.may_rerun and self.overlapping_retries

    @property
    def guarded(self) -> bool:
        """Whether the security policy vets its calls as side-effecting ones."""
        return self.changes_world or self.needs_approval

    @property
    def may_start_early(self) -> bool:
        """Whether it may start before its plan is complete, validated and approved."""
        return not self.guarded


def tool_effect(spec: ToolSpec | None) -> Effect:
    """The effect of one call of a tool (``None``: a tool nobody knows, taken as unsafe)."""
    if spec is None:
        return Effect("unsafe", True)
    wanted = spec.requires_approval
    needs = spec.side_effects != "none" if wanted is None else wanted
    return Effect(spec.side_effects, needs, spec.overlapping_retries)


def step_effect(step: Step, registry: ToolRegistry) -> Effect:
    """The effect of running ``step`` (see the module docstring for the rules)."""
    tools = step_tools(step)
    worst: SideEffects = "none"
    votes: list[bool | None] = []
    overlap = bool(tools)
    for name in tools:
        spec = registry.spec(name)
        side: SideEffects = spec.side_effects if spec is not None else "unsafe"
        if _ORDER[side] > _ORDER[worst]:
            worst = side
        votes.append(spec.requires_approval if spec is not None else None)
        overlap = overlap and spec is not None and spec.overlapping_retries
    if step.requires_approval or any(v is True for v in votes):
        needs = True
    elif votes and all(v is False for v in votes):
        needs = False
    else:
        needs = worst != "none"
    return _effect(worst, needs, overlap)


def self_waivers(steps: Iterable[Step]) -> list[Step]:
    """The steps that try to waive their own approval (``requires_approval: false``), which
    counts as unset (validation warns ``approval_not_waived``); one pass, no call per step."""
    return [step for step in steps if step.requires_approval is False]


class StepEffects:
    """:func:`step_effect` against one registry, each kind of step decided once: the effect
    depends only on the tools a step may call and its own ``requires_approval``, and
    thousands of a plan's steps share them (the registry must not change meanwhile)."""

    __slots__ = ("_known", "registry")

    def __init__(self, registry: ToolRegistry) -> None:
        self.registry = registry
        self._known: dict[tuple[str | None, str | None, bool | None], Effect] = {}

    def __call__(self, step: Step) -> Effect:
        fallback = step.fallback.tool if step.fallback is not None else None
        own = (step.tool or "") if step.action == "tool_call" else None
        key = (own, fallback, step.requires_approval)
        found = self._known.get(key)
        if found is None:
            found = self._known[key] = step_effect(step, self.registry)
        return found


_EFFECTS: dict[tuple[SideEffects, bool, bool], Effect] = {}


def _effect(side_effects: SideEffects, needs_approval: bool, overlap: bool) -> Effect:
    """The one (immutable) :class:`Effect` of each kind: a big plan holds a handful, not one
    per step."""
    key = (side_effects, needs_approval, overlap)
    found = _EFFECTS.get(key)
    if found is None:
        found = _EFFECTS[key] = Effect(side_effects, needs_approval, overlap)
    return found


def effects_of(steps: Iterable[Step], registry: ToolRegistry) -> dict[str, Effect]:
    """Each step's :class:`Effect`, by step id."""
    return {s.id: step_effect(s, registry) for s in steps}


def needing_approval(effects: Mapping[str, Effect], done: Iterable[str] = ()) -> list[str]:
    """The steps (in ``effects``' order) that need approval, leaving out those in ``done``."""
    skip = set(done)
    return [sid for sid, e in effects.items() if e.needs_approval and sid not in skip]
