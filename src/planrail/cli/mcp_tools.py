"""``--mcp`` and ``--mcp-config`` on ``validate``, ``run``, ``plan``, ``resume`` and ``mcp serve``.

The servers are started (or connected to) once per command and stay up until it ends: the
listing that validation uses and every call of the run share one session per server.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from planrail.cli.common import ExitCode, fail, when_the_command_ends
from planrail.errors import MissingExtraError, PlanrailError
from planrail.plan.tools import ToolRegistry

if TYPE_CHECKING:
    from planrail.integrations.mcp import MCPHub

__all__ = ["McpConfigOpt", "McpOpt", "add_mcp_tools"]

McpOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--mcp",
        help="An MCP server whose tools the plan may call as NAME.TOOL: NAME=COMMAND (stdio;"
        " split like a shell) or NAME=http://… (Streamable HTTP); repeatable.",
    ),
]
McpConfigOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--mcp-config",
        help="MCP servers with per-server options (trusted, call_timeout, max_output_bytes,"
        " max_inflight, env, headers): JSON or YAML, see docs/mcp.md; repeatable.",
    ),
]


def add_mcp_tools(
    registry: ToolRegistry,
    mcp: list[str] | None,
    mcp_config: list[Path] | None,
    console: Console,
) -> MCPHub | None:
    """Start the servers named on the command line and add their tools to ``registry``.

    The servers stop when the command ends. Exit 2 (usage) saying why if one cannot be
    started or reached, or the extra is not installed.
    """
    if not mcp and not mcp_config:
        return None
    try:
        from planrail.integrations.mcp import MCPHub, mcp_tools, servers_from
    except MissingExtraError as exc:
        raise _usage(console, exc.message) from None
    _sdk_logs_on_one_line()
    try:
        servers = servers_from(mcp or (), mcp_config or ())
        hub = MCPHub(servers).start()
        when_the_command_ends(hub.close)
        tools = hub.submit(mcp_tools(hub)).result()
    except PlanrailError as exc:
        raise _usage(console, exc.message) from None
    for t in tools:
        registry.add(t)
    return hub


class _OneLine(logging.Handler):
    """The MCP SDK's log records as one line each on stderr, without their traceback.

    The SDK logs a stdio server's stray stdout line (a banner printed before the protocol)
    with ``logger.exception``; with no handler, Python's last resort printed the whole
    traceback for each line, where the CLI promises one line (``docs/cli.md``)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
            exc = record.exc_info[1] if record.exc_info else None
            if exc is not None:
                text = f"{text} ({_summary(exc)})"
            sys.stderr.write(f"warning: {record.name}: {_escaped(text)}\n")
        except Exception:  # pragma: no cover - as logging.Handler does
            self.handleError(record)


def _summary(exc: BaseException) -> str:
    errors = getattr(exc, "errors", None)  # pydantic's ValidationError: the first error
    if callable(errors):
        with contextlib.suppress(Exception):
            first = errors(include_url=False)[0]
            return f"{first['msg']}: {str(first.get('input'))[:120]!r}"
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0][:200]}" if lines else type(exc).__name__


def _escaped(text: str) -> str:
    return text.replace("\r", "\\r").replace("\n", "\\n")


def _sdk_logs_on_one_line() -> None:
    """Send the ``mcp`` loggers' warnings and errors through :class:`_OneLine` (once)."""
    sdk = logging.getLogger("mcp")
    if not any(isinstance(h, _OneLine) for h in sdk.handlers):
        sdk.addHandler(_OneLine(logging.WARNING))
    sdk.propagate = False


def _usage(console: Console, message: str) -> typer.Exit:
    return fail(console, message, ExitCode.USAGE)
