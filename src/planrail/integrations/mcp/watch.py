"""A transport's streams, watched: when the server's side ended, and whether a call was sent.

The SDK answers a request on a dead connection with one error (``CONNECTION_CLOSED``) whether
the request was written before the connection closed or refused before it was ever handed to
the transport. The two mean opposite things for a tool that does not honour idempotency keys
(in doubt, or never called), so the hub tells them apart here:

- the read stream reaching its end (a stdio server that exited, even between calls) ends the
  session at once, so the next call starts a new one instead of failing on the dead one;
- a ``tools/call`` request handed to the write stream is recorded in the calling task
  (:func:`record_calls`): a call whose request never got there was not sent;
- an answer the SDK cannot read (an integer of thousands of digits, a ``result`` that is no
  object) reaches the session as an exception, and the request waited for its timeout: when
  the line is still JSON whose ``id`` names the request, it becomes an error answer of that
  request (:data:`UNREADABLE`);
- on stdio, any other line that is no JSON-RPC message (not JSON, a cut answer, JSON without
  ``method``, ``result`` or ``error``) may have been the answer of any call in flight, and no
  ``id`` says which: it becomes an error answer (:data:`GARBLED`) of every ``tools/call``
  request written and not yet answered, so those calls end at once, their outcome unknown,
  instead of each waiting for its timeout. A blank line, or one while no call is in flight
  (a banner before the protocol), is left to the SDK, which logs it.
"""

from __future__ import annotations

import contextlib
import json
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Self

import anyio
import mcp_types
from mcp.client import Transport
from mcp.shared.message import SessionMessage

__all__ = ["GARBLED", "UNREADABLE", "Sent", "record_calls", "watched"]

UNREADABLE = "planrail/unreadable_answer"
"""The ``data`` of the error answer that stands for a server's unreadable answer."""
GARBLED = "planrail/garbled_line"
"""The ``data`` of the error answer that stands for a stdio line that is no JSON-RPC message,
sent to each call in flight (its ``message`` quotes the line's start)."""

_SENT: ContextVar[Sent | None] = ContextVar("planrail_mcp_sent", default=None)


@dataclass(eq=False)
class Sent:
    """The ``tools/call`` requests one task handed to the transport (see :func:`record_calls`)."""

    ids: list[object] = field(default_factory=list)
    _inflight: list[set[object]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.ids)


@contextlib.contextmanager
def record_calls() -> Iterator[Sent]:
    """The ``tools/call`` requests this task hands to the transport while in the block (their
    ids): empty when the call was never sent. Leaving the block, they are no longer in flight."""
    sent = Sent()
    token = _SENT.set(sent)
    try:
        yield sent
    finally:
        _SENT.reset(token)
        for inflight in sent._inflight:
            inflight.difference_update(sent.ids)


@contextlib.asynccontextmanager
async def watched(
    transport: Transport, ended: Callable[[], None], *, stdio: bool = False
) -> AsyncIterator[Any]:
    """``transport``'s streams; ``ended`` is called once its read stream is over. On ``stdio``
    a line that is no JSON-RPC message ends the calls in flight (:data:`GARBLED`)."""
    inflight: set[object] = set()
    async with transport as (read, write):
        yield _Read(read, ended, inflight if stdio else None), _Write(write, inflight)


