"""Run-time enforcement: the executor consults the policy before every tool call, records each
decision as an event, enforces the tool-call limit, and refuses a plan its approval is not for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from planrail.engine.events import EventType
from planrail.engine.executor import Execution
from planrail.errors import ApprovalRefusedError, RetryableError
from planrail.plan.define import tool
from planrail.plan.tools import ToolRegistry
from planrail.policies.security import (
    ApprovalMismatchError,
    CallApprovalRequest,
    Rule,
    SecurityPolicy,
)
from planrail.store import open_store
from planrail.types import StepStatus

from .kit import ATTACKER, LEGIT, World, pay_plan, plan_of, run

S = StepStatus
ALLOW_ALL = SecurityPolicy(strict=True, rules=(Rule(tool="*", action="allow"),))


async def test_decisions_are_events_in_the_store(tmp_path: Path) -> None:
    """Every vetted tool call leaves a ``policy_decision`` event with the action, the reason
    and each argument's sources, committed to the store with the run."""
    world = World()
    reg = world.registry()
    store = open_store(f"sqlite:///{tmp_path / 'runs.db'}")
    execution = Execution(
        plan_of(pay_plan(), reg),
        reg,
        store=store,
        security=ALLOW_ALL,
        run_id="run_decisions",
        approve=True,
    )
    await execution.run()
    events = [e for e in store.events("run_decisions") if e.type == "policy_decision"]
    by_step = {e.step_id: e.data for e in events}
    assert by_step["doc"]["action"] == "allow"
    assert by_step["pay"]["action"] == "approve"
    assert by_step["pay"]["approved"] is False
    assert by_step["pay"]["sources"]["payee"] == ["tool:read_document", "user"]
    assert by_step["pay"]["args_hash"].startswith("sha256:")
    assert store.get_steps("run_decisions")["pay"].status == S.FAILED


async def test_a_denied_step_fails_alone_and_independent_work_goes_on() -> None:
    """A denial fails that step (dependents skipped) without stopping independent branches."""
    world = World()
    reg = world.registry()
    data = pay_plan()
    data["steps"] += [
        {
            "id": "thanks",
            "tool": "send_email",
            "args": {"to": "me", "body": "paid"},
            "depends_on": ["pay"],
        },
        {"id": "inbox", "tool": "read_inbox", "args": {"folder": "in"}},
    ]
    policy = SecurityPolicy(strict=True, rules=(Rule(tool="send_email", action="allow"),))
    result = await run(plan_of(data, reg), reg, security=policy)
    assert result.steps["pay"].error is not None
    assert result.steps["pay"].error["type"] == "PolicyDeniedError"
    assert result.steps["thanks"].status == S.SKIPPED
    assert result.steps["inbox"].status == S.SUCCEEDED
    assert world.called("pay_bill") == []
    assert world.called("send_email") == []


async def test_a_fan_out_item_that_is_refused_fails_the_step_with_the_policy_error() -> None:
    """Inside a ``for_each``, a refused item fails the step with the policy's error (not an
    exception group), and no payment goes out."""
    world = World()
    reg = world.registry()
    data = {
        "steps": [
            {"id": "all", "tool": "bills", "args": {"month": "May"}},
            {
                "id": "pay",
                "tool": "pay_bill",
                "for_each": "${all}",
                "args": {"payee": "${item.payee}", "amount": "${item.amount}"},
                "depends_on": ["all"],
            },
        ]
    }
    result = await run(plan_of(data, reg), reg, security=ALLOW_ALL)
    err = result.steps["pay"].error or {}
    assert err["type"] == "CallNotApprovedError"
    assert world.called("pay_bill") == []
    assert result.status == "failed"


async def test_an_approval_is_asked_once_per_call_and_reused_for_its_retries() -> None:
    """Retries of an approved call with the same arguments (same hash) are not asked again."""
    attempts: list[int] = []

    @tool(side_effects="keyed", retry={"max_attempts": 3, "initial_delay": 0, "jitter": 0})
    def flaky_pay(payee: str) -> str:
        attempts.append(1)
        if len(attempts) < 3:
            raise RetryableError("busy")
        return "ok"

    @tool(side_effects="none")
    def pick() -> str:
        return LEGIT

    reg = ToolRegistry([flaky_pay, pick])
    asked: list[CallApprovalRequest] = []

    async def approver(request: CallApprovalRequest) -> bool:
        asked.append(request)
        return True

    plan = plan_of(
        {
            "steps": [
                {"id": "who", "tool": "pick"},
                {
                    "id": "pay",
                    "tool": "flaky_pay",
                    "args": {"payee": "${who}"},
                    "depends_on": ["who"],
                },
            ]
        },
        reg,
    )
    result = await run(plan, reg, security=ALLOW_ALL, approve_call=approver)
    assert result.status == "succeeded"
    assert len(attempts) == 3
    assert len(asked) == 1


