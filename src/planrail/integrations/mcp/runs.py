"""How ``planrail mcp serve`` starts and resumes runs: through the one run path.

Kept apart from the MCP wiring so the server's tools stay thin: :func:`start` gates a plan
(the approver is an MCP elicitation when the client supports one; otherwise the run is stored
``awaiting_approval`` for ``planrail approve``) and executes it; :func:`resume` continues a
stored run with its stored approval.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from planrail.agent.approval import side_effecting_steps as needs_approval
from planrail.clock import SYSTEM_CLOCK
from planrail.engine.executor import Execution, new_run_id
from planrail.integrations.mcp.tools import bind_approval
from planrail.plan.model import Plan
from planrail.plan.tools import ToolRegistry
from planrail.plan.validate import validate
from planrail.store.base import RunRecord, Store

__all__ = ["Ask", "Outcome", "needs_approval", "resume", "start", "summary"]

Ask = Callable[[str], Awaitable[bool | None]]
"""Asks a person to approve (the text describes the plan): yes, no, or no answer (None)."""


@dataclass(frozen=True, slots=True)
class Outcome:
    run_id: str
    status: str
    error: str | None = None
    output: Any = None


def summary(plan: Plan, registry: ToolRegistry, steps: list[str]) -> str:
    lines = [f"planrail: approve this plan? Goal: {plan.goal or '(none)'}"]
    for step in plan.steps:
        spec = registry.spec(step.tool or "")
        effect = spec.side_effects if spec is not None else "none"
        mark = "changes the world" if step.id in steps else "read-only"
        lines.append(f"- {step.id}: {step.tool or step.action} ({effect}; {mark})")
    return "\n".join(lines)


async def start(
    plan: Plan, registry: ToolRegistry, store: Store, run_id: str | None, ask: Ask | None
) -> Outcome:
    run_id = run_id or new_run_id()
    pending = needs_approval(plan, registry)
    now = SYSTEM_CLOCK.now()
    by = "not required"
    if pending:
        answer = None if ask is None else await ask(summary(plan, registry, pending))
        if answer is False:
            return Outcome(run_id, "refused", "approval refused: nothing was run")
        if answer is None:
            store.create_run(
                RunRecord(
                    run_id=run_id,
                    plan=plan.to_json_data(),
                    plan_hash=plan.hash,
                    status="awaiting_approval",
                    created_at=now,
                    updated_at=now,
                )
            )
            return Outcome(run_id, "awaiting_approval", "the plan waits for approval")
        by = "mcp elicitation"
    approval = bind_approval({"plan_hash": plan.hash, "at": now, "by": by}, plan, registry)
    return await _execute(plan, registry, store, run_id, approval)


async def resume(run_id: str, registry: ToolRegistry, store: Store) -> Outcome:
    record = store.get_run(run_id)
    if record is None:
        return Outcome(run_id, "unknown", f"no run '{run_id}' in this store")
    report = validate(record.plan, registry)
    if report.plan is None:
        return Outcome(run_id, "invalid", "the stored plan is no longer valid with these tools")
    if record.approval is None:
        if needs_approval(report.plan, registry):
            return Outcome(run_id, "awaiting_approval", "the plan waits for approval")
        approval: dict[str, Any] = {"plan_hash": report.plan.hash, "at": SYSTEM_CLOCK.now()}
    else:
        approval = record.approval
    approval = bind_approval(dict(approval), report.plan, registry)
    return await _execute(report.plan, registry, store, run_id, approval)


async def _execute(
    plan: Plan, registry: ToolRegistry, store: Store, run_id: str, approval: dict[str, Any]
) -> Outcome:
    result = await Execution(plan, registry, run_id=run_id, store=store, approval=approval).run()
    return Outcome(result.run_id, result.status, result.error, result.output)
