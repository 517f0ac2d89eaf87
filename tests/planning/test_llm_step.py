"""llm_call steps with a scripted model: prompt shape, output schema, usage."""

from __future__ import annotations

from typing import Any

from planrail.agent import Agent, approve_all, step_messages
from planrail.testing.llm import Scripted, ScriptedLLM
from planrail.types import StepStatus

from .conftest import Kit

GOAL = "Write a haiku about the top paper"

PLAN: dict[str, Any] = {
    "goal": GOAL,
    "steps": [
        {"id": "find", "tool": "search", "args": {"query": "haiku"}},
        {"id": "other", "tool": "search", "args": {"query": "secret-unrelated"}},
        {
            "id": "poem",
            "action": "llm_call",
            "prompt": "Write a haiku about ${find.top}.",
            "output_schema": {
                "type": "object",
                "properties": {"lines": {"type": "array", "items": {"type": "string"}}},
                "required": ["lines"],
            },
            "depends_on": ["find", "other"],
        },
        {
            "id": "review",
            "action": "llm_call",
            "prompt": "Is this a haiku? ${poem.lines}",
            "depends_on": ["poem"],
        },
    ],
    "output": {"first_line": "${poem.lines.0}", "review": "${review}"},
}


async def test_step_sees_goal_first_and_only_referenced_inputs(kit: Kit) -> None:
    """The goal anchor comes first; the step's prompt holds its referenced input, not the
    output of a step it merely waits for, nor any other step's."""
    llm = ScriptedLLM([PLAN, {"lines": ["a", "b", "c"]}, Scripted("Yes.", input_tokens=7)])
    result = await Agent(llm, kit.tools, approval=approve_all).run(GOAL)
    assert result.status == "succeeded", result.reason
    poem = llm.requests[1]
    assert poem.messages[0].content.startswith(f"Goal: {GOAL}")
    assert "Write a haiku about <data 1>." in poem.text  # the reference stands for a block
    assert '<data name="1">\nhaiku 1\n</data>' in poem.text
    assert "secret-unrelated" not in poem.text
    assert "Yes." not in poem.text
    assert poem.schema == PLAN["steps"][2]["output_schema"]
    assert result.output == {"first_line": "a", "review": "Yes."}
    assert result.run is not None
    assert result.run.steps["review"].usage == {"input_tokens": 7, "output_tokens": 1, "calls": 1}


async def test_answer_not_fitting_the_schema_fails_the_step(kit: Kit) -> None:
    """An answer missing a required field fails the step with a message naming the field."""
    llm = ScriptedLLM([PLAN, {"verse": "no lines"}])
    result = await Agent(llm, kit.tools, approval=approve_all).run(GOAL)
    assert result.status == "failed"
    assert result.run is not None
    step = result.run.steps["poem"]
    assert step.status == StepStatus.FAILED
    assert step.error is not None
    assert "missing required field 'lines'" in step.error["message"]
    assert step.error["retryable"] is True


def test_step_messages_shape() -> None:
    """Goal first, then the task, then the inputs in a marked data block with the goal
    restated after it; a schema adds the JSON instruction."""
    messages = step_messages("G", "Do X", {"a": 1}, {"type": "object"})
    assert messages[0].content.startswith("Goal: G\n\n")
    assert messages[1].content.startswith('Do X\n\nInputs:\n<data name="inputs">\n')
    assert "</data>\n\n" in messages[1].content
    assert "The goal is still: G" in messages[1].content
    assert messages[1].content.endswith("nothing else.")


async def test_an_answer_holding_a_key_twice_is_asked_again_not_read_as_its_last_value(
    kit: Kit,
) -> None:
    """``{"lines": [...], "lines": [...]}``: JSON readers keep the last value silently, and a
    dependent would get lines the model may not have meant. The attempt fails naming the
    place (a retryable answer error), and the step's retry asks the model again."""
    plan = {
        **PLAN,
        "steps": [
            *PLAN["steps"][:2],
            {**PLAN["steps"][2], "retry": {"max_attempts": 2, "initial_delay": 0}},
            PLAN["steps"][3],
        ],
    }
    twice = Scripted('{"lines": ["meant", "b", "c"], "lines": ["last"]}')
    llm = ScriptedLLM([plan, twice, {"lines": ["a", "b", "c"]}, "Yes."])
    result = await Agent(llm, kit.tools, approval=approve_all).run(GOAL)
    assert result.status == "succeeded", result.reason
    assert result.output == {"first_line": "a", "review": "Yes."}
    assert result.run is not None
    poem = result.run.steps["poem"]
    assert poem.attempts == 2
    (first,) = [a for a in poem.attempt_history if a.get("error")]
    assert "$.lines" in first["error"]["message"]
    assert "more than once" in first["error"]["message"]
