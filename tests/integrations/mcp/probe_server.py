"""A real MCP server (the SDK's ``MCPServer``) whose tools misbehave on purpose, for the tests.

Run as ``python probe_server.py`` (stdio) or ``python probe_server.py --http`` (Streamable HTTP
on 127.0.0.1, a free port, printed as ``PORT <n>`` on stdout once it listens).

``$PROBE_DIR`` is a directory for marker files (a crash happens once per label);
``$PROBE_VARIANT`` (``a`` or ``b``) picks the schema of ``versioned``; ``$PROBE_SCHEMA`` is the
input schema of ``shaped``; ``$PROBE_PRELUDE`` is printed on stdout before the protocol;
``$PROBE_EXIT_ON_CALL`` names a tool whose call makes the process exit unrun (stdio).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp.types import ToolAnnotations
from pydantic import BaseModel

server = MCPServer("probe", log_level="ERROR")
_cancelled = asyncio.Event()


class Account(BaseModel):
    user_id: str
    name: str
    pid: int


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def lookup(name: str) -> Account:
    """Structured output with an output schema (read-only)."""
    return Account(user_id=f"usr_{name.lower()}", name=name, pid=os.getpid())


_sleeping = {"now": 0, "peak": 0}
_asleep = asyncio.Event()


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def sleep(seconds: float) -> str:
    """Sleep; a cancelled sleep is remembered (ask ``was_cancelled``), and so is the most
    sleeps at once (ask ``peak``)."""
    _sleeping["now"] += 1
    _sleeping["peak"] = max(_sleeping["peak"], _sleeping["now"])
    _asleep.set()
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        _cancelled.set()
        raise
    finally:
        _sleeping["now"] -= 1
    return "woke"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def peak() -> int:
    """The most ``sleep`` calls that ran at once."""
    return _sleeping["peak"]


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def was_cancelled() -> bool:
    """Whether a ``sleep`` was cancelled (waits up to 10 s for it)."""
    try:
        await asyncio.wait_for(_cancelled.wait(), 10)
    except TimeoutError:
        return False
    return True


def _crash_once(label: str) -> str:
    marker = Path(os.environ["PROBE_DIR"]) / f"crashed-{label}"
    if not marker.exists():
        marker.write_text(str(os.getpid()))
        os._exit(17)  # mid-call: no answer is ever sent
    return f"done:{os.getpid()}"


@server.tool(annotations=ToolAnnotations(read_only_hint=False, idempotent_hint=False))
def charge(label: str) -> str:
    """Not idempotent; the process exits during its first call."""
    return _crash_once(label)


@server.tool(annotations=ToolAnnotations(read_only_hint=False, idempotent_hint=True))
def upsert(label: str) -> str:
    """Idempotent; the process exits during its first call."""
    return _crash_once(label)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def shaped(pair: list[Any] | None = None, d: Any = None) -> str:
    """Takes what its input schema says: ``$PROBE_SCHEMA`` (JSON) replaces it."""
    return "fits"


if "PROBE_SCHEMA" in os.environ:
    server._tool_manager.get_tool("shaped").parameters = json.loads(  # type: ignore[union-attr]
        os.environ["PROBE_SCHEMA"]
    )


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def huge() -> int:
    """An integer of 5,000 digits: JSON, but more than the SDK's client parser takes."""
    return 10**4999


_garbling = threading.Event()


@server.tool(annotations=ToolAnnotations(read_only_hint=False, idempotent_hint=False))
async def pay(label: str) -> str:
    """Not idempotent: applies a payment (a line in ``paid-LABEL``, the receiver's ledger),
    then waits a minute for its answer, past any test's timeout."""
    with (Path(os.environ["PROBE_DIR"]) / f"paid-{label}").open("a") as ledger:
        ledger.write(f"{os.getpid()}\n")
    await asyncio.sleep(60)
    return "paid"


