"""A run's security guard: the enforcement point the executor calls before every attempt.

The policy (:class:`~planrail.policies.security.SecurityPolicy`) is a frozen value and decides;
the guard is the run-time side: it counts tool calls, asks the policy, awaits the approval
callback when the answer is *approve*, remembers what was approved, and reports each decision.

The count (:class:`ToolCallCount`) outlives one guard: a resume starts it from the calls the
run's stored ``policy_decision`` events admitted (:func:`admitted`, read when the checkpoint
opens), and an agent shares one over its plan and its replans, as it shares the repeated-call
guard. ``SecurityPolicy.max_tool_calls`` bounds the run, not one process or one plan version.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from planrail.plan.model import Step
from planrail.plan.provenance import Provenance
from planrail.plan.secrets import Redactor
from planrail.policies.security import (
    ApproveCall,
    CallApprovalRequest,
    CallNotApprovedError,
    Decision,
    PolicyDeniedError,
    SecurityPolicy,
    ToolCallLimitError,
    args_digest,
)

__all__ = ["OnDecision", "SecurityGuard", "ToolCallCount", "admitted"]

OnDecision = Callable[[str, int, dict[str, Any]], None]
"""``on_decision(step_id, attempt, data)`` — the executor emits it as a ``policy_decision``
event."""


class ToolCallCount:
    """The tool calls the security guard admitted: of one run over its resumes, or of an
    agent's plan and its replans (one count shared by their executions)."""

    __slots__ = ("admitted",)

    def __init__(self, admitted: int = 0) -> None:
        self.admitted = admitted

    def spent(self, policy: SecurityPolicy) -> bool:
        """Whether ``policy``'s ``max_tool_calls`` is reached: no call would be admitted."""
        limit = policy.max_tool_calls
        return limit is not None and self.admitted >= limit


def admitted(decision: Mapping[str, Any]) -> bool:
    """Whether a ``policy_decision`` event's data admitted its call (what ``max_tool_calls``
    counts): neither a denial (the limit's own included) nor an approval that was not given."""
    return decision.get("action") != "deny" and decision.get("approved") is not False


class SecurityGuard:
    """One run's enforcement point, called right before every attempt of every step."""

    def __init__(
        self,
        policy: SecurityPolicy,
        provenance: Provenance,
        *,
        run_id: str,
        approve_call: ApproveCall | None = None,
        on_decision: OnDecision | None = None,
        redactor: Redactor | None = None,
        calls: ToolCallCount | None = None,
    ) -> None:
        self.policy = policy
        self.provenance = provenance
        self.run_id = run_id
        self.approve_call = approve_call
        self.on_decision = on_decision
        self.redactor = redactor
        self.calls = calls if calls is not None else ToolCallCount()
        """Tool calls admitted so far (by this guard and those it shares the count with)."""
        self._approved: dict[tuple[str, int | None, str, str], dict[str, Any]] = {}

    async def admit(
        self, step: Step, item: int | None, attempt: int, args: Any, available: Any
    ) -> None:
        """Return if the call may go ahead; raise :class:`PolicyDeniedError` (the step fails)
        or :class:`ToolCallLimitError` (the run stops) if not."""
        if step.action != "tool_call" or not step.tool:
            return
        if self.calls.spent(self.policy):
            self._report(step, item, attempt, {"action": "deny", "reason": "tool call limit"})
            raise ToolCallLimitError(
                f"the run reached its limit of {self.policy.max_tool_calls:,} tool calls"
                " (SecurityPolicy.max_tool_calls); it stops here",
                step_id=step.id,
                attempt=attempt,
            )
        resolved = args if isinstance(args, Mapping) else None
        decision = self.policy.decide(step, self.provenance, resolved, available=available)
        data = {**decision.to_dict(), "tool": step.tool}
        if decision.action == "deny":
            self._report(step, item, attempt, data)
            raise PolicyDeniedError(
                f"step '{step.id}': calling '{step.tool}' is denied: {decision.reason}",
                run_id=self.run_id,
                step_id=step.id,
                attempt=attempt,
            )
        if decision.action == "approve":
            digest = args_digest(args)
            data["args_hash"] = digest
            key = (step.id, item, step.tool, digest)
            record = self._approved.get(key)
            if record is None:
                record = await self._ask(step, item, attempt, args, digest, decision)
            if record is None:
                data["approved"] = False
                self._report(step, item, attempt, data)
                how = (
                    "no approver is configured (pass approve_call=)"
                    if self.approve_call is None
                    else "the approver refused"
                )
                raise CallNotApprovedError(
                    f"step '{step.id}': calling '{step.tool}' needs approval"
                    f" ({decision.reason}) and {how}",
                    run_id=self.run_id,
                    step_id=step.id,
                    attempt=attempt,
                )
            self._approved[key] = record
            data["approved"] = True
            data["approval"] = record
        self.calls.admitted += 1
        self._report(step, item, attempt, data)

    async def _ask(
        self, step: Step, item: int | None, attempt: int, args: Any, digest: str, decision: Decision
    ) -> dict[str, Any] | None:
        if self.approve_call is None:
            return None
        shown = self.redactor.args(step.id, args) if self.redactor is not None else args
        request = CallApprovalRequest(
            self.run_id, step.id, step.tool or "", shown, digest, decision, item, attempt
        )
        answer = self.approve_call(request)
        if inspect.isawaitable(answer):
            answer = await answer
        if answer is True:
            return {"args_hash": digest, "by": "approve_call"}
        if isinstance(answer, Mapping) and answer.get("args_hash") == digest:
            return {k: v for k, v in answer.items() if isinstance(v, str | int | float | bool)}
        return None

    def _report(self, step: Step, item: int | None, attempt: int, data: dict[str, Any]) -> None:
        if item is not None:
            data["item"] = item
        if self.on_decision is not None:
            self.on_decision(step.id, attempt, data)
