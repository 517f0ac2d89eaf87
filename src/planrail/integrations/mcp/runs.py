"""How ``planrail mcp serve`` starts and resumes runs: through the one run path
(:func:`planrail.runs.prepare` / :func:`planrail.runs.resume`).

Kept apart from the MCP wiring so the server's tools stay thin. The approver of a served run
is the answer of the MCP elicitation the client's user gave (asked before the run, see
``server.py``): yes runs the plan, with an approval that pins its MCP tools' schemas; no
refuses it; no answer (a client without elicitation, a dismissed question) stores the run
``awaiting_approval`` for ``planrail approve``.

A served run runs under the server's security policy (``planrail mcp serve --policy FILE
--strict``), stored with the run as every door stores it; a run resumed without one keeps the
policy it was started under, and one started under another is resumed under the server's only
with ``policy_override`` (``--override-policy``; the run path records it as a
``policy_overridden`` event, else refuses with ``PolicyMismatchError``). No one is asked about
a call the policy holds back: it is refused.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from planrail.agent.approval import side_effecting_steps as needs_approval
from planrail.clock import SYSTEM_CLOCK
from planrail.engine.approval import approval_record, defer, refuse_all
from planrail.engine.executor import Execution
from planrail.engine.run_ids import failure_mode_of
from planrail.errors import PlanValidationError
from planrail.integrations.mcp.question import question
from planrail.integrations.mcp.tools import bind_approval
from planrail.plan.model import Plan
from planrail.plan.tools import ToolRegistry
from planrail.plan.validate import ValidationReport, check_plan
from planrail.policies.security import SecurityPolicy
from planrail.runs import prepare
from planrail.runs import resume as resume_execution
from planrail.runs.build import validation_options
from planrail.store.base import Store

__all__ = ["Ask", "How", "Outcome", "checked", "needs_approval", "resume", "start", "summary"]

Ask = Callable[[str], Awaitable[bool | None]]
"""Asks a person to approve (the text describes the plan): yes, no, or no answer (None)."""


@dataclass(frozen=True)
class How:
    """How a run runs, as ``run_plan``/``resume_run`` are told (``planrail run``'s and
    ``resume``'s ``--max-concurrency`` and ``--fail-fast``/``--no-fail-fast``): None keeps the
    default, or on a resume the run's stored value; given, it is the run's from then on."""

    max_concurrency: int | None = None
    fail_fast: bool | None = None

    def options(self) -> dict[str, Any]:
        return {
            "max_concurrency": self.max_concurrency,
            "failure_mode": failure_mode_of(self.fail_fast),
        }


@dataclass(frozen=True, slots=True)
class Outcome:
    run_id: str
    status: str
    error: str | None = None
    output: Any = None
    errors: tuple[dict[str, Any], ...] = ()
    """The issues of a plan that is ``invalid`` (``{code, step, path, message}``)."""


def checked(plan: Any, registry: ToolRegistry, security: SecurityPolicy | None) -> ValidationReport:
    """``plan`` validated as a run under ``security`` validates it (a strict policy makes a
    placeholder in a side-effecting step's arguments an error)."""
    return check_plan(plan, registry, options=validation_options(security))


def summary(plan: Plan, registry: ToolRegistry, steps: list[str]) -> str:
    """What the person approving ``plan`` reads: the approval screen's data as text, every
    text the agent wrote escaped onto one line (:mod:`~planrail.integrations.mcp.question`)."""
    return question(plan, registry, steps)


async def start(
    plan: Plan,
    registry: ToolRegistry,
    store: Store,
    run_id: str | None,
    ask: Ask | None,
    security: SecurityPolicy | None = None,
    how: How | None = None,
) -> Outcome:
    pending = needs_approval(plan, registry)
    answer = None
    if pending and ask is not None:
        answer = await ask(summary(plan, registry, pending))
    approval = None
    if answer:
        record = approval_record(plan.hash, "mcp elicitation", SYSTEM_CLOCK.now(), pending)
        approval = bind_approval(record, plan, registry)
    execution = prepare(
        plan,
        registry,
        store=store,
        run_id=run_id,
        approval=approval,
        approver=refuse_all if answer is False else defer,
        security=security,
        **(how or How()).options(),
    )
    return await _outcome(execution, refused=answer is False)


async def resume(
    run_id: str,
    registry: ToolRegistry,
    store: Store,
    security: SecurityPolicy | None = None,
    *,
    policy_override: bool = False,
    how: How | None = None,
) -> Outcome:
    """Continue run ``run_id``; under ``security`` it started under another policy only with
    ``policy_override`` (the run path records it, else raises ``PolicyMismatchError``)."""
    if store.get_run(run_id) is None:
        return Outcome(run_id, "unknown", f"no run '{run_id}' in this store")
    try:
        execution = resume_execution(
            run_id,
            registry,
            store=store,
            approver=defer,
            security=security,
            policy_override=policy_override,
            **(how or How()).options(),
        )
    except PlanValidationError as exc:  # under the policy it would resume under
        issues = tuple(i.to_dict() for i in exc.issues)
        return Outcome(run_id, "invalid", f"{exc.message}: nothing was run", errors=issues)
    return await _outcome(execution)


async def _outcome(execution: Execution, *, refused: bool = False) -> Outcome:
    """Run ``execution``; what the client is told is its result as the store keeps it
    (secrets redacted: the client is an agent, and what it reads goes into a model's
    context)."""
    result = (await execution.run()).redacted(execution.redactor)
    status = "refused" if refused and result.status == "awaiting_approval" else result.status
    return Outcome(result.run_id, status, result.why, result.output)
