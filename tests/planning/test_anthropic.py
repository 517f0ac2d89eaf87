"""The Anthropic client, against a stand-in for the SDK's client object."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from planrail.llm import Message

anthropic = pytest.importorskip("anthropic")

from planrail.llm.anthropic_client import AnthropicClient  # noqa: E402
from planrail.llm.errors import LLMAnswerError, LLMUnavailableError  # noqa: E402


class _Messages:
    def __init__(self, reply: Any) -> None:
        self.reply = reply
        self.calls: list[dict[str, Any]] = []

    async def create(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        if isinstance(self.reply, BaseException):
            raise self.reply
        return self.reply


def _client(reply: Any) -> tuple[AnthropicClient, _Messages]:
    messages = _Messages(reply)
    return AnthropicClient("claude-x", client=SimpleNamespace(messages=messages)), messages


async def test_schema_is_enforced_with_a_forced_tool() -> None:
    """A schema becomes one tool with tool_choice forcing it; its input is the answer."""
    reply = SimpleNamespace(
        model="claude-x",
        usage=SimpleNamespace(input_tokens=12, output_tokens=4),
        content=[SimpleNamespace(type="tool_use", input={"n": 2})],
    )
    llm, messages = _client(reply)
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    response = await llm.complete(
        [Message("system", "S"), Message("user", "U")], schema=schema, schema_name="plan"
    )
    assert response.data == {"n": 2}
    assert response.structured == "tool"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (12, 4)
    call = messages.calls[0]
    assert call["system"] == "S"
    assert call["messages"] == [{"role": "user", "content": "U"}]
    assert call["tool_choice"] == {"type": "tool", "name": "plan"}
    assert call["tools"][0]["input_schema"] == schema


async def test_rate_limit_maps_to_retryable() -> None:
    """The SDK's 429 becomes a retryable error with its Retry-After."""
    import httpx2

    request = httpx2.Request("POST", "https://api.anthropic.com/v1/messages")
    response = httpx2.Response(429, headers={"retry-after": "4"}, request=request)
    error = anthropic.RateLimitError("slow down", response=response, body=None)
    llm, _ = _client(error)
    with pytest.raises(LLMUnavailableError) as info:
        await llm.complete([Message("user", "hi")])
    assert info.value.retry_after == 4.0
    assert info.value.status == 429


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b'{"id": "msg_1", ', "is not valid JSON ("),
        (b'{"id": "\xff"}', "is not UTF-8 text (byte 8)"),
    ],
    ids=["not-json", "not-utf8"],
)
async def test_a_body_the_sdk_cannot_read_is_a_bad_answer(body: bytes, reason: str) -> None:
    """The real SDK reading a 200 body that is not JSON or not UTF-8 raises ``json``'s own
    errors (a traceback before); they are a retryable LLMAnswerError saying which."""
    import httpx2

    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=body, headers={"content-type": "application/json"})

    sdk_client = anthropic.AsyncAnthropic(
        api_key="k",
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(answer)),
    )
    llm = AnthropicClient("claude-x", client=sdk_client)
    with pytest.raises(LLMAnswerError) as info:
        await llm.complete([Message("user", "hi")])
    assert info.value.message.startswith("anthropic: the response from api.anthropic.com ")
    assert reason in info.value.message
