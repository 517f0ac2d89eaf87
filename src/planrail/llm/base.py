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

from planrail.plan.strict_json import escape_surrogates

__all__ = ["LLM", "LLMResponse", "LLMStream", "Message", "Role", "SDKClient", "Usage"]

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message."""

    role: Role
    content: str

    def to_dict(self) -> dict[str, str]:
        """What is sent: a lone surrogate in the content (a model's earlier answer quoted back,
        a goal from undecodable command-line bytes) is sent as its escape, ``\\ud800``, as no
        UTF-8 request can carry it."""
        return {"role": self.role, "content": escape_surrogates(self.content)}


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens one call (or many, added up) consumed."""

    input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 0
    """How many model calls this usage covers."""
    estimated: bool = False
    """Some of the counts are estimates (the provider reported none, e.g. a stream without a
    usage chunk): about 4 characters a token."""

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.calls + other.calls,
            self.estimated or other.estimated,
        )

    @classmethod
    def estimate(cls, prompt: str, answer: str) -> Usage:
        """One call's usage estimated from the text sent and received (~4 characters a token)."""
        return cls(_tokens(prompt), _tokens(answer), 1, True)

    def to_dict(self) -> dict[str, int]:
        """The ``{input_tokens, output_tokens, calls}`` form recorded with a step (and
        ``estimated: 1`` when the counts are estimates)."""
        data = {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "calls": self.calls,
        }
        if self.estimated:
            data["estimated"] = 1
        return data


def _tokens(text: str) -> int:
    return (len(text) + 3) // 4


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
    """How the schema was asked for: a :data:`~planrail.llm.dialects.MODES` entry, ``tool``
    (Anthropic) or ``none``."""
    finish_reason: str = ""
    """Why the model stopped, as the provider says (``stop``; ``length``: cut off at
    ``max_tokens``, the text is incomplete and ``data`` is ``None``)."""
    fallbacks: tuple[str, ...] = ()
    """The structured-output forms the provider refused before this answer, and why."""

    @property
    def cut_off(self) -> bool:
        """The answer stopped at ``max_tokens`` (or the context's end): it is incomplete."""
        return self.finish_reason == "length"


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
