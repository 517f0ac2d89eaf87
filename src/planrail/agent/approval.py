"""Approval: who must say yes before a plan runs, and how they are asked.

A *policy* decides which steps need a person's approval (default: every step whose tool
changes the world, or that asks for approval itself). When any does, the *callback* is shown
an :class:`ApprovalRequest` — the plan, those steps, and where every argument value comes
from — and returns yes or no. No callback means no one to ask: the plan is refused.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from planrail.plan.model import Plan, Step
from planrail.plan.refs import iter_references
from planrail.plan.tools import ToolRegistry

__all__ = [
    "ApprovalCallback",
    "ApprovalPolicy",
    "ApprovalRequest",
    "approve_all",
    "ask",
    "every_step",
    "refuse_all",
    "side_effecting_steps",
    "value_sources",
]


def side_effecting_steps(plan: Plan, registry: ToolRegistry) -> list[str]:
    """The default policy: steps whose tool changes the world, unless waived, or that ask."""
    found = []
    for step in plan.steps:
        spec = registry.spec(step.tool or "") if step.action == "tool_call" else None
        wanted = step.requires_approval
        if wanted is None and spec is not None:
            wanted = spec.requires_approval
        if wanted is None:
            wanted = spec is not None and spec.side_effects != "none"
        if wanted:
            found.append(step.id)
    return found


def every_step(plan: Plan, registry: ToolRegistry) -> list[str]:
    """A policy that asks about every plan."""
    return [s.id for s in plan.steps]


ApprovalPolicy = Callable[[Plan, ToolRegistry], Iterable[str]]
"""Which steps of a plan need approval (none: the plan runs without asking)."""


def _source(step_id: str, plan: Plan, reused: frozenset[str]) -> str:
    producer = plan.by_id.get(step_id)
    if producer is None:
        return f"output of {step_id}"
    kind = "LLM" if producer.action == "llm_call" else "tool"
    if producer.action == "condition_check":
        kind = "condition"
    note = ", reused" if step_id in reused else ""
    return f"{kind} output of {step_id}{note}"


def value_sources(plan: Plan, step: Step, reused: Iterable[str] = ()) -> dict[str, list[str]]:
    """Where each argument (and the prompt) of ``step`` comes from.

    ``["user"]`` for a literal written in the plan, else one entry per referenced step, e.g.
    ``"tool output of fetch"`` or ``"LLM output of summarize"``.
    """
    done = frozenset(reused)
    fields: dict[str, Any] = dict(step.args)
    if step.prompt is not None:
        fields["(prompt)"] = step.prompt
    sources: dict[str, list[str]] = {}
    for name, value in fields.items():
        refs = [t for _, t in iter_references(value)]
        producers = list(dict.fromkeys(r.step for t in refs for r in t.references))
        sources[name] = [_source(p, plan, done) for p in producers] or ["user"]
    return sources


@dataclass(frozen=True)
class ApprovalRequest:
    """What a person is asked to approve."""

    plan: Plan
    registry: ToolRegistry
    steps: tuple[str, ...]
    """The steps the policy says need approval."""
    reason: str = "plan"
    """``plan`` for the first plan, ``replan N`` for the N-th replan."""
    reused: tuple[str, ...] = ()
    """Finished steps whose outputs the plan reuses (they will not run again)."""
    side_effects: dict[str, str] = field(default_factory=dict)
    """Each step's side-effect class (``none`` for steps that call no tool)."""

    def sources(self, step_id: str) -> dict[str, list[str]]:
        """Where each argument of ``step_id`` comes from (see :func:`value_sources`)."""
        return value_sources(self.plan, self.plan.step(step_id), self.reused)


ApprovalCallback = Callable[[ApprovalRequest], "bool | Awaitable[bool]"]
"""Says yes (``True``) or no to a plan; may be async."""


def approve_all(request: ApprovalRequest) -> bool:
    """A callback that approves every plan (the Python form of ``--yes``)."""
    return True


def refuse_all(request: ApprovalRequest) -> bool:
    """A callback that refuses every plan that needs approval."""
    return False


def make_request(
    plan: Plan, registry: ToolRegistry, steps: Iterable[str], reason: str, reused: Iterable[str]
) -> ApprovalRequest:
    effects: dict[str, str] = {}
    for s in plan.steps:
        spec = registry.spec(s.tool or "") if s.action == "tool_call" else None
        effects[s.id] = spec.side_effects if spec is not None else "none"
    return ApprovalRequest(plan, registry, tuple(steps), reason, tuple(reused), effects)


async def ask(callback: ApprovalCallback | None, request: ApprovalRequest) -> bool:
    """The callback's answer (awaited if it is async); no callback means no."""
    if callback is None:
        return False
    answer = callback(request)
    if inspect.isawaitable(answer):
        answer = await answer
    return bool(answer)
