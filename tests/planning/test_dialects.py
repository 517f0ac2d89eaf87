"""Structured-output dialects and generation control against the local test server: the
strict per-tool schema, each fallback form, a 500 on json_schema, an answer cut off by
max_tokens, a context-length error, a stream without usage, and an empty plan."""

from __future__ import annotations

from typing import Any

import pytest

from planrail.llm import Message
from planrail.llm.dialects import strict_schema
from planrail.llm.errors import LLMContextLengthError, LLMUnavailableError
from planrail.llm.openai_client import DEFAULT_MAX_TOKENS, OpenAIClient
from planrail.plan.tools import ToolRegistry
from planrail.planner import Planner, PlanningError, plan_schema
from planrail.testing.llm_server import LLMTestServer, Reply

from .conftest import Kit
from .plans import GOAL

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}

PLAN = {
    "steps": [
        {"id": "find", "tool": "search", "args": {"query": "graph planning"}, "depends_on": []},
        {
            "id": "acct",
            "tool": "create_account",
            "args": {"name": "Alice", "email": "alice@example.com"},
            "depends_on": [],
        },
    ]
}


def _shapes(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    items = schema["properties"]["steps"]["items"]["anyOf"]
    return {
        (s["properties"]["tool"]["enum"][0] if "tool" in s["properties"] else "")
        or s["properties"]["action"]["enum"][0]: s
        for s in items
    }


def test_plan_schema_has_one_shape_per_tool_with_typed_args(kit: Kit) -> None:
    """Each tool gets its own step shape: tool fixed by a one-name enum, args following its
    input schema (a non-string argument may also be a reference), id → tool → args →
    depends_on required in that order, a bounded id pattern, 1..max_steps steps, and optional
    when/join/for_each (branches, joins, fan-out)."""
    schema = plan_schema(ToolRegistry(kit.tools), max_steps=7)
    shapes = _shapes(schema)
    assert set(shapes) == {"search", "create_account", "send_email", "llm_call", "condition_check"}
    search = shapes["search"]
    assert search["required"] == ["id", "tool", "args", "depends_on"]
    assert list(search["properties"])[:4] == ["id", "tool", "args", "depends_on"]
    assert {"when", "join", "for_each"} <= set(search["properties"])
    args = search["properties"]["args"]
    assert args["properties"] == {"query": {"type": "string"}}
    assert args["required"] == ["query"]
    assert args["additionalProperties"] is False
    assert search["properties"]["id"]["pattern"] == "^[a-z][a-z0-9_]{0,23}$"
    steps = schema["properties"]["steps"]
    assert (steps["minItems"], steps["maxItems"]) == (1, 7)
    assert shapes["llm_call"]["required"] == ["id", "action", "prompt", "depends_on"]


async def test_openai_gets_a_strict_schema_with_per_tool_arguments(kit: Kit) -> None:
    """On OpenAI's dialect the planner's request carries json_schema with strict: true, the
    per-tool argument schemas inside, every object closed and every property required."""
    schema = plan_schema(ToolRegistry(kit.tools))
    with LLMTestServer([Reply.json(PLAN)], dialect="openai") as srv:
        async with OpenAIClient("m", base_url=srv.url, structured="json_schema_strict") as llm:
            result = await Planner(llm, kit.tools).plan(GOAL)
        fmt = srv.completions[0].response_format
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["strict"] is True
    sent = fmt["json_schema"]["schema"]
    assert sent == strict_schema(schema)
    shape = _shapes(sent)["create_account"]
    args = shape["properties"]["args"]
    assert set(args["required"]) == {"name", "email"}
    assert shape["required"] == list(shape["properties"])  # strict: all required
    assert shape["properties"]["when"]["type"] == ["object", "null"]  # optional: nullable
    assert result.attempts[0].structured == "json_schema_strict"
    assert [s.id for s in result.plan.steps] == ["find", "acct"]


async def test_strict_nulls_are_dropped_without_a_model_call(kit: Kit) -> None:
    """The nulls strict mode makes a model write for unused optional fields are dropped
    mechanically and recorded; the plan is valid at the first attempt."""
    steps = [{**s, "when": None, "join": None, "for_each": None} for s in PLAN["steps"]]
    with LLMTestServer([Reply.json({"steps": steps, "goal": None})]) as srv:
        async with OpenAIClient("m", base_url=srv.url) as llm:
            result = await Planner(llm, kit.tools).plan(GOAL)
    assert len(result.attempts) == 1
    assert "$.steps[0].when: dropped (null)" in result.attempts[0].changes


async def test_a_provider_rejecting_strict_gets_the_fallback(kit: Kit) -> None:
    """A provider refusing the strict schema (400) is asked in plain json_schema next; the
    attempt records the form used and the refusal."""
    with LLMTestServer([Reply.json(PLAN)], json_schema=False, dialect="vllm") as srv:
        async with OpenAIClient("m", base_url=srv.url, structured="json_schema_strict") as llm:
            result = await Planner(llm, kit.tools).plan(GOAL)
        formats = [r.response_format for r in srv.completions]
    # vLLM emulation here refuses json_schema entirely: strict, then plain, then llama.cpp form.
    assert [f["type"] for f in formats] == ["json_schema", "json_schema", "json_object"]
    assert "strict" in formats[0]["json_schema"]
    assert "strict" not in formats[1]["json_schema"]
    attempt = result.attempts[0]
    assert attempt.structured == "json_object_schema"
    assert attempt.fallbacks == ["json_schema_strict: HTTP 400", "json_schema: HTTP 400"]


async def test_llama_cpp_500_on_json_schema_falls_back_to_its_own_form(kit: Kit) -> None:
    """llama-cpp-python's server answers json_schema with HTTP 500: that is a refused form,
    not a transient failure — the next request uses {"type": "json_object", "schema": ...}
    at once (no retry, no backoff), and later requests start there."""
    with LLMTestServer([Reply.json(PLAN), Reply.json({"n": 1})], dialect="llama_cpp") as srv:
        async with OpenAIClient("m", base_url=srv.url) as llm:
            result = await Planner(llm, kit.tools).plan(GOAL)
            again = await llm.complete([Message("user", "n")], schema=SCHEMA)
        formats = [r.response_format for r in srv.completions]
    assert [f["type"] for f in formats] == ["json_schema", "json_object", "json_object"]
    assert formats[1]["schema"]["properties"]["steps"]["items"]["anyOf"]
    assert result.attempts[0].structured == "json_object_schema"
    assert result.attempts[0].retries == []
    assert result.attempts[0].fallbacks == ["json_schema: HTTP 500"]
    assert again.fallbacks == ()
    # The schema is enforced by the server: it is not repeated in words.
    assert "follows this JSON Schema" not in srv.completions[1].text


async def test_plain_servers_get_json_mode_then_words() -> None:
    """A server taking no schema at all ends in JSON mode with the schema in a system message."""
    with LLMTestServer([Reply.json({"n": 2})], dialect="plain") as srv:
        async with OpenAIClient("m", base_url=srv.url) as llm:
            response = await llm.complete([Message("user", "n")], schema=SCHEMA)
        formats = [r.response_format for r in srv.completions]
    assert [f["type"] for f in formats] == ["json_schema", "json_object", "json_object"]
    assert "schema" not in formats[2]
    assert "JSON Schema" in srv.completions[2].messages[-1]["content"]
    assert response.structured == "json_object"
    assert response.data == {"n": 2}


async def test_an_ordinary_500_is_still_retried(kit: Kit) -> None:
    """A 500 that does not name the response format stays a transient failure: retried in
    the same form."""
    with LLMTestServer([Reply.fail(500, "boom"), Reply.json({"n": 1})]) as srv:
        async with OpenAIClient("m", base_url=srv.url) as llm:
            with pytest.raises(LLMUnavailableError):
                await llm.complete([Message("user", "n")], schema=SCHEMA)
            ok = await llm.complete([Message("user", "n")], schema=SCHEMA)
    assert ok.structured == "json_schema"


async def test_max_tokens_temperature_and_seed_are_sent() -> None:
    """max_tokens is always sent (a default without settings, a quarter of a known context
    window); temperature and seed when given."""
    with LLMTestServer([Reply("a"), Reply("b")]) as srv:
        async with OpenAIClient("m", base_url=srv.url) as llm:
            await llm.complete([Message("user", "x")])
        async with OpenAIClient(
            "m", base_url=srv.url, context_window=4096, temperature=0.0, seed=7
        ) as llm:
            await llm.complete([Message("user", "x")])
        first, second = (r.body for r in srv.completions)
    assert first["max_tokens"] == DEFAULT_MAX_TOKENS
    assert "seed" not in first
    assert second["max_tokens"] == 1024
    assert (second["temperature"], second["seed"]) == (0.0, 7)


async def test_an_answer_cut_off_is_never_parsed(kit: Kit) -> None:
    """finish_reason=length: the attempt says "cut off" (not a parse error), keeps the raw
    text, and the repair asks for a shorter plan — even when the cut text happens to parse."""
    cut = Reply.cut_off('{"steps": []}', output_tokens=300)
    with LLMTestServer([cut, Reply.json(PLAN)]) as srv:
        async with OpenAIClient("m", base_url=srv.url, max_tokens=300) as llm:
            result = await Planner(llm, kit.tools).plan(GOAL)
        repair = srv.completions[1].text
    first = result.attempts[0]
    assert first.finish_reason == "length"
    assert [i.code for i in first.issues] == ["answer_cut_off"]
    assert first.raw == '{"steps": []}'
    assert "cut off after 300 tokens" in repair
    assert len(result.attempts) == 2


async def test_a_context_length_error_is_not_a_refused_schema(kit: Kit) -> None:
    """A 400 saying the context is too small raises LLMContextLengthError from the client
    (the form is kept), and planning stops with every attempt and raw answer kept."""
    bad = {"steps": [{"id": "x", "tool": "nope", "args": {}, "depends_on": []}]}
    with LLMTestServer([Reply.json(bad), Reply.context_length()]) as srv:
        async with OpenAIClient("m", base_url=srv.url) as llm:
            with pytest.raises(PlanningError) as info:
                await Planner(llm, kit.tools).plan(GOAL)
            assert llm.structured == "json_schema"  # no downgrade
        assert len(srv.completions) == 2
    attempts = info.value.attempts
    assert [a.kind for a in attempts] == ["plan", "repair"]
    assert attempts[0].raw
    assert attempts[0].issues[0].code == "unknown_tool"
    assert attempts[1].issues[0].code == "context_length"
    assert "context" in str(info.value)
    assert isinstance(info.value.__cause__, LLMContextLengthError)


async def test_a_stream_without_usage_is_estimated() -> None:
    """A stream whose server sends no usage chunk still counts tokens, estimated from the text
    and marked as estimated."""
    with LLMTestServer([Reply("one two three four", usage=False)]) as srv:
        async with OpenAIClient("m", base_url=srv.url) as llm:
            stream = llm.stream([Message("user", "count to four please")])
            _ = [d async for d in stream]
    assert stream.response is not None
    usage = stream.response.usage
    assert usage.estimated
    assert usage.input_tokens > 0
    assert usage.output_tokens == (len("one two three four") + 3) // 4
    assert usage.to_dict()["estimated"] == 1


async def test_an_empty_plan_is_an_error_with_its_own_code(kit: Kit) -> None:
    """{"steps": []} is not a successful plan: issue empty_plan, and a repair is asked for."""
    with LLMTestServer([Reply.json({"goal": GOAL, "steps": []}), Reply.json(PLAN)]) as srv:
        async with OpenAIClient("m", base_url=srv.url, structured="none") as llm:
            result = await Planner(llm, kit.tools).plan(GOAL)
    assert [i.code for i in result.attempts[0].issues] == ["empty_plan"]
    assert len(result.plan.steps) == 2


async def test_a_repeated_answer_stops_the_repairs(kit: Kit) -> None:
    """A model answering a repair with its previous answer is not asked again: planning stops
    with the old issues and repeated_answer, well before max_repairs."""
    bad = {"steps": [{"id": "x", "tool": "nope", "args": {}, "depends_on": []}]}
    with LLMTestServer([Reply.json(bad)] * 4) as srv:
        async with OpenAIClient("m", base_url=srv.url) as llm:
            with pytest.raises(PlanningError) as info:
                await Planner(llm, kit.tools, max_repairs=3).plan(GOAL)
        assert len(srv.completions) == 2
    codes = [i.code for i in info.value.attempts[-1].issues]
    assert codes == ["unknown_tool", "repeated_answer"]


async def test_the_same_json_spaced_differently_is_a_repeated_answer(kit: Kit) -> None:
    """A repair answered with the previous plan, only spaced and ordered differently (SmolLM2
    did that), is the same answer: no third request."""
    bad = {"steps": [{"id": "x", "tool": "nope", "args": {}, "depends_on": []}]}
    spaced = '{ "steps": [ {"depends_on": [], "id": "x",  "tool": "nope", "args": { } } ] } '
    with LLMTestServer([Reply.json(bad), Reply(spaced), Reply.json(bad)]) as srv:
        async with OpenAIClient("m", base_url=srv.url) as llm:
            with pytest.raises(PlanningError) as info:
                await Planner(llm, kit.tools, max_repairs=3).plan(GOAL)
        assert len(srv.completions) == 2
    assert [i.code for i in info.value.attempts[-1].issues][-1] == "repeated_answer"


async def test_mechanical_json_defects_from_a_constrained_model_are_read(kit: Kit) -> None:
    """What grammar-constrained small models write and ``json.loads`` refuses by default — a
    raw newline inside a string, an escape JSON does not have (``\\'``) — is read, with one
    meaning, at the first attempt: no repair call is spent on it."""
    answer = (
        '{"steps": [{"id": "acct", "tool": "create_account",'
        ' "args": {"name": "Alice\nSmith", "email": "alice@example.com"}, "depends_on": []},'
        ' {"id": "mail", "tool": "send_email", "args": {"user_id": "${acct.user_id}",'
        ' "subject": "Hi", "body": "It\\\'s\tdone"}, "depends_on": ["acct"]}]}'
    )
    with LLMTestServer([Reply(answer)], dialect="llama_cpp") as srv:
        async with OpenAIClient("m", base_url=srv.url) as llm:
            result = await Planner(llm, kit.tools).plan(GOAL)
        answered = [r for r in srv.completions if r.response_format["type"] == "json_object"]
    assert len(answered) == 1
    assert [a.issues for a in result.attempts] == [[]]
    args = {s.id: s.args for s in result.plan.steps}
    assert args["acct"]["name"] == "Alice\nSmith"
    assert args["mail"]["body"] == "It's\tdone"
