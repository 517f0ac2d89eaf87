"""The planner with a scripted model: schema, repair loop, bounds, trace, prompts."""

from __future__ import annotations

import pytest

from planrail.plan.tools import ToolRegistry
from planrail.planner import Planner, PlanningError, plan_schema
from planrail.testing.llm import ScriptedLLM

from .conftest import Kit
from .plans import FIRST_ANSWER_STEPS, GOAL, fenced, good_plan


async def test_mechanical_fixes_need_no_model_call(kit: Kit) -> None:
    """Aliases and a missing depends_on are fixed without asking the model again."""
    steps = [dict(s) for s in FIRST_ANSWER_STEPS]
    steps[2] = {**steps[2], "tool": "create_account"}
    llm = ScriptedLLM([fenced({"goal": GOAL, "steps": steps})])
    result = await Planner(llm, kit.tools).plan(GOAL)
    assert len(llm.requests) == 1
    assert result.plan.step("mail").depends_on == ("acct", "summary")
    assert result.plan.step("find").action == "tool_call"
    assert result.plan.step("summary").action == "llm_call"
    assert len(result.attempts[0].changes) == 4


async def test_repair_loop_is_bounded_and_keeps_every_attempt(kit: Kit) -> None:
    """An answer that stays invalid is sent back max_repairs times, then PlanningError
    carries every attempt: the messages, the raw answer and its issues."""
    bads = [{"goal": GOAL, "steps": [{"id": f"x{i}", "tool": "nope"}]} for i in range(3)]
    llm = ScriptedLLM(bads)
    with pytest.raises(PlanningError) as info:
        await Planner(llm, kit.tools, max_repairs=2).plan(GOAL)
    err = info.value
    assert len(llm.requests) == 3
    assert len(err.attempts) == 3
    assert [a.kind for a in err.attempts] == ["plan", "repair", "repair"]
    assert all(a.raw and a.issues[0].code == "unknown_tool" for a in err.attempts)
    assert err.attempts[2].messages[-1]["content"].startswith("Your plan cannot be executed")
    assert str(err).startswith("no valid plan after 3 attempts (2 repairs allowed): [unknown_tool]")


async def test_the_goal_anchor_is_the_users_goal(kit: Kit) -> None:
    """The plan's goal is the goal as the user stated it, whatever the model wrote."""
    plan = good_plan(goal="something else")
    result = await Planner(ScriptedLLM([plan]), kit.tools).plan(GOAL)
    assert result.plan.goal == GOAL


async def test_planning_prompt_holds_the_catalog(kit: Kit) -> None:
    """The request carries every tool's name, description and schemas, and the goal."""
    llm = ScriptedLLM([good_plan()])
    await Planner(llm, kit.tools).plan(GOAL)
    request = llm.requests[0]
    system = request.messages[0].content
    for text in ("send_email", "Send an email to a user.", '"user_id"', '"message_id"'):
        assert text in system
    assert request.messages[-1].content.startswith(f"Goal: {GOAL}")
    assert request.schema == plan_schema(ToolRegistry(kit.tools))
    assert request.schema_name == "plan"


async def test_a_bare_list_of_steps_is_accepted(kit: Kit) -> None:
    """An answer that is just the steps list is read as a plan."""
    result = await Planner(ScriptedLLM([good_plan()["steps"]]), kit.tools).plan(GOAL)
    assert [s.id for s in result.plan.steps] == ["find", "summary", "acct", "mail"]


def test_schema_without_llm_steps() -> None:
    """llm_steps=False leaves no llm_call shape among the step shapes; no tools, no tool shape."""
    schema = plan_schema(ToolRegistry(), llm_steps=False)
    shapes = schema["properties"]["steps"]["items"]["anyOf"]
    actions = [s["properties"].get("action", {}).get("enum") for s in shapes]
    assert actions == [["condition_check"]]
