"""A real MCP server (the SDK's ``MCPServer``) whose tools misbehave on purpose, for the tests.

Run as ``python probe_server.py`` (stdio) or ``python probe_server.py --http`` (Streamable HTTP
on 127.0.0.1, a free port, printed as ``PORT <n>`` on stdout once it listens).

``$PROBE_DIR`` is a directory for marker files (a crash happens once per label);
``$PROBE_VARIANT`` (``a`` or ``b``) picks the schema of ``versioned``.
"""

from __future__ import annotations

import asyncio
import os
import sys
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


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def sleep(seconds: float) -> str:
    """Sleep; a cancelled sleep is remembered (ask ``was_cancelled``), and so is the most
    sleeps at once (ask ``peak``)."""
    _sleeping["now"] += 1
    _sleeping["peak"] = max(_sleeping["peak"], _sleeping["now"])
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
    if "--http" in sys.argv:
        _serve_http()
    else:
        server.run()