async def test_a_fallback_tool_call_is_vetted_too() -> None:
    """When a step falls back to another tool, that call goes through the policy as well."""
    world = World()

    @tool(side_effects="unsafe")
    def broken(payee: str) -> str:
        raise ValueError("down")

    reg = ToolRegistry([*world.tools(), broken])
    data = {
        "steps": [
            {"id": "doc", "tool": "read_document", "args": {"path": "bill.pdf"}},
            {
                "id": "pay",
                "tool": "broken",
                "args": {"payee": LEGIT},
                "depends_on": ["doc"],
                "fallback": {"tool": "pay_bill", "args": {"payee": "${doc.payee}", "amount": 1}},
            },
        ]
    }
    policy = SecurityPolicy(strict=True, rules=(Rule(tool="broken", action="allow"),))
    result = await run(plan_of(data, reg), reg, security=policy)
    assert result.steps["pay"].status == S.FAILED
    assert "pay_bill" in (result.steps["pay"].error or {})["message"]
    assert world.called("pay_bill") == []


async def test_the_tool_call_limit_stops_a_runaway_run() -> None:
    """``max_tool_calls`` counts every call (fan-out items included) and stops the run with a
    clear error when one more would pass it."""
    world = World()
    reg = world.registry()
    data = {
        "steps": [
            {"id": "all", "tool": "bills", "args": {"month": "May"}},
            {
                "id": "who",
                "tool": "lookup",
                "for_each": "${all}",
                "args": {"name": "${item.payee}"},
                "depends_on": ["all"],
                "max_parallel": 1,
            },
        ]
    }
    result = await run(plan_of(data, reg), reg, security=SecurityPolicy(max_tool_calls=2))
    assert result.status in ("failed", "cancelled")
    err = result.steps["who"].error or {}
    assert err["type"] == "ToolCallLimitError"
    assert "limit of 2 tool calls" in err["message"]
    assert len(world.calls) == 2
    assert result.error is not None
    assert "max_tool_calls" in result.error


async def test_one_changed_character_in_an_approved_plan_is_refused(tmp_path: Path) -> None:
    """An approval records the plan's hash; the same plan with one character changed is
    refused before anything runs — no tool call, no run in the store."""
    world = World()
    reg = world.registry()
    approved = plan_of(pay_plan(payee=LEGIT), reg)
    approval = {"plan_hash": approved.hash, "by": "alice"}
    tampered = plan_of(pay_plan(payee=LEGIT[:-1] + "T"), reg)
    assert tampered.hash != approved.hash
    store = open_store(f"sqlite:///{tmp_path / 'runs.db'}")
    execution = Execution(
        tampered, reg, approval=approval, store=store, run_id="run_tampered", approve=True
    )
    with pytest.raises(ApprovalMismatchError) as err:
        await execution.run()
    assert isinstance(err.value, ApprovalRefusedError)
    assert "needs its own approval" in err.value.message
    assert world.calls == []
    assert store.get_run("run_tampered") is None
    ok = await run(approved, reg, approval=approval)
    assert ok.status == "succeeded"


async def test_an_approval_without_a_plan_hash_is_no_approval() -> None:
    """An approval record that is not bound to a hash is refused."""
    world = World()
    reg = world.registry()
    with pytest.raises(ApprovalMismatchError):
        await run(plan_of(pay_plan(payee=LEGIT), reg), reg, approval={"by": "alice"})
    assert world.calls == []


async def test_a_replan_sealed_into_an_open_run_needs_its_own_approval() -> None:
    """An open (streamed) plan sealed with an approval for another plan is refused."""
    world = World()
    reg = world.registry()
    plan = plan_of(pay_plan(payee=LEGIT), reg)
    other = plan_of(pay_plan(payee=ATTACKER), reg)
    execution = Execution(
        plan_of({"steps": [plan.to_json_data()["steps"][0]]}, reg),
        reg,
        open_plan=True,
        approval={"plan_hash": other.hash},
        approve=True,
    )
    with pytest.raises(ApprovalMismatchError):
        execution.seal(plan)
    assert world.called("pay_bill") == []


async def test_the_run_records_no_decision_events_without_a_policy() -> None:
    """Without ``security=`` there is no vetting and no ``policy_decision`` event."""
    world = World()
    reg = world.registry()
    seen: list[Any] = []

    class Spy:
        def on_event(self, event: Any) -> None:
            seen.append(event.type)

    await run(plan_of(pay_plan(), reg), reg, observers=[Spy()])
    assert EventType.POLICY_DECISION not in seen
    assert world.called("pay_bill") == [{"payee": ATTACKER, "amount": 42.5}]
