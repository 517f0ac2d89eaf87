"""The one small seam every LLM client implements, and what crosses it.

A client takes a list of :class:`Message` s and, optionally, a JSON Schema the answer must
follow; it returns an :class:`LLMResponse`: the text, the parsed JSON when a schema was asked
for, and the token :class:`Usage`. Streaming is optional (``supports_streaming``): a streaming
client's :meth:`LLM.stream` yields text as it arrives and exposes the final response when done.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, Self, runtime_checkable

__all__ = ["LLM", "LLMResponse", "LLMStream", "Message", "Role", "SDKClient", "Usage"]

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message."""

    role: Role
    content: str

    def to_dict(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens one call (or many, added up) consumed."""

    input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 0
    """How many model calls this usage covers."""

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.calls + other.calls,
        )

    def to_dict(self) -> dict[str, int]:
        """The ``{input_tokens, output_tokens, calls}`` form recorded with a step."""
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "calls": self.calls,
        }


@dataclass(frozen=True, slots=True)
class LLMResponse:
    """A model's answer to one request."""

    text: str
    """The answer as the model wrote it."""
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    """The model that answered (as the provider names it)."""
    data: Any = None
    """The answer parsed as JSON when a schema was requested and it parsed; else ``None``."""
    structured: str = "none"
    """How the schema was enforced: ``json_schema``, ``json_object``, ``tool`` or ``none``."""


class LLMStream(Protocol):
    """Text deltas as the model writes them; ``response`` is set once the stream is exhausted."""

    response: LLMResponse | None

    def __aiter__(self) -> AsyncIterator[str]: ...


@runtime_checkable
class LLM(Protocol):
    """What planrail needs from a model. ``model`` is the default model name it calls."""

    model: str
    supports_streaming: bool

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        schema: dict[str, Any] | None = None,
        schema_name: str = "answer",
        model: str | None = None,
    ) -> LLMResponse:
        """One request, one answer. ``schema`` asks for JSON following that JSON Schema."""
        ...

    def stream(
        self,
        messages: Sequence[Message],
        *,
        schema: dict[str, Any] | None = None,
        schema_name: str = "answer",
        model: str | None = None,
    ) -> LLMStream:
        """Like :meth:`complete`, yielding text as it arrives (only if ``supports_streaming``)."""
        ...


class SDKClient:
    """What the clients over a vendor SDK share: closing the SDK client's HTTP connections,
    directly or with ``async with``."""

    _client: Any
    """The vendor SDK's async client (it has an async ``close()``)."""

    async def aclose(self) -> None:
        """Close the HTTP connections (also done by ``async with``)."""
        await self._client.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
