"""Approval in the agent loop: which steps need a yes, and who is asked.

The approver seam itself lives in :mod:`planrail.engine.approval` (every run, from every way in,
goes through its gate); this module keeps the agent's *approval policies* — functions that
name the steps of a plan that need approval — and re-exports the approvers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from planrail.engine.approval import (
    ApprovalRequest,
    Approver,
    approve_all,
    ask,
    refuse_all,
    value_sources,
)
from planrail.plan.effects import effects_of, needing_approval
from planrail.plan.model import Plan
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

ApprovalCallback = Approver
"""The agent's name for an :data:`~planrail.engine.approval.Approver`."""


def side_effecting_steps(plan: Plan, registry: ToolRegistry) -> list[str]:
    """The default policy: the steps :mod:`planrail.plan.effects` says need approval."""
    return needing_approval(effects_of(plan.steps, registry))


def every_step(plan: Plan, registry: ToolRegistry) -> list[str]:
    """A policy that asks about every plan."""
    return [s.id for s in plan.steps]


ApprovalPolicy = Callable[[Plan, ToolRegistry], Iterable[str]]
"""Which steps of a plan need approval (none: the plan runs without asking)."""
