"""A client for any OpenAI-compatible chat completions server, on the official ``openai`` SDK.

Works with OpenAI, vLLM, Ollama, llama.cpp's server and LM Studio. The key comes from
``api_key`` or ``OPENAI_API_KEY``; the server from ``base_url`` or ``OPENAI_BASE_URL`` (a local
server needs no key). A schema is sent as JSON-Schema structured output; a server that refuses
it (HTTP 400/422) is asked again in JSON mode, then with the schema written into the prompt and
the answer parsed from plain text — and the client remembers what the server accepted.

The SDK's own retries are switched off (``max_retries=0``): planrail's retry policies decide,
on the injected clock, and see every attempt.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Sequence
from types import ModuleType
from typing import Any, Literal

from planrail.errors import PlanrailError
from planrail.llm.base import LLMResponse, Message, SDKClient, Usage
from planrail.llm.errors import LLMAnswerError, LLMRequestError, MissingExtraError
from planrail.llm.jsontext import extract_json
from planrail.llm.provider_errors import map_sdk_error

__all__ = ["OpenAIClient", "StructuredMode"]

StructuredMode = Literal["json_schema", "json_object", "none"]
_FALLBACK: dict[str, StructuredMode] = {"json_schema": "json_object", "json_object": "none"}


def _import_openai() -> ModuleType:
    try:
        import openai
    except ImportError:
        raise MissingExtraError(
            "the OpenAI-compatible client needs the openai package: pip install 'planrail[openai]'"
        ) from None
    return openai


class OpenAIClient(SDKClient):
    """An :class:`~planrail.llm.LLM` for OpenAI-compatible servers."""

    supports_streaming = True

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 120.0,
        structured: StructuredMode = "json_schema",
        temperature: float | None = None,
        max_tokens: int | None = None,
        client: Any = None,
    ) -> None:
        self.model = model
        self.structured: StructuredMode = structured
        """The strongest way of enforcing a schema this server is known to accept."""
        self.temperature = temperature
        self.max_tokens = max_tokens
        self._sdk = _import_openai()
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        if client is None:
            key = api_key or os.environ.get("OPENAI_API_KEY")
            if not key:
                if self.base_url is None:
                    raise LLMRequestError(
                        "no API key for OpenAI: set OPENAI_API_KEY, or point --base-url at a"
                        " local OpenAI-compatible server"
                    )
                key = "not-needed"  # local servers do not check it, but the SDK wants one
            client = self._sdk.AsyncOpenAI(
                api_key=key, base_url=self.base_url, timeout=timeout, max_retries=0
            )
        self._client = client
        self._where = self.base_url or "api.openai.com"

    def __repr__(self) -> str:
        return f"OpenAIClient(model={self.model!r}, base_url={self.base_url!r})"

    # ------------------------------------------------------------------ requests

    def _request(
        self,
        messages: Sequence[Message],
        schema: dict[str, Any] | None,
        schema_name: str,
        model: str | None,
        mode: StructuredMode,
    ) -> dict[str, Any]:
        msgs = [m.to_dict() for m in messages]
        kwargs: dict[str, Any] = {"model": model or self.model}
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        if self.max_tokens is not None:
            kwargs["max_tokens"] = self.max_tokens
        if schema is not None:
            if mode == "json_schema":
                kwargs["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": _schema_name(schema_name), "schema": schema},
                }
            else:
                # The server cannot enforce the schema: say it in words (JSON mode also needs
                # the word "JSON" in the messages).
                msgs.append(
                    {
                        "role": "system",
                        "content": "Answer with one JSON value, and nothing else, that follows"
                        f" this JSON Schema:\n{json.dumps(schema, ensure_ascii=False)}",
                    }
                )
                if mode == "json_object":
                    kwargs["response_format"] = {"type": "json_object"}
        kwargs["messages"] = msgs
        return kwargs

    def _downgrade(self, exc: PlanrailError, mode: StructuredMode, schema: Any) -> bool:
        """After a refused request: should it be sent again with a weaker schema mode?"""
        status = getattr(exc, "status", None)
        if schema is None or mode == "none" or status not in (400, 422):
            return False
        self.structured = _FALLBACK[mode]
        return True

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        schema: dict[str, Any] | None = None,
        schema_name: str = "answer",
        model: str | None = None,
    ) -> LLMResponse:
        """One chat completion (see :class:`~planrail.llm.LLM`)."""
        while True:
            mode = self.structured
            kwargs = self._request(messages, schema, schema_name, model, mode)
            try:
                resp = await self._client.chat.completions.create(**kwargs)
            except json.JSONDecodeError as exc:
                raise _malformed(exc, self._where) from exc
            except self._sdk.OpenAIError as exc:
                err = map_sdk_error(exc, self._sdk, provider="openai", where=self._where)
                if self._downgrade(err, mode, schema):
                    continue
                raise err from exc
            return self._response(resp, schema, mode)

    def _response(self, resp: Any, schema: Any, mode: StructuredMode) -> LLMResponse:
        if not getattr(resp, "choices", None):
            raise LLMAnswerError("the server's answer holds no choices")
        message = resp.choices[0].message
        text = message.content or ""
        refusal = getattr(message, "refusal", None)
        if not text and refusal:
            raise LLMRequestError(f"the model refused: {refusal}")
        usage = _usage(getattr(resp, "usage", None))
        return _finish(text, usage, getattr(resp, "model", "") or "", schema, mode)

    def stream(
        self,
        messages: Sequence[Message],
        *,
        schema: dict[str, Any] | None = None,
        schema_name: str = "answer",
        model: str | None = None,
    ) -> _OpenAIStream:
        """A streamed chat completion; usage arrives with the last chunk."""
        return _OpenAIStream(self, messages, schema, schema_name, model)


class _OpenAIStream:
    def __init__(
        self,
        client: OpenAIClient,
        messages: Sequence[Message],
        schema: dict[str, Any] | None,
        schema_name: str,
        model: str | None,
    ) -> None:
        self.client = client
        self.args = (messages, schema, schema_name, model)
        self.response: LLMResponse | None = None

    async def __aiter__(self) -> AsyncIterator[str]:
        c = self.client
        messages, schema, schema_name, model = self.args
        sdk = c._sdk
        while True:
            mode = c.structured
            kwargs = c._request(messages, schema, schema_name, model, mode)
            try:
                stream = await c._client.chat.completions.create(
                    **kwargs, stream=True, stream_options={"include_usage": True}
                )
            except json.JSONDecodeError as exc:
                raise _malformed(exc, c._where) from exc
            except sdk.OpenAIError as exc:
                err = map_sdk_error(exc, sdk, provider="openai", where=c._where)
                if c._downgrade(err, mode, schema):
                    continue
                raise err from exc
            break
        parts: list[str] = []
        usage = Usage(calls=1)
        answered_by = ""
        try:
            async for chunk in stream:
                answered_by = getattr(chunk, "model", "") or answered_by
                if getattr(chunk, "usage", None) is not None:
                    usage = _usage(chunk.usage)
                for choice in chunk.choices or ():
                    delta = getattr(choice.delta, "content", None)
                    if delta:
                        parts.append(delta)
                        yield delta
        except json.JSONDecodeError as exc:
            raise _malformed(exc, c._where) from exc
        except sdk.OpenAIError as exc:
            raise map_sdk_error(exc, sdk, provider="openai", where=c._where) from exc
        self.response = _finish("".join(parts), usage, answered_by, schema, mode)


def _malformed(exc: json.JSONDecodeError, where: str) -> LLMAnswerError:
    return LLMAnswerError(f"openai: the response from {where} is not valid JSON ({exc.msg})")


def _usage(raw: Any) -> Usage:
    if raw is None:
        return Usage(calls=1)
    return Usage(
        int(getattr(raw, "prompt_tokens", 0) or 0),
        int(getattr(raw, "completion_tokens", 0) or 0),
        1,
    )


def _finish(text: str, usage: Usage, model: str, schema: Any, mode: str) -> LLMResponse:
    if not text.strip():
        raise LLMAnswerError("the model's answer is empty", text=text)
    data = None
    if schema is not None:
        try:
            data = extract_json(text)
        except LLMAnswerError:
            data = None  # the caller decides: the planner asks for a repair, a step retries
    return LLMResponse(text, usage, model, data, mode if schema is not None else "none")


def _schema_name(name: str) -> str:
    cleaned = "".join(c if c.isalnum() or c in "_-" else "_" for c in name)
    return cleaned[:64] or "answer"
