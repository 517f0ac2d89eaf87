"""A goal no plan could hold (empty, or longer than a plan's strings may be), or a run id no
run should have, is refused before any model is asked (and paid). A goal that is not a
``str`` is a TypeError."""

from __future__ import annotations

import pytest

from planrail.agent import Agent, approve_all
from planrail.errors import ExecutionError
from planrail.plan.loader import PlanLimits
from planrail.testing.llm import ScriptedLLM

from .conftest import Kit
from .plans import good_plan


@pytest.mark.parametrize(
    ("goal", "reason"),
    [
        ("", "the goal is empty"),
        (" \n\t", "the goal is empty"),
        ("x" * (PlanLimits().max_string_length + 1), "a plan's strings hold at most 262,144"),
    ],
    ids=["empty", "blank", "too-long"],
)
async def test_a_goal_no_plan_could_hold_is_invalid_without_a_model_call(
    kit: Kit, goal: str, reason: str
) -> None:
    """The long goal was sent to the model twice (its every plan invalid: the goal is copied
    into the plan) before planning gave up; the empty one was planned for."""
    llm = ScriptedLLM([good_plan()] * 3)
    result = await Agent(llm, kit.tools, approval=approve_all).run(goal)
    assert result.status == "invalid"
    assert reason in (result.reason or "")
    assert llm.requests == []
    assert kit.calls == []


@pytest.mark.parametrize("goal", [None, 42, b"bytes"])
async def test_a_goal_that_is_not_a_str_is_a_type_error(kit: Kit, goal: object) -> None:
    llm = ScriptedLLM([good_plan()])
    with pytest.raises(TypeError, match="the goal must be text"):
        await Agent(llm, kit.tools, approval=approve_all).run(goal)  # type: ignore[arg-type]
    assert llm.requests == []


@pytest.mark.parametrize("run_id", ["", "a\nb", "x" * 257])
def test_a_run_id_no_run_should_have_is_refused_when_the_agent_is_made(
    kit: Kit, run_id: str
) -> None:
    """As ``Execution`` refuses it, but before any model is asked (it was found only when
    the first plan's run was built, after planning; ``""`` meant a generated id)."""
    llm = ScriptedLLM([good_plan()])
    with pytest.raises(ExecutionError, match="the run id"):
        Agent(llm, kit.tools, approval=approve_all, run_id=run_id)
    assert llm.requests == []


def test_a_run_id_that_leaves_no_room_for_its_replans_ids_is_refused(kit: Kit) -> None:
    """Replan N runs as ``ID-rN``: an id of 254 characters with 3 replans would reach the
    third replan's run and be refused there, mid-run."""
    llm = ScriptedLLM([good_plan()])
    with pytest.raises(ExecutionError, match="replans' ids"):
        Agent(llm, kit.tools, approval=approve_all, run_id="x" * 254, max_replans=3)
    Agent(llm, kit.tools, approval=approve_all, run_id="x" * 253, max_replans=3)  # fits
    Agent(llm, kit.tools, approval=approve_all, run_id="x" * 256)  # no replans
