"""End to end through the real ``openai`` SDK against the local OpenAI-compatible test server."""

from __future__ import annotations

import json

from planrail.agent import Agent, approve_all
from planrail.llm.openai_client import OpenAIClient
from planrail.policies.security import Rule, SecurityPolicy
from planrail.testing.llm_server import LLMTestServer, Reply

from .conftest import Kit
from .plans import FIRST_ANSWER_STEPS, GOAL, fenced, good_plan


async def test_flawed_first_answer_is_repaired_then_executed(
    server: LLMTestServer, kit: Kit, openai_llm: OpenAIClient
) -> None:
    """A fenced first answer with an aliased action, an undeclared dependency and an unknown
    tool becomes a valid plan: the mechanical fixes need no model call, the repair request
    lists the validator's issues, and the repaired plan runs."""
    server.add(
        fenced({"goal": GOAL, "steps": FIRST_ANSWER_STEPS}),
        Reply.json(good_plan()),
        "Two papers on graph planning.",
    )
    result = await Agent(openai_llm, kit.tools, approval=approve_all).run(GOAL)

    assert result.status == "succeeded", result.reason
    first, repair, _step = server.completions
    fmt = first.response_format
    assert fmt["type"] == "json_schema"
    shapes = fmt["json_schema"]["schema"]["properties"]["steps"]["items"]["anyOf"]
    tools = [s["properties"]["tool"]["enum"] for s in shapes if "tool" in s["properties"]]
    assert tools == [["search"], ["create_account"], ["send_email"]]
    assert ["llm_call"] in [s["properties"].get("action", {}).get("enum") for s in shapes]
    # The repair request that reached the server: the previous answer, then the issues.
    assert repair.messages[-2]["role"] == "assistant"
    asked = repair.messages[-1]["content"]
    assert "[unknown_tool] step 'acct'" in asked
    assert "no tool named 'create_acount'" in asked
    assert "create_account" in asked
    assert "read as 'tool_call'" in asked  # fixed automatically, and said so
    assert "added 'summary' to the dependencies of 'mail'" in asked
    assert [a.kind for a in result.attempts] == ["plan", "repair"]
    assert [i.code for i in result.attempts[0].issues] == ["unknown_tool"]
    assert result.attempts[1].issues == []
    assert kit.names() == ["search", "create_account", "send_email"] or kit.names() == [
        "create_account",
        "search",
        "send_email",
    ]
    assert kit.calls[-1][1]["body"] == "Two papers on graph planning."
    assert result.output == {"message": "m_3"}
    assert result.usage["calls"] == 3


async def test_llm_step_prompt_holds_goal_first_and_only_its_inputs(
    server: LLMTestServer, kit: Kit, openai_llm: OpenAIClient
) -> None:
    """The prompt of an llm_call step, as the server received it, starts with the goal anchor,
    contains the inputs it references and nothing from unrelated steps or the planning."""
    server.add(Reply.json(good_plan()), "A summary.")
    result = await Agent(openai_llm, kit.tools, approval=approve_all).run(GOAL)

    assert result.status == "succeeded", result.reason
    step_request = server.completions[-1]
    messages = step_request.messages
    assert messages[0]["content"].startswith(f"Goal: {GOAL}")
    text = step_request.text
    # the referenced titles arrive as data, in a marked block after the task
    block = text.split('<data name="1">', 1)[1].split("</data>", 1)[0]
    assert json.loads(block) == ["graph planning 1", "graph planning 2"]
    for unrelated in ("alice@example.com", "u_1", "create_account", "You are a planner"):
        assert unrelated not in text
    assert result.run is not None
    assert result.run.steps["summary"].usage["calls"] == 1
    assert result.run.steps["summary"].usage["input_tokens"] > 0


async def test_llm_step_with_output_schema_gets_structured_output(
    server: LLMTestServer, kit: Kit, openai_llm: OpenAIClient
) -> None:
    """An llm_call step with an output_schema is asked with JSON-Schema structured output,
    and a later step uses a field of its answer."""
    plan = good_plan()
    plan["steps"][1]["output_schema"] = {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    }
    plan["steps"][3]["args"]["body"] = "${summary.text}"
    server.add(Reply.json(plan), Reply.json({"text": "Short summary."}))
    result = await Agent(openai_llm, kit.tools, approval=approve_all).run(GOAL)

    assert result.status == "succeeded", result.reason
    fmt = server.completions[-1].response_format
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "summary"
    assert kit.calls[-1][1]["body"] == "Short summary."


def _placeholder_plan() -> dict[str, object]:
    plan = good_plan()
    plan["steps"][3]["args"]["user_id"] = "<USER_ID>"  # type: ignore[index]
    return plan


async def test_under_a_strict_policy_the_model_repairs_a_placeholder(
    server: LLMTestServer, kit: Kit, openai_llm: OpenAIClient
) -> None:
    """The planner validates as the run will: a strict policy's placeholder in a step that
    changes the world is an error the model is asked to repair (it was accepted as a plan,
    and then refused by the run with a PlanValidationError out of Agent.run)."""
    server.add(Reply.json(_placeholder_plan()), Reply.json(good_plan()), "A summary.")
    strict = SecurityPolicy(strict=True, rules=(Rule(tool="*", action="allow"),))
    agent = Agent(
        openai_llm,
        kit.tools,
        approval=approve_all,
        security=strict,
        approve_call=lambda request: True,  # the person asked about each derived argument
    )
    result = await agent.run(GOAL)
    assert result.status == "succeeded", result.reason
    assert [a.kind for a in result.attempts] == ["plan", "repair"]
    assert [i.code for i in result.attempts[0].issues] == ["placeholder_literal"]
    assert "[placeholder_literal] step 'mail'" in server.completions[1].messages[-1]["content"]
    [sent] = [args for name, args in kit.calls if name == "send_email"]
    assert sent["user_id"].startswith("u_")  # the account's id, not the placeholder


async def test_a_strict_run_of_a_plan_never_repaired_is_invalid_and_calls_nothing(
    server: LLMTestServer, kit: Kit, openai_llm: OpenAIClient
) -> None:
    server.add(*[Reply.json(_placeholder_plan())] * 2)
    strict = SecurityPolicy(strict=True, rules=(Rule(tool="*", action="allow"),))
    agent = Agent(openai_llm, kit.tools, approval=approve_all, security=strict, max_repairs=1)
    result = await agent.run(GOAL)
    assert result.status == "invalid"
    assert "placeholder_literal" in (result.reason or "")
    assert kit.calls == []


async def test_a_valid_plans_warnings_are_kept_on_its_attempt(
    server: LLMTestServer, kit: Kit, openai_llm: OpenAIClient
) -> None:
    """Without a strict policy the placeholder is a warning: the plan is approved as written,
    and its attempt (and the plan_valid trace event) say what may be a mistake in it."""
    server.add(Reply.json(_placeholder_plan()), "A summary.")
    result = await Agent(openai_llm, kit.tools, approval=approve_all).run(GOAL)
    assert result.status == "succeeded", result.reason
    assert [w.code for w in result.attempts[0].warnings] == ["placeholder_literal"]
    assert result.attempts[0].to_dict()["warnings"][0]["path"] == "$.steps[3].args.user_id"
    valid = [e for e in result.trace if e.type == "plan_valid"]
    assert valid[0].data["warnings"][0]["code"] == "placeholder_literal"
