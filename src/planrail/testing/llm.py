"""A scripted LLM for tests: canned or computed answers, token counts, streaming, failures.

::

    llm = ScriptedLLM([plan_json, "a summary"], usage=(100, 20))
    result = await Agent(llm, tools, approval=approve_all).run("Onboard Alice")
    assert llm.requests[1].messages[0].content.startswith("Goal: Onboard Alice")

Each answer is a string, JSON data (a dict or list, sent as JSON text), a :class:`Scripted`
(text plus token counts, stream chunks or an error), an exception to raise, or a function of
the :class:`LLMRequest` returning any of these. Every request is recorded in ``requests``.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from planrail.llm.base import LLMResponse, Message, Usage
from planrail.llm.errors import LLMAnswerError
from planrail.llm.jsontext import extract_json

__all__ = ["LLMRequest", "Scripted", "ScriptedLLM", "count_tokens"]


def count_tokens(text: str) -> int:
    """The scripted token count of ``text``: its number of words (stable, easy to reason about)."""
    return len(text.split())


@dataclass(frozen=True, slots=True)
class LLMRequest:
    """One request a scripted LLM (or the test server) received."""

    messages: tuple[Message, ...]
    schema: dict[str, Any] | None = None
    schema_name: str = "answer"
    model: str | None = None
    stream: bool = False

    @property
    def text(self) -> str:
        """All message contents, joined by blank lines."""
        return "\n\n".join(m.content for m in self.messages)


@dataclass(frozen=True, slots=True)
class Scripted:
    """One scripted answer with everything about it that a test may want to set."""

    text: str = ""
    input_tokens: int | None = None
    """Default: the words of the request (:func:`count_tokens`)."""
    output_tokens: int | None = None
    """Default: the words of ``text``."""
    chunks: Sequence[str] | None = None
    """How ``text`` is split when streamed (default: about one line per chunk)."""
    error: BaseException | None = None
    """Raised instead of answering."""


Answer = str | dict[str, Any] | list[Any] | Scripted | BaseException
AnswerSource = Answer | Callable[[LLMRequest], Answer]


class ScriptedLLM:
    """An :class:`~planrail.llm.LLM` that answers from a script, in order.

    ``on_chunk(index, chunk)``, if given, is awaited before each streamed chunk is delivered:
    a test can hold the stream there until something else has happened.
    """

    def __init__(
        self,
        answers: Iterable[AnswerSource] = (),
        *,
        respond: Callable[[LLMRequest], Answer] | None = None,
        model: str = "scripted",
        streaming: bool = True,
        on_chunk: Callable[[int, str], Awaitable[None]] | None = None,
    ) -> None:
        self.model = model
        self.supports_streaming = streaming
        self.respond = respond
        self.on_chunk = on_chunk
        self.requests: list[LLMRequest] = []
        self._answers: deque[AnswerSource] = deque(answers)

    def add(self, *answers: AnswerSource) -> None:
        """Queue more answers."""
        self._answers.extend(answers)

    @property
    def remaining(self) -> int:
        return len(self._answers)

    def _next(self, request: LLMRequest) -> Scripted:
        self.requests.append(request)
        if self._answers:
            source = self._answers.popleft()
        elif self.respond is not None:
            source = self.respond
        else:
            raise AssertionError(
                f"ScriptedLLM: no answer scripted for request {len(self.requests)}"
                f" (last message: {request.messages[-1].content[:200]!r})"
            )
        answer = source(request) if callable(source) else source
        if isinstance(answer, BaseException):
            raise answer
        if isinstance(answer, dict | list):
            return Scripted(json.dumps(answer))
        if isinstance(answer, str):
            return Scripted(answer)
        if answer.error is not None:
            raise answer.error
        return answer

    def _response(self, request: LLMRequest, answer: Scripted) -> LLMResponse:
        usage = Usage(
            count_tokens(request.text) if answer.input_tokens is None else answer.input_tokens,
            count_tokens(answer.text) if answer.output_tokens is None else answer.output_tokens,
            1,
        )
        if not answer.text.strip():
            raise LLMAnswerError("the model's answer is empty", text=answer.text)
        data = None
        if request.schema is not None:
            try:
                data = extract_json(answer.text)
            except LLMAnswerError:
                data = None
        structured = "json_schema" if request.schema is not None else "none"
        return LLMResponse(answer.text, usage, request.model or self.model, data, structured)

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        schema: dict[str, Any] | None = None,
        schema_name: str = "answer",
        model: str | None = None,
    ) -> LLMResponse:
        request = LLMRequest(tuple(messages), schema, schema_name, model)
        return self._response(request, self._next(request))

    def stream(
        self,
        messages: Sequence[Message],
        *,
        schema: dict[str, Any] | None = None,
        schema_name: str = "answer",
        model: str | None = None,
    ) -> _ScriptedStream:
        if not self.supports_streaming:
            raise NotImplementedError("this ScriptedLLM was made with streaming=False")
        return _ScriptedStream(self, LLMRequest(tuple(messages), schema, schema_name, model, True))


class _ScriptedStream:
    def __init__(self, llm: ScriptedLLM, request: LLMRequest) -> None:
        self.llm = llm
        self.request = request
        self.response: LLMResponse | None = None

    async def __aiter__(self) -> AsyncIterator[str]:
        answer = self.llm._next(self.request)
        chunks = answer.chunks
        if chunks is None:
            chunks = answer.text.splitlines(keepends=True) or [answer.text]
        elif "".join(chunks) != answer.text and answer.text:
            raise AssertionError("Scripted.chunks must add up to Scripted.text")
        text = "".join(chunks)
        for i, chunk in enumerate(chunks):
            if self.llm.on_chunk is not None:
                await self.llm.on_chunk(i, chunk)
            yield chunk
        self.response = self.llm._response(
            self.request,
            Scripted(text, answer.input_tokens, answer.output_tokens),
        )
