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
from planrail.llm.dialects import (
    ENFORCED,
    FALLBACK,
    MODES,
    StructuredMode,
    is_context_length_error,
    is_format_error,
    response_format,
    schema_in_words,
)
from planrail.llm.errors import (
    LLMAnswerError,
    LLMContextLengthError,
    LLMRequestError,
    MissingExtraError,
)
from planrail.llm.jsontext import extract_json
from planrail.llm.provider_errors import UNREADABLE_BODY, map_sdk_error, unreadable_body

__all__ = ["DEFAULT_MAX_TOKENS", "OpenAIClient", "StructuredMode"]

DEFAULT_MAX_TOKENS = 2048
"""``max_tokens`` when neither it nor the model's context window is given."""
Structured = StructuredMode | Literal["auto"]


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
        structured: Structured = "auto",
        temperature: float | None = None,
        max_tokens: int | None = None,
        seed: int | None = None,
        context_window: int | None = None,
        client: Any = None,
    ) -> None:
        self.model = model
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        if structured != "auto" and structured not in MODES:
            raise LLMRequestError(f"structured must be auto or one of {', '.join(MODES)}")
        if structured == "auto":
            # OpenAI's own API takes strict schemas; other servers start at plain json_schema
            # and fall back from there (their first refusal is how the dialect is detected).
            structured = "json_schema" if self.base_url else "json_schema_strict"
        self.structured: StructuredMode = structured
        """The strongest way of enforcing a schema this server is known to accept."""
        self.temperature = temperature
        self.seed = seed
        self.timeout = timeout
        self.context_window = context_window
        """The model's context size in tokens, when known (sets the default ``max_tokens``;
        the planner picks its compact prompt for small contexts)."""
        if max_tokens is not None and max_tokens < 1:
            raise LLMRequestError("max_tokens must be at least 1")
        self.max_tokens = max_tokens or (
            max(256, context_window // 4) if context_window else DEFAULT_MAX_TOKENS
        )
        """Sent with every request: no answer runs on until the context is full."""
        self._sdk = _import_openai()
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
        kwargs: dict[str, Any] = {"model": model or self.model, "max_tokens": self.max_tokens}
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        if self.seed is not None:
            kwargs["seed"] = self.seed
        if schema is not None:
            fmt = response_format(mode, schema, _schema_name(schema_name))
            if fmt is not None:
                kwargs["response_format"] = fmt
            if mode not in ENFORCED:  # the server cannot enforce it: say it in words
                msgs.append({"role": "system", "content": schema_in_words(schema)})
        kwargs["messages"] = msgs
        return kwargs

    def _refused(
        self, err: PlanrailError, mode: StructuredMode, schema: Any, fallbacks: list[str]
    ) -> PlanrailError | None:
        """After a failed request: ``None`` when it should be sent again in a simpler form
        (noted in ``fallbacks``), else the error to raise."""
        status = getattr(err, "status", None)
        if status == 400 and is_context_length_error(err.message):
            return LLMContextLengthError(err.message, status=status)
        refused = status in (400, 422) or (
            status == 500 and mode in ENFORCED and is_format_error(err.message)
        )
        if schema is None or mode == "none" or not refused:
            return err
        fallbacks.append(f"{mode}: HTTP {status}")
        self.structured = FALLBACK[mode]
        return None

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        schema: dict[str, Any] | None = None,
        schema_name: str = "answer",
        model: str | None = None,
    ) -> LLMResponse:
        """One chat completion (see :class:`~planrail.llm.LLM`)."""
        fallbacks: list[str] = []
        while True:
            mode = self.structured
            kwargs = self._request(messages, schema, schema_name, model, mode)
            try:
                resp = await self._client.chat.completions.create(**kwargs)
            except UNREADABLE_BODY as exc:
                raise unreadable_body(exc, "openai", self._where) from exc
            except self._sdk.OpenAIError as exc:
                err = map_sdk_error(exc, self._sdk, provider="openai", where=self._where)
                final = self._refused(err, mode, schema, fallbacks)
                if final is None:
                    continue
                raise final from exc
            return self._response(resp, schema, mode, kwargs, fallbacks)

    def _response(
        self,
        resp: Any,
        schema: Any,
        mode: StructuredMode,
        kwargs: dict[str, Any],
        fallbacks: list[str],
    ) -> LLMResponse:
        if not getattr(resp, "choices", None):
            raise LLMAnswerError("the server's answer holds no choices")
        choice = resp.choices[0]
        message = choice.message
        text = message.content or ""
        refusal = getattr(message, "refusal", None)
        if not text and refusal:
            raise LLMRequestError(f"the model refused: {refusal}")
        raw = getattr(resp, "usage", None)
        usage = _usage(raw) if raw is not None else Usage.estimate(_sent(kwargs), text)
        finish = str(getattr(choice, "finish_reason", "") or "")
        model = getattr(resp, "model", "") or ""
        return _finish(text, usage, model, schema, mode, finish, fallbacks)

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
        fallbacks: list[str] = []
        while True:
            mode = c.structured
            kwargs = c._request(messages, schema, schema_name, model, mode)
            try:
                stream = await c._client.chat.completions.create(
                    **kwargs, stream=True, stream_options={"include_usage": True}
                )
            except UNREADABLE_BODY as exc:
                raise unreadable_body(exc, "openai", c._where) from exc
            except sdk.OpenAIError as exc:
                err = map_sdk_error(exc, sdk, provider="openai", where=c._where)
                final = c._refused(err, mode, schema, fallbacks)
                if final is None:
                    continue
                raise final from exc
            break
        parts: list[str] = []
        usage: Usage | None = None
        answered_by = ""
        finish = ""
        try:
            async for chunk in stream:
                answered_by = getattr(chunk, "model", "") or answered_by
                if getattr(chunk, "usage", None) is not None:
                    usage = _usage(chunk.usage)
                for choice in chunk.choices or ():
                    finish = str(getattr(choice, "finish_reason", "") or "") or finish
                    delta = getattr(choice.delta, "content", None)
                    if delta:
                        parts.append(delta)
                        yield delta
        except UNREADABLE_BODY as exc:
            raise unreadable_body(exc, "openai", c._where) from exc
        except sdk.OpenAIError as exc:
            raise map_sdk_error(exc, sdk, provider="openai", where=c._where) from exc
        text = "".join(parts)
        if usage is None:  # the server sent no usage chunk: a budget must still see the call
            usage = Usage.estimate(_sent(kwargs), text)
        self.response = _finish(text, usage, answered_by, schema, mode, finish, fallbacks)