class _Stream:
    """A stream wrapping ``inner``: closing and entering it are the inner stream's."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        result: bool | None = await self._inner.__aexit__(*exc)
        return result


class _Read(_Stream):
    """The read stream, calling ``ended`` when it is over (EOF, or closed under us), and
    answering the calls in ``inflight`` when a line is no JSON-RPC message (None: never)."""

    def __init__(self, inner: Any, ended: Callable[[], None], inflight: set[object] | None) -> None:
        super().__init__(inner)
        self._ended = ended
        self._inflight = inflight
        self._answers: deque[SessionMessage] = deque()

    @property
    def last_context(self) -> Any:  # the SDK reads the sender's context from its stream
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        if self._answers:
            return self._answers.popleft()
        try:
            item = await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._ended()
            raise
        if not isinstance(item, Exception):
            if self._inflight and isinstance(item.message, _ANSWERS):
                self._inflight.discard(item.message.id)
            return item
        read = _read_line(item)
        if isinstance(read, SessionMessage):
            if self._inflight:
                self._inflight.discard(read.message.id)  # type: ignore[union-attr]
            return read
        if read is None or not self._inflight:
            return item  # the SDK logs it (a warning line on the CLI)
        error = mcp_types.ErrorData(code=mcp_types.PARSE_ERROR, message=read, data=GARBLED)
        self._answers.extend(
            SessionMessage(mcp_types.JSONRPCError(jsonrpc="2.0", id=rid, error=error))
            for rid in sorted(self._inflight, key=str)
        )
        self._inflight.clear()
        return self._answers.popleft()

    def __aiter__(self) -> _Read:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None


class _Write(_Stream):
    """The write stream, recording each ``tools/call`` request it accepts (see
    :func:`record_calls`); one the transport refused (it is closed) was not sent."""

    def __init__(self, inner: Any, inflight: set[object]) -> None:
        super().__init__(inner)
        self._inflight = inflight

    async def send(self, item: Any, /) -> None:
        sent = _SENT.get()
        message = getattr(item, "message", None)
        if sent is None or not (
            isinstance(message, mcp_types.JSONRPCRequest) and message.method == "tools/call"
        ):
            await self._inner.send(item)
            return
        sent.ids.append(message.id)  # from here a cancelled send may still have delivered it
        sent._inflight.append(self._inflight)
        self._inflight.add(message.id)
        try:
            await self._inner.send(item)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            sent.ids.remove(message.id)  # refused: nothing was handed over
            self._inflight.discard(message.id)
            raise


_ANSWERS = (mcp_types.JSONRPCResponse, mcp_types.JSONRPCError)
_EXCERPT = 80


def _read_line(exc: Exception) -> SessionMessage | str | None:
    """What a line the SDK could not parse (``exc``) was: an answer whose request can be told
    (the top-level ``id`` of a line that is JSON for Python, a response's shape) as the error
    answer standing for it; the line's start when it may have been any call's answer; None when
    it is blank, no answer (it has a ``method``), or no parse error at all."""
    errors = getattr(exc, "errors", None)
    if not isinstance(exc, ValueError) or not callable(errors):
        return None
    try:
        found = errors(include_url=False)
    except Exception:
        return None
    for error in found:
        raw, kind = error.get("input"), error.get("type")
        if isinstance(raw, str | bytes) and kind == "json_invalid":
            text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
            try:  # Python's parser takes what pydantic's refuses (huge integers, as text)
                top = json.loads(text, parse_int=str, parse_float=str, parse_constant=str)
            except ValueError:
                return _excerpt(text) if text.strip() else None
            return _told(top, str(error.get("msg"))[:200], text)
        if (kind, len(error.get("loc", ()))) in (("missing", 2), ("model_type", 1)):
            return _told(raw, "not a JSON-RPC response", json.dumps(raw))
    return None


def _told(top: Any, why: str, text: str) -> SessionMessage | str | None:
    if isinstance(top, dict) and "method" in top:
        return None  # a request or notification the SDK cannot read: no call's answer
    return _answer(top, why) or _excerpt(text)


def _answer(top: Any, why: str) -> SessionMessage | None:
    """The error answer of the request whose response ``top`` is; None if it is none."""
    if not isinstance(top, dict) or not ({"result", "error"} & set(top)):
        return None
    rid = top.get("id")
    if isinstance(rid, str) and rid.isdigit() and len(rid) < 19 and rid == str(int(rid)):
        rid = int(rid)  # parse_int gave it as text
    if isinstance(rid, bool) or not isinstance(rid, int | str):
        return None
    error = mcp_types.ErrorData(code=mcp_types.PARSE_ERROR, message=why, data=UNREADABLE)
    return SessionMessage(mcp_types.JSONRPCError(jsonrpc="2.0", id=rid, error=error))


def _excerpt(text: str) -> str:
    cut = text if len(text) <= _EXCERPT else text[:_EXCERPT] + "…"
    return repr(cut)
