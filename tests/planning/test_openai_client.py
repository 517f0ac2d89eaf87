"""The OpenAI-compatible client: structured output and its fallbacks, streaming, settings."""

from __future__ import annotations

import sys

import pytest

from planrail.llm import Message, open_llm, split_model_name
from planrail.llm.errors import LLMRequestError, MissingExtraError
from planrail.llm.openai_client import OpenAIClient
from planrail.testing.llm_server import LLMTestServer, Reply

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


async def test_structured_output_uses_json_schema(
    server: LLMTestServer, openai_llm: OpenAIClient
) -> None:
    """A schema is sent as response_format json_schema; the answer comes back parsed."""
    server.add(Reply.json({"n": 3}))
    response = await openai_llm.complete([Message("user", "count")], schema=SCHEMA, schema_name="c")
    assert response.data == {"n": 3}
    assert response.structured == "json_schema"
    fmt = server.completions[0].response_format
    assert fmt == {"type": "json_schema", "json_schema": {"name": "c", "schema": SCHEMA}}
    assert response.usage.calls == 1
    assert response.usage.output_tokens == 2


async def test_falls_back_when_schema_refused() -> None:
    """A server refusing json_schema (HTTP 400) is asked again in the next simpler form
    (llama.cpp's json_object + schema); the client remembers and asks in it from then on."""
    with LLMTestServer([Reply.json({"n": 1}), Reply.json({"n": 2})], json_schema=False) as srv:
        async with OpenAIClient("m", base_url=srv.url) as llm:
            first = await llm.complete([Message("user", "a")], schema=SCHEMA)
            second = await llm.complete([Message("user", "b")], schema=SCHEMA)
        formats = [r.response_format for r in srv.completions]
    assert first.data == {"n": 1}
    assert second.data == {"n": 2}
    assert [f["type"] for f in formats] == ["json_schema", "json_object", "json_object"]
    assert formats[1]["schema"] == SCHEMA
    assert first.structured == "json_object_schema"
    assert first.fallbacks == ("json_schema: HTTP 400",)
    assert second.fallbacks == ()


async def test_plain_mode_parses_fenced_json(server: LLMTestServer) -> None:
    """With structured output off, the schema is stated in words and the JSON is read out of
    whatever the model wrote around it."""
    server.add('Sure!\n```json\n{"n": 5,}\n```')
    async with OpenAIClient("m", base_url=server.url, structured="none") as llm:
        response = await llm.complete([Message("user", "a")], schema=SCHEMA)
    assert response.data == {"n": 5}
    assert server.completions[0].response_format is None


async def test_streaming_yields_deltas_and_usage(
    server: LLMTestServer, openai_llm: OpenAIClient
) -> None:
    """A streamed answer arrives chunk by chunk; the usage comes with the last chunk."""
    server.add(Reply("one two three", chunks=["one ", "two ", "three"], input_tokens=11))
    stream = openai_llm.stream([Message("user", "count")])
    parts = [delta async for delta in stream]
    assert parts == ["one ", "two ", "three"]
    assert stream.response is not None
    assert stream.response.text == "one two three"
    assert (stream.response.usage.input_tokens, stream.response.usage.output_tokens) == (11, 3)
    body = server.completions[0].body
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


def test_no_key_and_no_server_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without OPENAI_API_KEY or a base URL, the error says what to set."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(LLMRequestError, match="set OPENAI_API_KEY"):
        OpenAIClient("gpt-4.1-mini")


async def test_env_base_url_and_key_are_honoured(
    server: LLMTestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OPENAI_BASE_URL and OPENAI_API_KEY are read from the environment."""
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-123")
    server.add("hello")
    async with OpenAIClient("m") as llm:
        assert (await llm.complete([Message("user", "hi")])).text == "hello"
    assert server.completions[0].headers.get("authorization") == "Bearer sk-test-123"


def test_missing_package_gives_a_one_line_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the openai package the error names the pip command."""
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'planrail\[openai\]'"):
        OpenAIClient("m", base_url="http://127.0.0.1:9/v1")


def test_model_names() -> None:
    """provider:model names; no known prefix means an OpenAI-compatible model."""
    assert split_model_name("openai:gpt-4.1-mini") == ("openai", "gpt-4.1-mini")
    assert split_model_name("anthropic:claude-sonnet-4-5") == ("anthropic", "claude-sonnet-4-5")
    assert split_model_name("llama3:8b") == ("openai", "llama3:8b")
    with pytest.raises(LLMRequestError):
        split_model_name("openai:")
    llm = open_llm("ollama:llama3.1")
    assert isinstance(llm, OpenAIClient)
    assert llm.base_url == "http://localhost:11434/v1"


def test_importing_planrail_does_not_import_the_sdks() -> None:
    """The core and the llm package import no provider SDK at import time."""
    import subprocess

    code = (
        "import sys, planrail, planrail.llm, planrail.agent, planrail.planner, planrail.cli.app;"
        "print('openai' in sys.modules, 'anthropic' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False"
