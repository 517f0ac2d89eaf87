"""A client for Anthropic's Messages API, on the official ``anthropic`` SDK (extra ``[anthropic]``).

The key comes from ``api_key`` or ``ANTHROPIC_API_KEY``. A schema is enforced the way the
Messages API supports on every model: one tool whose ``input_schema`` is the schema, with
``tool_choice`` forcing the model to call it; the tool call's input is the answer. A schema that
is not an object is wrapped in ``{"value": ...}`` and unwrapped again.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from planrail.llm.base import LLMResponse, Message, SDKClient, Usage
from planrail.llm.errors import LLMAnswerError, LLMRequestError, MissingExtraError
from planrail.llm.jsontext import extract_json
from planrail.llm.provider_errors import UNREADABLE_BODY, map_sdk_error, unreadable_body

__all__ = ["AnthropicClient"]


def _import_anthropic() -> ModuleType:
    try:
        import anthropic
    except ImportError:
        raise MissingExtraError(
            "the Anthropic client needs the anthropic package: pip install 'planrail[anthropic]'"
        ) from None
    return anthropic  # type: ignore[no-any-return,unused-ignore]


class AnthropicClient(SDKClient):
    """An :class:`~planrail.llm.LLM` for Claude models. Streaming is not offered (yet)."""

    supports_streaming = False

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 120.0,
        max_tokens: int = 4096,
        temperature: float | None = None,
        client: Any = None,
    ) -> None:
        self.model = model
        self.max_tokens = max_tokens
        self.temperature = temperature
        self._sdk = _import_anthropic()
        if client is None:
            key = api_key or os.environ.get("ANTHROPIC_API_KEY")
            if not key:
                raise LLMRequestError("no API key for Anthropic: set ANTHROPIC_API_KEY")
            client = self._sdk.AsyncAnthropic(
                api_key=key, base_url=base_url, timeout=timeout, max_retries=0
            )
        self._client = client
        self._where = base_url or "api.anthropic.com"

    def __repr__(self) -> str:
        return f"AnthropicClient(model={self.model!r})"

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        schema: dict[str, Any] | None = None,
        schema_name: str = "answer",
        model: str | None = None,
    ) -> LLMResponse:
        """One Messages API call (see :class:`~planrail.llm.LLM`)."""
        system = "\n\n".join(m.to_dict()["content"] for m in messages if m.role == "system")
        chat = [m.to_dict() for m in messages if m.role != "system"]
        kwargs: dict[str, Any] = {
            "model": model or self.model,
            "max_tokens": self.max_tokens,
            "messages": chat or [{"role": "user", "content": system}],
        }
        if system and chat:
            kwargs["system"] = system
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        wrapped = schema is not None and schema.get("type") != "object"
        if schema is not None:
            name = "".join(c if c.isalnum() or c in "_-" else "_" for c in schema_name)[:64]
            input_schema = (
                {"type": "object", "properties": {"value": schema}, "required": ["value"]}
                if wrapped
                else schema
            )
            kwargs["tools"] = [
                {"name": name, "description": "Give the answer.", "input_schema": input_schema}
            ]
            kwargs["tool_choice"] = {"type": "tool", "name": name}
        try:
            resp = await self._client.messages.create(**kwargs)
        except UNREADABLE_BODY as exc:
            raise unreadable_body(exc, "anthropic", self._where) from exc
        except self._sdk.AnthropicError as exc:
            raise map_sdk_error(exc, self._sdk, provider="anthropic", where=self._where) from exc
        raw_usage = getattr(resp, "usage", None)
        usage = Usage(
            int(getattr(raw_usage, "input_tokens", 0) or 0),
            int(getattr(raw_usage, "output_tokens", 0) or 0),
            1,
        )
        texts: list[str] = []
        data: Any = None
        found = False
        for block in getattr(resp, "content", None) or ():
            if getattr(block, "type", None) == "tool_use" and not found:
                data, found = block.input, True
                if wrapped and isinstance(data, dict):
                    data = data.get("value")
            elif getattr(block, "type", None) == "text":
                texts.append(block.text)
        if found:
            return LLMResponse(
                json.dumps(data, ensure_ascii=False), usage, resp.model, data, "tool"
            )
        text = "".join(texts)
        if not text.strip():
            raise LLMAnswerError("the model's answer is empty", text=text)
        if schema is not None:
            try:
                data = extract_json(text)
            except LLMAnswerError:
                data = None
        return LLMResponse(text, usage, getattr(resp, "model", "") or "", data, "none")

    def stream(self, *_args: Any, **_kwargs: Any) -> Any:
        raise NotImplementedError("AnthropicClient does not stream; use complete()")
