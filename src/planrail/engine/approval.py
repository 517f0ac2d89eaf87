"""The approver seam: who says yes before a plan that changes the world runs.

Every run goes through one gate (:meth:`planrail.Execution.iter`): when a step of the plan
needs approval (:mod:`planrail.plan.effects`) and the run holds no approval for the plan's
current hash, its **approver** is shown an :class:`ApprovalRequest` and answers

- ``True``: approved — the approval record (who, when, which hash) is stored with the run;
- ``False``: refused — nothing runs; the run ends ``awaiting_approval`` with the refusal;
- ``None``: no decision now — the run is stored ``awaiting_approval`` (it needs a store) and
  ``planrail approve RUN_ID`` (or :func:`planrail.engine.operations.approve`) decides later.

Implementations: :func:`approve_all` (``--yes``, ``approve=True``), :func:`refuse_all`,
:func:`defer` (store it), the CLI's terminal prompt, any Python callback. A run whose plan
needs approval and that has no approver does not start (:class:`ApprovalRequiredError`).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from planrail.errors import ApprovalRefusedError
from planrail.plan.compiled import CompiledPlan
from planrail.plan.effects import Effect
from planrail.plan.model import Plan, Step
from planrail.plan.provenance import Provenance
from planrail.plan.secrets import Redactor
from planrail.plan.tools import ToolRegistry

if TYPE_CHECKING:
    from planrail.engine.approval_view import ApprovalView

log = logging.getLogger("planrail.approval")

__all__ = [
    "ApprovalRequest",
    "ApprovalRequiredError",
    "Approver",
    "approval_record",
    "approve_all",
    "ask",
    "defer",
    "label_of",
    "refuse_all",
    "strict_answer",
    "value_sources",
]


class ApprovalRequiredError(ApprovalRefusedError):
    """The plan has steps that need approval and the run was given no way to get it."""

    code = "approval_required"


@dataclass(frozen=True)
class ApprovalRequest:
    """What an approver is asked to approve."""

    plan: Plan
    registry: ToolRegistry
    steps: tuple[str, ...]
    """The steps that need approval (those already finished in a reused run are left out)."""
    reason: str = "plan"
    """``plan`` for a first plan, ``replan N`` for the N-th replan, ``resume`` for a resume."""
    reused: tuple[str, ...] = ()
    """Finished steps whose outputs the plan reuses (they will not run again)."""
    side_effects: dict[str, str] = field(default_factory=dict)
    """Each step's side-effect class (``none`` for steps that call no tool)."""
    plan_hash: str = ""
    """The hash the approval will be bound to."""
    run_id: str | None = None
    provenance: Provenance | None = None
    """The run's provenance (trusted sources, the goal, literals copied from what the plan's
    author saw); ``None``: computed from the plan alone."""
    outputs: Mapping[str, Any] = field(default_factory=dict)
    """The outputs of the reused steps (references into them have known values)."""
    previous: Plan | None = None
    """The plan version approved before this one (a replan's), for the difference."""
    redactor: Redactor | None = None
    """The run's redactor: secret values are masked on every approval screen."""
    compiled: CompiledPlan | None = None
    """The run's compiled plan (``None``: compiled from ``plan`` when first needed)."""

    @property
    def compiled_plan(self) -> CompiledPlan:
        """What validation learned about ``plan``: its references, parsed strings, effects."""
        if self.compiled is None or self.compiled.plan is not self.plan:
            object.__setattr__(self, "compiled", CompiledPlan.of(self.plan, self.registry))
        assert self.compiled is not None
        return self.compiled

    def sources(self, step_id: str) -> dict[str, list[str]]:
        """Where each argument of ``step_id`` comes from (see :func:`value_sources`)."""
        return value_sources(self.plan, self.plan.step(step_id), self.reused, self.compiled_plan)

    def view(self) -> ApprovalView:
        """The approval screen as data (:mod:`planrail.engine.approval_view`)."""
        from planrail.engine.approval_view import build_view

        return build_view(self)

    @classmethod
    def build(
        cls,
        plan: Plan,
        registry: ToolRegistry,
        effects: Mapping[str, Effect],
        steps: Iterable[str],
        *,
        reason: str = "plan",
        reused: Iterable[str] = (),
        plan_hash: str | None = None,
        run_id: str | None = None,
        provenance: Provenance | None = None,
        outputs: Mapping[str, Any] | None = None,
        previous: Plan | None = None,
        redactor: Redactor | None = None,
        compiled: CompiledPlan | None = None,
    ) -> ApprovalRequest:
        return cls(
            plan,
            registry,
            tuple(steps),
            reason,
            tuple(reused),
            {sid: e.side_effects for sid, e in effects.items()},
            plan.hash if plan_hash is None else plan_hash,
            run_id,
            provenance,
            dict(outputs or {}),
            previous,
            redactor,
            compiled,
        )


