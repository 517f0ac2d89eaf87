"""Provider failures through the real SDK: classified, retried on the fake clock, reported."""

from __future__ import annotations

import pytest

from planrail.agent import Agent, approve_all
from planrail.errors import RetryableError
from planrail.llm import Message
from planrail.llm.errors import LLMAnswerError, LLMRequestError, LLMUnavailableError
from planrail.llm.openai_client import OpenAIClient
from planrail.planner import LLMRetry, Planner
from planrail.testing.llm_server import LLMTestServer, Reply

from .conftest import FakeClock, Kit
from .plans import GOAL, good_plan


async def _plan(llm: OpenAIClient, kit: Kit, clock: FakeClock, attempts: int = 4) -> object:
    planner = Planner(llm, kit.tools, clock=clock, retry=LLMRetry(max_attempts=attempts))
    return await planner.plan(GOAL)


async def test_429_retry_after_is_honoured(
    server: LLMTestServer, kit: Kit, clock: FakeClock, openai_llm: OpenAIClient
) -> None:
    """A 429 with Retry-After: 7 is retried after exactly 7 virtual seconds."""
    server.add(Reply.fail(429, "slow down", retry_after="7"), Reply.json(good_plan()))
    result = await _plan(openai_llm, kit, clock)
    assert clock.sleeps == [7.0]
    assert result.attempts[0].retries == [  # type: ignore[attr-defined]
        "attempt 1: openai answered HTTP 429: slow down (retrying in 7s)"
    ]


async def test_500s_back_off_exponentially(
    server: LLMTestServer, kit: Kit, clock: FakeClock, openai_llm: OpenAIClient
) -> None:
    """Two 500s are retried after 1 and 2 virtual seconds, then the plan arrives."""
    server.add(Reply.fail(500), Reply.fail(503), Reply.json(good_plan()))
    await _plan(openai_llm, kit, clock)
    assert clock.sleeps == [1.0, 2.0]
    assert len(server.completions) == 3


@pytest.mark.parametrize(
    "failure", [Reply.malformed(), Reply.empty()], ids=["malformed-body", "empty-answer"]
)
async def test_malformed_or_empty_answers_are_retried(
    server: LLMTestServer, kit: Kit, clock: FakeClock, openai_llm: OpenAIClient, failure: Reply
) -> None:
    """A body that is not JSON, or an empty answer, is retried like a transient failure."""
    server.add(failure, Reply.json(good_plan()))
    await _plan(openai_llm, kit, clock)
    assert clock.sleeps == [1.0]


_NOT_UTF8 = (
    b'{"id": "x", "object": "chat.completion", "choices": [{"message": {"content": "\xff"}}]}'
)


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
async def test_a_body_that_is_not_utf8_is_a_bad_answer_not_a_crash(
    server: LLMTestServer, kit: Kit, clock: FakeClock, openai_llm: OpenAIClient, stream: bool
) -> None:
    """Bytes that are not UTF-8 (the SDK's JSON reading raised UnicodeDecodeError, a
    traceback) are an LLMAnswerError naming the byte, retried like a malformed body."""
    server.add(Reply(raw_body=_NOT_UTF8), Reply.json(good_plan()))
    planner = Planner(openai_llm, kit.tools, clock=clock)
    result = await planner.plan(GOAL, on_step=(lambda step: None) if stream else None)
    assert clock.sleeps == [1.0]
    (retry,) = result.attempts[0].retries
    assert retry.startswith("attempt 1: openai: the response from http://127.0.0.1:")
    assert retry.endswith("is not UTF-8 text (byte 78) (retrying in 1s)")


async def test_timeout_is_retried(server: LLMTestServer, kit: Kit, clock: FakeClock) -> None:
    """A server that never answers times the client out; the retry then succeeds."""
    server.add(Reply.timeout(), Reply.json(good_plan()))
    async with OpenAIClient("m", base_url=server.url, timeout=0.2) as llm:
        await _plan(llm, kit, clock)
    assert clock.sleeps == [1.0]


async def test_model_text_that_is_not_json_gets_a_repair_prompt(
    server: LLMTestServer, kit: Kit, clock: FakeClock, openai_llm: OpenAIClient
) -> None:
    """An answer that holds malformed JSON is not retried blindly: the model is told why."""
    server.add('{"goal": "x", "steps": [ {"id": ', Reply.json(good_plan()))
    result = await _plan(openai_llm, kit, clock)
    assert [i.code for i in result.attempts[0].issues] == ["parse_error"]  # type: ignore[attr-defined]
    assert "[parse_error]" in server.completions[1].messages[-1]["content"]
    assert clock.sleeps == []


async def test_persistent_500_stops_with_a_clear_error(
    server: LLMTestServer, kit: Kit, clock: FakeClock, openai_llm: OpenAIClient
) -> None:
    """When every attempt fails, the agent reports an error naming the attempts and cause."""
    server.add(*[Reply.fail(500, "backend down")] * 3)
    agent = Agent(
        openai_llm, kit.tools, approval=approve_all, clock=clock, retry=LLMRetry(max_attempts=3)
    )
    result = await agent.run(GOAL)
    assert result.status == "error"
    assert result.reason == (
        "the model could not be asked (3 attempts): openai answered HTTP 500: backend down"
    )
    assert kit.calls == []
    assert clock.sleeps == [1.0, 2.0]


async def test_401_is_not_retried(
    server: LLMTestServer, kit: Kit, clock: FakeClock, openai_llm: OpenAIClient
) -> None:
    """A refused request (401) fails at once, saying to check the key."""
    server.add(Reply.fail(401, "bad key"))
    result = await Agent(openai_llm, kit.tools, approval=approve_all, clock=clock).run(GOAL)
    assert result.status == "error"
    assert "HTTP 401: bad key (check the API key)" in (result.reason or "")
    assert clock.sleeps == []
    assert len(server.completions) == 1


async def test_errors_are_classified(server: LLMTestServer, openai_llm: OpenAIClient) -> None:
    """429/5xx/timeouts are retryable (with retry_after); 4xx are not."""
    server.add(Reply.fail(429, retry_after_ms="1500"), Reply.fail(400, "bad"), Reply.fail(502))
    msgs = [Message("user", "hi")]
    with pytest.raises(LLMUnavailableError) as rate:
        await openai_llm.complete(msgs)
    assert rate.value.retry_after == 1.5
    assert rate.value.status == 429
    assert isinstance(rate.value, RetryableError)
    with pytest.raises(LLMRequestError) as bad:
        await openai_llm.complete(msgs)
    assert not bad.value.retryable
    assert bad.value.status == 400
    with pytest.raises(LLMUnavailableError):
        await openai_llm.complete(msgs)


async def test_connection_refused_is_retryable(server: LLMTestServer) -> None:
    """A server that is not there raises a retryable error naming where it looked."""
    url = server.url
    server.stop()
    async with OpenAIClient("m", base_url=url, timeout=2.0) as llm:
        with pytest.raises(LLMUnavailableError, match="cannot reach"):
            await llm.complete([Message("user", "hi")])


async def test_empty_answer_error_is_retryable(
    server: LLMTestServer, openai_llm: OpenAIClient
) -> None:
    """An empty answer raises LLMAnswerError, which the retry policies treat as transient."""
    server.add(Reply.empty())
    with pytest.raises(LLMAnswerError, match="empty"):
        await openai_llm.complete([Message("user", "hi")])
