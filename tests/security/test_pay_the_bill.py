"""The scenario the security work exists for: a bill whose text was written by an attacker.

The plan reads a bill and pays it. Under the strict policy the payee may be paid without a
person's say only when the user typed it; a payee taken from the document (directly, or
laundered through an LLM step) needs a runtime approval, and without one the attacker's payee
never reaches the payment tool.
"""

from __future__ import annotations

from typing import Any

import pytest

from planrail.engine.actions import Call
from planrail.policies.security import CallApprovalRequest, Rule, SecurityPolicy
from planrail.types import StepStatus

from .kit import ATTACKER, LEGIT, World, pay_plan, plan_of, run

STRICT = SecurityPolicy(
    strict=True,
    rules=(
        Rule(tool="pay_bill", action="allow"),
        Rule(tool="pay_bill", arg="amount", sources=("tool:read_document",), action="allow"),
    ),
)
"""Paying bills is allowed; the amount may come from the bill; the payee may not."""


async def test_payee_from_the_document_requires_approval_and_is_never_paid_without_it() -> None:
    """No approver: the payment step fails with the policy's reason, the payment tool is never
    called, and the decision is in the run's events."""
    world = World()
    reg = world.registry()
    result = await run(plan_of(pay_plan(), reg), reg, security=STRICT)
    assert result.status == "failed"
    pay = result.steps["pay"]
    assert pay.status == StepStatus.FAILED
    assert pay.error is not None
    assert pay.error["type"] == "CallNotApprovedError"
    assert "'payee' derives from tool:read_document" in pay.error["message"]
    assert world.called("pay_bill") == []
    assert ATTACKER not in repr(world.calls[1:])


async def test_payee_typed_by_the_user_runs_without_approval() -> None:
    """A user-literal payee (amount from the bill) is paid with no approver at all."""
    world = World()
    reg = world.registry()
    result = await run(plan_of(pay_plan(payee=LEGIT), reg), reg, security=STRICT)
    assert result.status == "succeeded", result.steps["pay"].error
    assert world.called("pay_bill") == [{"payee": LEGIT, "amount": 42.5}]


async def test_a_refusing_approver_sees_the_attacker_payee_and_keeps_it_from_the_tool() -> None:
    """The approver is shown the resolved arguments and their hash; saying no fails the step
    and the payment tool is not called."""
    world = World()
    reg = world.registry()
    asked: list[CallApprovalRequest] = []

    def approver(request: CallApprovalRequest) -> bool:
        asked.append(request)
        return False

    result = await run(plan_of(pay_plan(), reg), reg, security=STRICT, approve_call=approver)
    assert result.steps["pay"].status == StepStatus.FAILED
    assert world.called("pay_bill") == []
    (request,) = asked
    assert (request.step_id, request.tool) == ("pay", "pay_bill")
    assert request.args == {"payee": ATTACKER, "amount": 42.5}
    assert request.args_hash.startswith("sha256:")
    assert request.decision.action == "approve"


async def test_an_approved_call_runs_with_exactly_the_approved_arguments() -> None:
    """An approval bound to the arguments' hash lets the call through; one bound to another
    hash is a refusal."""
    for good in (True, False):
        world = World()
        reg = world.registry()

        def approver(request: CallApprovalRequest, good: bool = good) -> dict[str, Any]:
            digest = request.args_hash if good else "sha256:" + "0" * 64
            return {"args_hash": digest, "by": "alice"}

        result = await run(plan_of(pay_plan(), reg), reg, security=STRICT, approve_call=approver)
        assert (result.status == "succeeded") is good
        assert world.called("pay_bill") == ([{"payee": ATTACKER, "amount": 42.5}] if good else [])


async def test_a_payee_laundered_through_an_llm_step_still_needs_approval() -> None:
    """An LLM that read the bill and "extracted" the payee does not make it the user's."""
    world = World()
    reg = world.registry()

    async def llm(call: Call) -> Any:
        return ATTACKER  # the model obeyed the injected instructions

    data = {
        "goal": "Pay this month's electricity bill",
        "steps": [
            {"id": "doc", "tool": "read_document", "args": {"path": "bill.pdf"}},
            {
                "id": "extract",
                "action": "llm_call",
                "prompt": "Payee of: ${doc.note}",
                "depends_on": ["doc"],
            },
            {
                "id": "pay",
                "tool": "pay_bill",
                "args": {"payee": "${extract}", "amount": 1},
                "depends_on": ["extract"],
            },
        ],
    }
    result = await run(plan_of(data, reg), reg, security=STRICT, handlers={"llm_call": llm})
    assert result.steps["pay"].status == StepStatus.FAILED
    assert "llm:extract" in (result.steps["pay"].error or {})["message"]
    assert world.called("pay_bill") == []


@pytest.mark.parametrize("strict", [False, True])
async def test_a_deny_rule_keeps_an_attacker_payee_out_even_with_an_approver(strict: bool) -> None:
    """``{arg: payee, from: [external], action: deny}`` refuses outright: an approver is not
    even asked."""
    world = World()
    reg = world.registry()
    policy = SecurityPolicy(
        strict=strict,
        rules=(
            *STRICT.rules,
            Rule(
                tool="pay_bill",
                arg="payee",
                sources=("external",),
                action="deny",
                reason="the payee must come from the user",
            ),
        ),
    )
    result = await run(
        plan_of(pay_plan(), reg),
        reg,
        security=policy,
        approve_call=lambda r: pytest.fail("the approver was asked"),
    )
    err = result.steps["pay"].error or {}
    assert err["type"] == "PolicyDeniedError"
    assert "the payee must come from the user" in err["message"]
    assert world.called("pay_bill") == []
