"""The planner may write stages: its instructions describe them, its schema allows them, and
a staged answer becomes a staged plan; bad stages go back to the model with their codes."""

from __future__ import annotations

from typing import Any

from planrail.plan.tools import ToolRegistry
from planrail.planner import PLANNER_INSTRUCTIONS, Planner, plan_schema
from planrail.planner.prompt import STAGE_SCHEMA
from planrail.testing.llm import ScriptedLLM

from .conftest import Kit
from .plans import GOAL


def staged(stages: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "goal": GOAL,
        "steps": [
            {"id": "find", "action": "tool_call", "tool": "search",
             "args": {"query": "graph planning"}, "depends_on": []},
            {"id": "acct", "action": "tool_call", "tool": "create_account",
             "args": {"name": "Alice", "email": "a@x.org"}, "depends_on": []},
        ],
        "stages": stages,
    }  # fmt: skip


def test_the_instructions_and_the_schema_allow_stages() -> None:
    """The instructions explain stages and their rules; the plan schema has a stages list of
    {id, goal, steps, confirm}."""
    assert '"stages" is a list of' in PLANNER_INSTRUCTIONS
    assert "no step may depend on a step of a\nlater stage" in PLANNER_INSTRUCTIONS
    schema = plan_schema(ToolRegistry())
    assert schema["properties"]["stages"] == {"type": "array", "items": STAGE_SCHEMA}
    assert set(STAGE_SCHEMA["properties"]) == {"id", "goal", "steps", "confirm"}


async def test_a_staged_answer_becomes_a_staged_plan(kit: Kit) -> None:
    """The model's stages are kept as written."""
    answer = staged(
        [
            {"id": "research", "goal": "Find papers", "steps": ["find"]},
            {"id": "signup", "goal": "Alice has an account", "steps": ["acct"], "confirm": True},
        ]
    )
    result = await Planner(ScriptedLLM([answer]), kit.tools).plan(GOAL)
    assert [(s.id, s.steps, s.confirm) for s in result.plan.stages] == [
        ("research", ("find",), False),
        ("signup", ("acct",), True),
    ]


async def test_invalid_stages_are_sent_back_with_their_codes(kit: Kit) -> None:
    """A stage naming an unknown step is a validation error: the repair prompt names its code,
    and the corrected answer is accepted."""
    bad = staged([{"id": "research", "goal": "Find papers", "steps": ["find", "serach"]}])
    good = staged([{"id": "research", "goal": "Find papers", "steps": ["find"]}])
    llm = ScriptedLLM([bad, good])
    result = await Planner(llm, kit.tools).plan(GOAL)
    assert "[unknown_stage_step]" in llm.requests[1].messages[-1].content
    assert result.plan.stages[0].steps == ("find",)
