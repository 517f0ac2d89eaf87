"""Tools for ``test_serve_bad_text.py``: a tool failing with text that is not Unicode, tools
raising ``KeyboardInterrupt`` (sync and async), one that blocks until the server is stopped,
and one that works."""

from __future__ import annotations

import sys
import threading

import planrail


@planrail.tool(side_effects="none")
def undecodable(name: str) -> str:
    """Fails quoting a file name Python decoded with ``surrogateescape``."""
    raise OSError(f"cannot read /data/{name}\udcff.txt")


@planrail.tool(side_effects="none")
def interrupting(name: str) -> str:
    """A sync tool raising ``KeyboardInterrupt`` (its worker thread's own, never a Ctrl-C)."""
    raise KeyboardInterrupt


@planrail.tool(side_effects="none")
async def interrupting_async(name: str) -> str:
    """An async tool raising ``KeyboardInterrupt`` on the server's event loop."""
    raise KeyboardInterrupt


@planrail.tool(side_effects="none")
def blocking(name: str) -> str:
    """Says on stderr that it started, then blocks (until the server process ends)."""
    print(f"blocking tool started: {name}", file=sys.stderr, flush=True)
    threading.Event().wait()
    return name


@planrail.tool(side_effects="none")
def echo(name: str) -> str:
    """Works."""
    return name
