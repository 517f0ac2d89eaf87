"""``--mcp`` and ``--mcp-config`` on ``validate``, ``run``, ``plan``, ``resume`` and ``mcp serve``.

The servers are started (or connected to) once per command and stay up until it ends: the
listing that validation uses and every call of the run share one session per server.
"""

from __future__ import annotations

import atexit
import importlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from planrail.cli.common import ExitCode, fail
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
    try:
        servers = servers_from(mcp or (), mcp_config or ())
        hub = MCPHub(servers).start()
        _when_the_command_ends(hub.close)
        tools = hub.submit(mcp_tools(hub)).result()
    except PlanrailError as exc:
        raise _usage(console, exc.message) from None
    for t in tools:
        registry.add(t)
    return hub


def _when_the_command_ends(close: Callable[[], None]) -> None:
    """Run ``close`` when the command's context closes (or at exit, outside a command)."""
    ctx = None
    for module in ("typer._click.globals", "click"):  # recent Typer carries its own Click
        try:
            ctx = importlib.import_module(module).get_current_context(silent=True)
            break
        except ImportError:  # pragma: no cover - depends on the Typer version
            continue
    if ctx is not None:
        ctx.call_on_close(close)
    else:
        atexit.register(close)


def _usage(console: Console, message: str) -> typer.Exit:
    return fail(console, message, ExitCode.USAGE)
