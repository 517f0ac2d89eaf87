"""MCP both ways (``pip install 'planrail[mcp]'``; see ``docs/mcp.md``).

- **MCP servers as tool sources**: :class:`MCPHub` holds one session per server;
  :func:`mcp_tools` lists their tools as planrail tools named ``NAME.TOOL``.
- **planrail as an MCP server**: ``planrail mcp serve`` (:mod:`planrail.integrations.mcp.server`).
"""

from __future__ import annotations

from planrail.errors import MissingExtraError

try:
    import mcp as _sdk  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise MissingExtraError("MCP support needs the mcp extra: pip install 'planrail[mcp]'") from exc

from planrail.integrations.mcp.config import ServerConfig, load_config, parse_option, servers_from
from planrail.integrations.mcp.errors import (
    MCPRequestError,
    MCPToolError,
    MCPUnavailableError,
    OutcomeUnknownError,
    OutputTooLargeError,
    SchemaChangedError,
)
from planrail.integrations.mcp.expose import serve_tools
from planrail.integrations.mcp.hub import MCPHub, schema_hash
from planrail.integrations.mcp.tools import (
    META_KEY,
    SIDE_EFFECTS_KEY,
    MCPTool,
    apply_pins,
    bind_approval,
    mcp_tools,
    pins,
)

__all__ = [
    "META_KEY",
    "SIDE_EFFECTS_KEY",
    "MCPHub",
    "MCPRequestError",
    "MCPTool",
    "MCPToolError",
    "MCPUnavailableError",
    "OutcomeUnknownError",
    "OutputTooLargeError",
    "SchemaChangedError",
    "ServerConfig",
    "apply_pins",
    "bind_approval",
    "load_config",
    "mcp_tools",
    "parse_option",
    "pins",
    "schema_hash",
    "serve_tools",
    "servers_from",
]
