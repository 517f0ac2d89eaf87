"""Sessions with MCP servers: one long-lived session per server, on the hub's own event loop.

The hub runs the SDK's clients on a background thread with its own event loop, so one set of
sessions serves a whole command — listing the tools for validation, then every call of the
run — whichever loop (or none) the caller runs. A call from another loop is a future of the
hub's loop; cancelling it cancels the request (the SDK tells the server with
``notifications/cancelled``).

A session that dies (the stdio server crashed or exited, the HTTP server went away) is closed
as soon as its transport ends, even between calls; the next call starts a new one and lists the
tools again, so a crashed server is restarted for the next call and never hangs the run: calls
in flight on the dead session fail at once (their outcome unknown), and a call the dead session
refused before sending it is made on a new one (``watch.py`` tells the two apart).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import sys
import threading
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO, TypeVar, cast

import anyio
import httpx2
import mcp_types
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost
from mcp.shared.exceptions import MCPError

from planrail._json import canonical_data, digest
from planrail.integrations.mcp.config import ServerConfig
from planrail.integrations.mcp.errors import (
    MCPRequestError,
    MCPUnavailableError,
    SchemaChangedError,
)
from planrail.integrations.mcp.watch import GARBLED, UNREADABLE, record_calls, watched

__all__ = ["Dropped", "MCPHub", "schema_hash"]

log = logging.getLogger("planrail.mcp")
T = TypeVar("T")

_TRANSPORT_ERRORS = (
    httpx2.TransportError,
    OSError,
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
)
_RETRYABLE_CODES = frozenset({mcp_types.REQUEST_TIMEOUT})
_NEW_RUN = (
    "this run's approval cannot cover it; start a new run of the plan (approved against the"
    " tool as the server now describes it)"
)
"""The remedy of a :class:`SchemaChangedError`: a run's approval is bound to the schemas it
recorded, and such a run is never asked again."""


class Dropped(Exception):
    """Internal: this call's request was sent, then the session died — or, with ``garbled``
    (the line's start), the server wrote a line that is no JSON-RPC message while it was in
    flight, perhaps its answer. Either way its outcome is unknown."""

    def __init__(self, why: str, *, garbled: str | None = None) -> None:
        super().__init__(why)
        self.garbled = garbled


def schema_hash(tool: mcp_types.Tool) -> str:
    """What an approval pins: the tool's input and output schemas and its annotations."""
    pinned = {
        "inputSchema": tool.input_schema,
        "outputSchema": tool.output_schema,
        "annotations": None
        if tool.annotations is None
        else tool.annotations.model_dump(mode="json", by_alias=True, exclude_none=True),
    }
    return digest(canonical_data(pinned))


@dataclass(eq=False)
class _Session:
    """One live session and the tool listing it started with."""

    client: Client
    tools: dict[str, mcp_types.Tool]
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the session is closed, or its transport ended (the server exited)."""
    stale: bool = False
    """The server said its tools changed (``list_changed``): list them again before a call."""

    @property
    def dead(self) -> bool:
        return self.stop.is_set()

    def close(self) -> None:
        self.stop.set()


class _Connection:
    """A server's session, started on first use and again after it died. Hub loop only."""

    def __init__(self, config: ServerConfig, errlog: TextIO) -> None:
        self.config = config
        self.errlog = errlog
        self.sessions_started = 0
        self._session: _Session | None = None
        self._lock = asyncio.Lock()
        self._inflight = asyncio.Semaphore(config.max_inflight)
        self._keepers: set[asyncio.Task[None]] = set()

    async def session(self) -> _Session:
        async with self._lock:
            if self._session is None or self._session.dead:
                self._session = await self._open()
            return self._session

    async def _open(self) -> _Session:
        ready: asyncio.Future[_Session] = asyncio.get_running_loop().create_future()
        keeper = asyncio.create_task(self._keep(ready), name=f"mcp-session-{self.config.name}")
        self._keepers.add(keeper)
        keeper.add_done_callback(self._keepers.discard)
        try:
            session = await asyncio.wait_for(ready, self.config.start_timeout)
        except Exception as exc:
            if isinstance(exc, TimeoutError) and ready.cancelled():  # the wait ran out
                keeper.cancel()  # leaves the SDK's contexts: the server process is stopped
                await asyncio.gather(keeper, return_exceptions=True)
                why = f"no answer within {self.config.start_timeout:g} s (start_timeout)"
            else:
                why = self._unsecret(_describe(exc))
            raise MCPUnavailableError(
                f"MCP server {self.config.name!r} ({self.config.describe()}) could not be"
                f" started or reached: {why}"
            ) from exc
        self.sessions_started += 1
        return session

    def _unsecret(self, text: str) -> str:
        """``text`` with the server's URL as :meth:`ServerConfig.describe` shows it (an HTTP
        error may quote the URL, its credentials and query string with it)."""
        url = self.config.url
        return text if url is None else text.replace(url, self.config.describe())

    async def _keep(self, ready: asyncio.Future[_Session]) -> None:
        """Hold the session open (the SDK's contexts must be left in the task that entered
        them) until it is closed or dies."""
        session: _Session | None = None
        stop = asyncio.Event()  # set by the transport's end too: a server gone between calls
        try:
            async with contextlib.AsyncExitStack() as stack:
                transport = watched(
                    await self._transport(stack), ended=stop.set, stdio=self.config.url is None
                )
                client = await stack.enter_async_context(
                    Client(transport, cache=None, raise_exceptions=False)
                )
                session = _Session(client, await _list_tools(client), stop)
                ready.set_result(session)
                watcher = asyncio.create_task(_watch_tools(session))
                try:
                    await session.stop.wait()
                finally:
                    watcher.cancel()
                    await asyncio.gather(watcher, return_exceptions=True)
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(
                    exc if isinstance(exc, Exception) else MCPUnavailableError(str(exc))
                )
            if not isinstance(exc, Exception):
                raise
            if session is not None:
                log.debug("MCP server %r: session ended: %s", self.config.name, _describe(exc))
        finally:
            stop.set()

    async def _transport(self, stack: contextlib.AsyncExitStack) -> Any:
        cfg = self.config
        if cfg.url is not None:
            http = await stack.enter_async_context(
                httpx2.AsyncClient(
                    headers=dict(cfg.headers),
                    timeout=httpx2.Timeout(30.0, read=cfg.call_timeout + 30),
                )
            )
            # Outputs are held to max_output_bytes; the SSE event carrying one is JSON (with
            # its text copy), so the transport's own bound is set above that.
            return streamable_http_client(
                cfg.url, http_client=http, max_sse_event_size=3 * cfg.max_output_bytes + 65536
            )
        params = StdioServerParameters(
            command=cfg.command[0],
            args=list(cfg.command[1:]),
            env={**os.environ, **cfg.env},
            cwd=cfg.cwd,
        )
        return stdio_client(params, errlog=self.errlog)

    async def ended(self) -> None:
        """Until the current session (if any) has ended: closed, or its server gone."""
        if self._session is not None:
            await self._session.stop.wait()

    async def listing(self) -> dict[str, mcp_types.Tool]:
        return (await self.session()).tools

    async def call(
        self, tool: str, args: dict[str, Any], meta: dict[str, Any], pin: str | None
    ) -> mcp_types.CallToolResult:
        async with self._inflight:
            for _ in range(2):  # a session found dead before the request was sent: once more
                session = await self.session()
                if session.stale:
                    session.stale = False
                    session.tools = await self._relist(session)
                if pin is not None:
                    _check_pin(f"{self.config.name}.{tool}", session.tools.get(tool), pin)
                with record_calls() as sent:
                    try:
                        return await session.client.call_tool(
                            tool, args, meta=cast(mcp_types.RequestParamsMeta, meta)
                        )
                    except MCPError as exc:
                        if exc.data == GARBLED:  # written, then a line that is no answer
                            raise Dropped(exc.message, garbled=exc.message) from exc
                        if exc.code != mcp_types.CONNECTION_CLOSED:
                            raise self._refused(tool, exc) from exc
                        cause: Exception = exc
                    except _TRANSPORT_ERRORS as exc:
                        cause = exc
                session.close()
                why = cause.message if isinstance(cause, MCPError) else _describe(cause)
                if sent:  # written, then the connection closed: it may have happened
                    raise Dropped(why) from cause
            raise MCPUnavailableError(
                f"MCP server {self.config.name!r} closed the connection before the call of"
                f" {tool!r} was sent (twice; nothing was sent): {why}"
            ) from cause

    def _refused(self, tool: str, exc: MCPError) -> MCPRequestError:
        """A JSON-RPC error answer (or the stand-in for an unreadable one) as a step error."""
        if exc.data == UNREADABLE:  # it answered: the call was made
            return MCPRequestError(
                f"MCP server {self.config.name!r} answered the call of {tool!r} with a reply"
                f" that cannot be read ({exc.message}); the call was made, its result is lost",
                rpc_code=exc.code,
            )
        return MCPRequestError(
            f"MCP server {self.config.name!r} refused the call of {tool!r}:"
            f" {exc.message} (JSON-RPC error {exc.code})",
            rpc_code=exc.code,
            retryable=exc.code in _RETRYABLE_CODES,
        )

    async def _relist(self, session: _Session) -> dict[str, mcp_types.Tool]:
        try:
            return await _list_tools(session.client)
        except (MCPError, *_TRANSPORT_ERRORS) as exc:  # the call itself was not sent
            session.close()
            raise MCPUnavailableError(
                f"MCP server {self.config.name!r} could not list its tools again: {_describe(exc)}"
            ) from exc

    async def aclose(self) -> None:
        if self._session is not None:
            self._session.close()
        if self._keepers:
            await asyncio.wait(list(self._keepers), timeout=10)


async def _watch_tools(session: _Session) -> None:
    """Mark the session's listing stale whenever the server says its tools changed
    (``subscriptions/listen``, 2026-07-28 servers; older ones are relisted on reconnect)."""
    try:
        async with session.client.listen(tools_list_changed=True) as events:
            async for _ in events:
                session.stale = True
    except (ListenNotSupportedError, SubscriptionLost, MCPError, TimeoutError) as exc:
        log.debug("no tools/list_changed events from this server: %s", _describe(exc))


def _check_pin(name: str, listed: mcp_types.Tool | None, pin: str) -> None:
    if listed is None:
        raise SchemaChangedError(f"MCP tool '{name}' is no longer listed by its server: {_NEW_RUN}")
    now = schema_hash(listed)
    if now != pin:
        raise SchemaChangedError(
            f"MCP tool '{name}' changed since the plan was approved (schema {now[:19]}…,"
            f" approved {pin[:19]}…): {_NEW_RUN}"
        )


async def _list_tools(client: Client) -> dict[str, mcp_types.Tool]:
    tools: dict[str, mcp_types.Tool] = {}
    cursor: str | None = None
    for _ in range(100):  # a paginator that never ends cannot hang the start of a session
        page = await client.list_tools(cursor=cursor)
        tools.update((t.name, t) for t in page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def _describe(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class MCPHub:
    """The MCP servers of one command (``--mcp``): sessions on a background event loop.

    Use it as a context manager (sync or async); :meth:`tools` lists every server's tools as
    planrail tools named ``NAME.TOOL``.
    """

    def __init__(self, servers: Sequence[ServerConfig], *, errlog: TextIO | None = None) -> None:
        self.servers = {s.name: s for s in servers}
        self._errlog = errlog if errlog is not None else _real_stderr()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._connections: dict[str, _Connection] = {}

    # ------------------------------------------------------------------ the loop

    def start(self) -> MCPHub:
        if self._loop is None:
            loop = asyncio.new_event_loop()
            self._thread = threading.Thread(
                target=loop.run_forever, name="planrail-mcp", daemon=True
            )
            self._thread.start()
            self._loop = loop
            self._connections = self.submit(self._connect()).result()
        return self

    async def _connect(self) -> dict[str, _Connection]:
        return {n: _Connection(s, self._errlog) for n, s in self.servers.items()}

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run ``coro`` on the hub's loop; cancelling the future cancels it."""
        if self._loop is None:
            coro.close()
            raise RuntimeError("the MCP hub is not started (use it as a context manager)")
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    async def arun(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await ``coro`` run on the hub's loop from any other loop (cancellation goes through)."""
        return await asyncio.wrap_future(self.submit(coro))

    def close(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        with contextlib.suppress(Exception):
            self.submit(self._aclose()).result(timeout=30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=30)
        if not thread.is_alive():
            loop.close()
        self._loop = self._thread = None

    async def _aclose(self) -> None:
        await asyncio.gather(*(c.aclose() for c in self._connections.values()))

    def __enter__(self) -> MCPHub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> MCPHub:
        return await asyncio.to_thread(self.start)

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.close)

    # ------------------------------------------------------------------ what callers use

    def connection(self, server: str) -> _Connection:
        return self._connections[server]

    async def alisting(self) -> dict[str, dict[str, mcp_types.Tool]]:
        """Each server's tools, connecting to every server at once."""

        async def all_listings() -> dict[str, dict[str, mcp_types.Tool]]:
            names = list(self._connections)
            found = await asyncio.gather(*(self._connections[n].listing() for n in names))
            return dict(zip(names, found, strict=True))

        return await self.arun(all_listings())

    async def call(
        self, server: str, tool: str, args: dict[str, Any], meta: dict[str, Any], pin: str | None
    ) -> mcp_types.CallToolResult:
        """Call ``tool`` on ``server`` (refused if its schema hash is no longer ``pin``)."""
        return await self.arun(self._connections[server].call(tool, args, meta, pin))

    def sessions_started(self, server: str) -> int:
        """How many sessions ``server`` has had (more than one: it was restarted)."""
        return self._connections[server].sessions_started


def _real_stderr() -> TextIO:
    """Where a stdio server's own stderr goes: ours, if it is a real file (under a test
    runner ``sys.stderr`` may be a capture buffer without a file descriptor)."""
    for stream in (sys.stderr, sys.__stderr__):
        try:
            if stream is not None:
                stream.fileno()
                return stream
        except (AttributeError, OSError, ValueError):
            continue
    return open(os.devnull, "w")
