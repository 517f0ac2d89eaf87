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
  request (:data:`UNREADABLE`).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable, Iterator
from contextvars import ContextVar
from typing import Any, Self

import anyio
import mcp_types
from mcp.client import Transport
from mcp.shared.message import SessionMessage

__all__ = ["UNREADABLE", "record_calls", "watched"]

UNREADABLE = "planrail/unreadable_answer"
"""The ``data`` of the error answer that stands for a server's unreadable answer."""

_SENT: ContextVar[list[object] | None] = ContextVar("planrail_mcp_sent", default=None)


@contextlib.contextmanager
def record_calls() -> Iterator[list[object]]:
    """The ``tools/call`` requests this task hands to the transport while in the block (their
    ids): empty when the call was never sent."""
    sent: list[object] = []
    token = _SENT.set(sent)
    try:
        yield sent
    finally:
        _SENT.reset(token)


@contextlib.asynccontextmanager
async def watched(transport: Transport, ended: Callable[[], None]) -> AsyncIterator[Any]:
    """``transport``'s streams; ``ended`` is called once its read stream is over."""
    async with transport as (read, write):
        yield _Read(read, ended), _Write(write)


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
    """The read stream, calling ``ended`` when it is over (EOF, or closed under us)."""

    def __init__(self, inner: Any, ended: Callable[[], None]) -> None:
        super().__init__(inner)
        self._ended = ended

    @property
    def last_context(self) -> Any:  # the SDK reads the sender's context from its stream
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        try:
            item = await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._ended()
            raise
        if isinstance(item, Exception):
            return _unreadable_answer(item) or item
        return item

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

    async def send(self, item: Any, /) -> None:
        sent = _SENT.get()
        message = getattr(item, "message", None)
        if sent is None or not (
            isinstance(message, mcp_types.JSONRPCRequest) and message.method == "tools/call"
        ):
            await self._inner.send(item)
            return
        sent.append(message.id)  # from here a cancelled send may still have delivered it
        try:
            await self._inner.send(item)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            sent.remove(message.id)  # refused: nothing was handed over
            raise


def _unreadable_answer(exc: Exception) -> SessionMessage | None:
    """The error answer standing for a response the SDK could not parse, when its request can
    be told (the top-level ``id`` of a line that is JSON for Python, a response's shape)."""
    errors = getattr(exc, "errors", None)
    if not isinstance(exc, ValueError) or not callable(errors):
        return None
    try:
        found = errors(include_url=False)
    except Exception:
        return None
    top: Any = None
    for error in found:
        raw = error.get("input")
        if isinstance(raw, str | bytes) and error.get("type") == "json_invalid":
            try:  # Python's parser takes what pydantic's refuses (huge integers, as text)
                top = json.loads(raw, parse_int=str, parse_float=str, parse_constant=str)
            except ValueError:
                return None
        elif error.get("type") == "missing" and len(error.get("loc", ())) == 2:
            top = raw  # a union member's missing field: the input is the whole message
        if top is not None:
            why = "not a JSON-RPC response" if raw is top else str(error.get("msg"))[:200]
            break
    if not isinstance(top, dict) or "method" in top or not ({"result", "error"} & set(top)):
        return None
    rid = top.get("id")
    if isinstance(rid, str) and rid.isdigit() and len(rid) < 19 and rid == str(int(rid)):
        rid = int(rid)  # parse_int gave it as text
    if isinstance(rid, bool) or not isinstance(rid, int | str):
        return None
    error = mcp_types.ErrorData(code=mcp_types.PARSE_ERROR, message=why, data=UNREADABLE)
    return SessionMessage(mcp_types.JSONRPCError(jsonrpc="2.0", id=rid, error=error))