Approver = Callable[[ApprovalRequest], "bool | Awaitable[bool | None] | None"]
"""Says yes (``True``), no (``False``) or "later" (``None``) to a plan; may be async. An
attribute ``label`` (a string) names it in the approval record (default: ``callback``)."""


def approve_all(request: ApprovalRequest) -> bool:
    """Approves every plan (the Python form of ``--yes``)."""
    return True


approve_all.label = "approve_all"  # type: ignore[attr-defined]


def refuse_all(request: ApprovalRequest) -> bool:
    """Refuses every plan that needs approval."""
    return False


def defer(request: ApprovalRequest) -> None:
    """Decides nothing now: the run is stored ``awaiting_approval`` for an operator."""
    return None


def label_of(approver: Approver | None) -> str:
    """How an approver is named in approval records."""
    label = getattr(approver, "label", None)
    return label if isinstance(label, str) else "callback"


async def ask(approver: Approver | None, request: ApprovalRequest) -> bool | None:
    """The approver's answer (awaited if async); no approver means no. Only ``True``
    approves: any answer but ``True``, ``False`` or ``None`` is a refusal (an approver
    returning ``input()``'s ``"no"`` — or anything truthy — was taken for a yes)."""
    if approver is None:
        return False
    answer = approver(request)
    if inspect.isawaitable(answer):
        answer = await answer
    return strict_answer(answer, approver)


def strict_answer(answer: object, approver: object) -> bool | None:
    """``answer`` when it is ``True``, ``False`` or ``None``; else ``False``, logged."""
    if answer is True or answer is False or answer is None:
        return answer
    log.warning(
        "approver %r answered %r, not True, False or None: taken as a refusal", approver, answer
    )
    return False


def approval_record(
    plan_hash: str, by: str, at: float, steps: Iterable[str] = (), **extra: Any
) -> dict[str, Any]:
    """The approval as stored with a run: the hash it binds, who approved, when, for what."""
    return {"plan_hash": plan_hash, "by": by, "at": at, "steps": list(steps), **extra}


def _source(step_id: str, plan: Plan, reused: frozenset[str]) -> str:
    producer = plan.by_id.get(step_id)
    if producer is None:
        return f"output of {step_id}"
    kind = "LLM" if producer.action == "llm_call" else "tool"
    if producer.action == "condition_check":
        kind = "condition"
    note = ", reused" if step_id in reused else ""
    return f"{kind} output of {step_id}{note}"


def value_sources(
    plan: Plan,
    step: Step,
    reused: Iterable[str] = (),
    compiled: CompiledPlan | None = None,
) -> dict[str, list[str]]:
    """Where each argument (and the prompt) of ``step`` comes from.

    ``["user"]`` for a literal written in the plan, else one entry per referenced step, e.g.
    ``"tool output of fetch"`` or ``"LLM output of summarize"``. The references are read off
    ``compiled`` (the plan's compiled form; without it, the step alone is compiled).
    """
    done = frozenset(reused)
    known = compiled.steps.get(step.id) if compiled is not None else None
    if known is None or known.step is not step:
        known = CompiledPlan.of(Plan(goal=plan.goal, steps=[step])).steps[step.id]
    fields: dict[str, tuple[str, ...]] = {name: ("args", name) for name in step.args}
    if step.prompt is not None:
        fields["(prompt)"] = ("prompt",)
    sources: dict[str, list[str]] = {}
    for name, where in fields.items():
        producers = list(dict.fromkeys(r.step for r in known.references_under(*where)))
        sources[name] = [_source(p, plan, done) for p in producers] or ["user"]
    return sources
