"""A plan cannot waive its own approval: a step's ``requires_approval: false`` counts as unset
on every way in (the model's plan through the Agent, streamed or not, and a plan given to
the library), so a step whose tool changes the world still waits for a person's yes.
(The MCP door: ``tests/integrations/mcp/test_serve.py``.)"""

from __future__ import annotations

import json
from typing import Any

import pytest

import planrail
from planrail.agent import Agent
from planrail.testing.llm import ScriptedLLM

from .conftest import Kit
from .plans import GOAL, good_plan


def waiving_plan() -> dict[str, Any]:
    """The good plan, every step claiming it needs no approval."""
    plan = good_plan()
    for step in plan["steps"]:
        step["requires_approval"] = False
    return plan


@pytest.mark.parametrize("stream", [False, True])
async def test_the_models_waiver_does_not_spare_a_side_effect_its_approval(
    kit: Kit, stream: bool
) -> None:
    """No one to ask (no approval callback): the plan is refused and only the read-only step
    may have run; with the waiver honoured, create_account and send_email were called."""
    llm = ScriptedLLM([json.dumps(waiving_plan()), "A summary."])
    result = await Agent(llm, kit.tools, stream=stream).run(GOAL)
    assert result.status == "refused", result.reason
    assert set(kit.names()) <= {"search"}


async def test_asked_for_the_steps_that_change_the_world_despite_the_waiver(kit: Kit) -> None:
    llm = ScriptedLLM([json.dumps(waiving_plan()), "A summary.", "A summary."])
    asked: list[list[str]] = []

    def approve(request: planrail.agent.ApprovalRequest) -> bool:
        asked.append(list(request.steps))
        return True

    result = await Agent(llm, kit.tools, approval=approve).run(GOAL)
    assert result.status == "succeeded", result.reason
    assert asked == [["acct", "mail"]]


async def test_a_plan_given_to_the_library_cannot_waive_either(kit: Kit) -> None:
    """``planrail.arun`` with no approver: a waived world-changing step is not run (the run
    is refused before its first step), and validation says the waiver does nothing."""
    plan = waiving_plan()
    plan["steps"] = [s for s in plan["steps"] if s["id"] == "acct"]
    plan.pop("output", None)
    with pytest.raises(planrail.ApprovalRequiredError, match="step 'acct'"):
        await planrail.arun(plan, kit.tools)
    assert kit.names() == []
    report = planrail.validate(plan, kit.tools)
    assert [(w.code, w.step) for w in report.warnings] == [("approval_not_waived", "acct")]