def _usage(raw: Any) -> Usage:
    if raw is None:
        return Usage(calls=1)
    return Usage(
        int(getattr(raw, "prompt_tokens", 0) or 0),
        int(getattr(raw, "completion_tokens", 0) or 0),
        1,
    )


def _sent(kwargs: dict[str, Any]) -> str:
    """The text of a request, for estimating its tokens (messages and the schema sent)."""
    parts = [str(m.get("content", "")) for m in kwargs.get("messages", ())]
    if "response_format" in kwargs:
        parts.append(json.dumps(kwargs["response_format"], separators=(",", ":")))
    return "\n".join(parts)


def _finish(
    text: str,
    usage: Usage,
    model: str,
    schema: Any,
    mode: str,
    finish: str = "",
    fallbacks: list[str] | None = None,
) -> LLMResponse:
    if not text.strip() and finish != "length":
        raise LLMAnswerError("the model's answer is empty", text=text)
    data = None
    if schema is not None and finish != "length":  # a cut-off answer is never parsed
        try:
            data = extract_json(text)
        except LLMAnswerError:
            data = None  # the caller decides: the planner asks for a repair, a step retries
    return LLMResponse(
        text,
        usage,
        model,
        data,
        mode if schema is not None else "none",
        finish,
        tuple(fallbacks or ()),
    )


def _schema_name(name: str) -> str:
    cleaned = "".join(c if c.isalnum() or c in "_-" else "_" for c in name)
    return cleaned[:64] or "answer"
