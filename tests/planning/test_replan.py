"""Replanning: finished steps are reused, not re-executed; the number of replans is bounded."""

from __future__ import annotations

from typing import Any

from planrail.agent import Agent, approve_all
from planrail.testing.llm import ScriptedLLM

from .conftest import Kit
from .plans import GOAL

PLAN: dict[str, Any] = {
    "goal": GOAL,
    "steps": [
        {"id": "find", "tool": "search", "args": {"query": "graph planning"}},
        {"id": "acct", "tool": "create_account", "args": {"name": "Alice", "email": "a@x.org"}},
        {
            "id": "mail",
            "tool": "send_email",
            "args": {"user_id": "${acct.user_id}", "subject": "Papers", "body": "${find.top}"},
            "depends_on": ["acct", "find"],
        },
    ],
}


def _retry_mail(step_id: str) -> dict[str, Any]:
    """A replan answer: one new step that reuses the finished steps' outputs."""
    return {
        "goal": GOAL,
        "steps": [
            {
                "id": step_id,
                "tool": "send_email",
                "args": {
                    "user_id": "${acct.user_id}",
                    "subject": "Papers (again)",
                    "body": "${find.top}",
                },
                "depends_on": ["acct", "find"],
            }
        ],
    }


async def test_replan_reuses_finished_steps(kit: Kit) -> None:
    """After send_email fails for good, the replan's new step references the finished steps;
    they are restored, not run again, and the replan prompt carries their outputs and the
    failure."""
    kit.fail_email = 1
    llm = ScriptedLLM([PLAN, _retry_mail("mail_again")])
    approvals: list[str] = []

    def approve(request: Any) -> bool:
        approvals.append(f"{request.reason}: {','.join(request.steps)} reused={request.reused}")
        return True

    result = await Agent(llm, kit.tools, approval=approve, max_replans=2).run(GOAL)

    assert result.status == "succeeded", result.reason
    assert result.replans == 1
    assert kit.names().count("search") == 1
    assert kit.names().count("create_account") == 1
    assert kit.names().count("send_email") == 2
    assert kit.calls[-1][1] == {
        "user_id": "u_1",
        "subject": "Papers (again)",
        "body": "graph planning 1",
    }
    restored = {e.step_id for e in result.trace if e.type == "step_restored"}
    assert restored == {"find", "acct"}
    prompt = llm.requests[1].messages[-1].content
    assert "mail server rejected the message" in prompt
    assert '"user_id": "u_1"' in prompt
    assert "fields: user_id, name" in prompt
    assert "Do not use these step ids again: acct, find, mail" in prompt
    assert approvals == [
        "plan: acct,mail reused=()",
        "replan 1: mail_again reused=('find', 'acct')",
    ]
    assert result.plan is not None
    assert [s.id for s in result.plan.steps] == ["find", "acct", "mail_again"]
    assert len(result.runs) == 2


async def test_replans_are_bounded(kit: Kit) -> None:
    """A step that keeps failing is replanned at most max_replans times, then the run fails."""
    kit.fail_email = 10
    llm = ScriptedLLM([PLAN, _retry_mail("mail2"), _retry_mail("mail3"), _retry_mail("mail4")])
    result = await Agent(llm, kit.tools, approval=approve_all, max_replans=2).run(GOAL)

    assert result.status == "failed"
    assert result.replans == 2
    assert len(llm.requests) == 3
    assert llm.remaining == 1
    assert kit.names().count("create_account") == 1
    assert kit.names().count("send_email") == 3
    assert "mail server rejected the message" in (result.reason or "")


async def test_no_replan_unless_allowed(kit: Kit) -> None:
    """By default (max_replans=0) a failed run is reported as failed, with no model call."""
    kit.fail_email = 1
    llm = ScriptedLLM([PLAN])
    result = await Agent(llm, kit.tools, approval=approve_all).run(GOAL)
    assert result.status == "failed"
    assert result.replans == 0
    assert len(llm.requests) == 1


async def test_replan_repeating_a_finished_step_is_fixed_without_the_model(kit: Kit) -> None:
    """A replan that writes a finished step out again has it dropped (it will not run twice)."""
    kit.fail_email = 1
    again = _retry_mail("mail_again")
    again["steps"].insert(0, PLAN["steps"][0])
    llm = ScriptedLLM([PLAN, again])
    result = await Agent(llm, kit.tools, approval=approve_all, max_replans=1).run(GOAL)
    assert result.status == "succeeded", result.reason
    assert kit.names().count("search") == 1
    assert any("repeats a finished step" in c for c in result.attempts[-1].changes)