@server.tool(annotations=ToolAnnotations(read_only_hint=False, idempotent_hint=False))
async def garble(label: str, after_sleep: bool = False) -> str:
    """Not idempotent; its first answer (once per label) is cut in half on the wire: a line on
    stdout that is not JSON, the rest of the answer never written. ``after_sleep``: once a
    ``sleep`` is in flight."""
    if after_sleep:
        await _asleep.wait()
    marker = Path(os.environ["PROBE_DIR"]) / f"garbled-{label}"
    if not marker.exists():
        marker.write_text(str(os.getpid()))
        _garbling.set()
    return f"done:{os.getpid()}"


_leaving = threading.Event()


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def leave() -> int:
    """Answer (with this process's id), then exit once the answer is written: a server that
    is gone between two calls."""
    _leaving.set()
    return os.getpid()


class _Stdout:
    """The wire (stdout), ending the process once it has flushed the answer of ``leave``, and
    cutting the answer of ``garble``."""

    def write(self, text: str) -> int:
        if _garbling.is_set():  # the answer of ``garble``
            _garbling.clear()
            return sys.stdout.write(text[: len(text) // 2] + "\n")
        return sys.stdout.write(text)

    def flush(self) -> None:
        sys.stdout.flush()
        if _leaving.is_set():
            os._exit(0)


class _Stdin:
    """The wire (stdin). With ``$PROBE_EXIT_ON_CALL`` naming a tool, the process exits as soon
    as it reads a call of that tool (leaving a ``received-TOOL`` marker), without running it:
    a request written to its stdin just before it exits."""

    def readline(self) -> str:
        line = sys.stdin.readline()
        victim = os.environ.get("PROBE_EXIT_ON_CALL")
        if victim and line.strip():
            message = json.loads(line)
            if message.get("method") == "tools/call" and message["params"]["name"] == victim:
                (Path(os.environ["PROBE_DIR"]) / f"received-{victim}").write_text(line)
                os._exit(0)
        return line


async def _serve_stdio() -> None:
    import anyio
    from mcp.server.stdio import stdio_server

    lowlevel = server._lowlevel_server
    wire = {"stdin": anyio.wrap_file(_Stdin()), "stdout": anyio.wrap_file(_Stdout())}
    async with stdio_server(**wire) as (read, write):  # type: ignore[arg-type]
        await lowlevel.run(read, write, lowlevel.create_initialization_options())


@server.tool(structured_output=False, annotations=ToolAnnotations(read_only_hint=True))
def big(megabytes: float) -> str:
    """A text output of that many megabytes."""
    return "x" * int(megabytes * 1_000_000)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def fail(message: str) -> str:
    """Always an error result (``isError``)."""
    raise ToolError(message)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def refuse(code: int) -> str:
    """Answer with a JSON-RPC error of that code (not an ``isError`` result)."""
    raise MCPError(code, f"refused with {code}")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def seen(ctx: Context) -> dict[str, object]:
    """The ``_meta`` of this request (planrail's entries)."""
    meta = ctx.request_context.meta or {}
    return {k: v for k, v in meta.items() if k.startswith("planrail/")}


if os.environ.get("PROBE_VARIANT", "a") == "a":

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def versioned(x: int) -> int:
        """Schema a."""
        return x

else:

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def versioned(x: int, extra: str = "") -> int:  # type: ignore[misc]
        """Schema b: a new argument."""
        return x


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def evolve(ctx: Context) -> str:
    """Give ``versioned`` a new argument, and tell listening clients the tools changed."""
    server.remove_tool("versioned")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def versioned(x: int, extra: str = "") -> int:
        return x

    await ctx.notify_tools_changed()
    return "evolved"


def _serve_http() -> None:
    import uvicorn

    class Announcing(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            print(f"PORT {self.servers[0].sockets[0].getsockname()[1]}", flush=True)

    config = uvicorn.Config(
        server.streamable_http_app(), host="127.0.0.1", port=0, log_level="error"
    )
    Announcing(config).run()


if __name__ == "__main__":
    sys.stdout.write(os.environ.get("PROBE_PRELUDE", ""))  # lines before the protocol's
    sys.stdout.flush()
    if "--http" in sys.argv:
        _serve_http()
    else:
        asyncio.run(_serve_stdio())
