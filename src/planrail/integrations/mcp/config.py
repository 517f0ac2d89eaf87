"""Which MCP servers a run uses, and how planrail treats each: ``--mcp`` and ``--mcp-config``.

``--mcp NAME=COMMAND`` starts ``COMMAND`` (split as a shell splits words) as a stdio server;
``--mcp NAME=http://…`` (or ``https://``) connects to a Streamable HTTP server. A config file
(JSON or YAML) says the same with per-server options::

    servers:                      # "mcpServers" (the desktop-assistant form) is read too
      crm:
        command: python examples/onboarding/mcp_server.py    # or a list; "args" appends
        env: {PLANRAIL_DEMO_LATENCY: "0"}
        trusted: true             # believe its tool annotations (docs/mcp.md)
        call_timeout: 30          # seconds per call (default 300)
        start_timeout: 10         # seconds to start and list its tools (default 30)
        max_output_bytes: 1048576 # larger outputs fail, or are truncated (on_large_output)
        on_large_output: fail     # or "truncate" (text outputs only)
        max_inflight: 8           # most calls in flight on this server at once
        tools:                    # the operator's word on a tool, trusted or not
          create_account: {side_effects: keyed}
      search:
        url: http://127.0.0.1:8000/mcp
        headers: {Authorization: "Bearer ${SEARCH_TOKEN}"}   # ${NAME}: from the environment
"""

from __future__ import annotations

import math
import os
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from planrail.errors import ToolLoadError
from planrail.plan.loader import PlanLimits, load_document, read_bounded

__all__ = ["ServerConfig", "load_config", "parse_option", "servers_from"]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_KEYS = frozenset(
    {
        "command",
        "args",
        "url",
        "env",
        "headers",
        "cwd",
        "trusted",
        "call_timeout",
        "start_timeout",
        "max_output_bytes",
        "on_large_output",
        "max_inflight",
        "tools",
    }
)
_TOOL_KEYS = frozenset(
    {"side_effects", "requires_approval", "timeout", "retry", "resource", "secret_params"}
)


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """One MCP server: how to reach it and how far to believe it."""

    name: str
    """The prefix of its tools in plans: ``NAME.TOOL``."""
    command: tuple[str, ...] = ()
    """A stdio server's command line (empty for an HTTP server)."""
    url: str | None = None
    """A Streamable HTTP server's endpoint."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Added to planrail's own environment for a stdio server."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """Sent with every request to an HTTP server."""
    cwd: str | None = None
    trusted: bool = False
    """Whether its tool annotations (read-only, idempotent) decide the effect class; an
    untrusted server's tools are all ``unsafe`` and need approval."""
    call_timeout: float = 300.0
    """Seconds one call may take (the tools' default ``timeout``)."""
    start_timeout: float = 30.0
    """Seconds the server may take to start (or be reached) and list its tools: a server that
    never answers (one that prints something else on stdout, one that hangs) is then a clear
    error, not a wait without end."""
    max_output_bytes: int = 1024 * 1024
    """Largest output accepted from one call, in bytes of JSON (or of text)."""
    on_large_output: Literal["fail", "truncate"] = "fail"
    """``truncate`` cuts a larger *text* output to the limit; structured outputs always fail."""
    max_inflight: int = 16
    """Most calls in flight on this server at once (others wait)."""
    tools: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Per tool (by its name on the server): ``side_effects``, ``requires_approval``,
    ``timeout``, ``retry``, ``resource``, ``secret_params`` — the operator's statement, used
    even when the server is untrusted."""

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "http" if self.url is not None else "stdio"

    def describe(self) -> str:
        """How errors name the server: its command line, or its URL without credentials or
        query string (``user:password@`` and ``?api_key=…`` are shown, and stored, nowhere)."""
        return _safe_url(self.url) if self.url is not None else shlex.join(self.command)


def _safe_url(url: str) -> str:
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    query = "?…" if parts.query else ""
    return urlunsplit((parts.scheme, host, parts.path, "", "")) + query


def parse_option(value: str) -> ServerConfig:
    """``NAME=COMMAND`` or ``NAME=http(s)://…`` (the ``--mcp`` option)."""
    name, sep, target = value.partition("=")
    name, target = name.strip(), target.strip()
    if not sep or not target:
        raise ToolLoadError(f"--mcp {_masked(value)}: expected NAME=COMMAND or NAME=http://…")
    return _server(name, {"url": target} if _is_url(target) else {"command": target}, "--mcp")


def _masked(value: str) -> str:
    """An ``--mcp`` value as errors show it: a URL in it without credentials or query."""
    name, sep, target = value.partition("=")
    return f"{name}{sep}{_safe_url(target.strip())}" if _is_url(target.strip()) else value


_MAX_CONFIG_BYTES = 1024 * 1024
_WHAT = "the MCP config"


def load_config(path: str | Path) -> list[ServerConfig]:
    """The servers of a ``--mcp-config`` file (JSON or YAML)."""
    where = f"--mcp-config {path}"
    try:
        limits = PlanLimits(max_plan_bytes=_MAX_CONFIG_BYTES)
        text = read_bounded(path, _MAX_CONFIG_BYTES, _WHAT, "1 MiB")
        fmt = "yaml" if str(path).endswith((".yaml", ".yml")) else None
        data = load_document(text, limits, fmt=fmt, what=_WHAT)
    except Exception as exc:  # PlanLoadError, OSError: one line saying why
        raise ToolLoadError(f"{where}: {getattr(exc, 'message', exc)}") from exc
    servers = data.get("servers", data.get("mcpServers")) if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise ToolLoadError(f'{where}: expected {{"servers": {{NAME: {{...}}}}}}')
    return [_server(str(name), entry, where) for name, entry in servers.items()]


def servers_from(
    options: Iterable[str] = (), configs: Iterable[str | Path] = ()
) -> list[ServerConfig]:
    """Every server named by ``--mcp`` options and ``--mcp-config`` files; names are unique."""
    found: list[ServerConfig] = []
    for path in configs:
        found.extend(load_config(path))
    found.extend(parse_option(o) for o in options)
    seen: set[str] = set()
    for server in found:
        if server.name in seen:
            raise ToolLoadError(f"MCP server {server.name!r} is named twice")
        seen.add(server.name)
    return found


def _is_url(target: str) -> bool:
    return target.startswith(("http://", "https://"))


def _server(name: str, entry: Any, where: str) -> ServerConfig:
    where = f"{where}: server {name!r}"
    if not _NAME.match(name):
        raise ToolLoadError(
            f"{where}: a server name starts with a letter or '_', then letters, digits, '_' or"
            " '-', at most 64 characters (its tools are NAME.TOOL)"
        )
    if not isinstance(entry, dict):
        raise ToolLoadError(f"{where}: expected an object")
    unknown = set(entry) - _KEYS
    if unknown:
        raise ToolLoadError(f"{where}: unknown option(s) {sorted(unknown)}")
    command = entry.get("command")
    url = entry.get("url")
    if (command is None) == (url is None):
        raise ToolLoadError(f"{where}: give either 'command' (stdio) or 'url' (HTTP)")
    argv: list[str] = []
    if command is not None:
        if isinstance(command, str):
            try:
                argv = shlex.split(command)
            except ValueError as exc:
                raise ToolLoadError(f"{where}: cannot split the command: {exc}") from None
        elif isinstance(command, list) and all(isinstance(a, str) for a in command):
            argv = list(command)
        else:
            raise ToolLoadError(f"{where}: 'command' must be a string or a list of strings")
        argv += _strings(entry.get("args", []), where, "args")
        if not argv:
            raise ToolLoadError(f"{where}: the command is empty")
    elif not isinstance(url, str) or not _is_url(url):
        raise ToolLoadError(f"{where}: 'url' must start with http:// or https://")
    on_large = entry.get("on_large_output", "fail")
    if on_large not in ("fail", "truncate"):
        raise ToolLoadError(f"{where}: on_large_output is 'fail' or 'truncate'")
    tools = entry.get("tools", {})
    if not isinstance(tools, dict) or not all(
        isinstance(v, dict) and set(v) <= _TOOL_KEYS for v in tools.values()
    ):
        raise ToolLoadError(
            f"{where}: 'tools' maps tool names to {{{', '.join(sorted(_TOOL_KEYS))}}}"
        )
    cwd = entry.get("cwd")
    if cwd is not None and (not isinstance(cwd, str) or not cwd):
        raise ToolLoadError(f"{where}: 'cwd' must be a directory's path (a string)")
    trusted = entry.get("trusted", False)
    if not isinstance(trusted, bool):
        raise ToolLoadError(f"{where}: 'trusted' is true or false")
    return ServerConfig(
        name=name,
        command=tuple(argv),
        url=url,
        env=_mapping(entry.get("env", {}), where, "env"),
        headers=_mapping(entry.get("headers", {}), where, "headers"),
        cwd=cwd,
        trusted=trusted,
        call_timeout=_positive(entry, "call_timeout", 300.0, where),
        start_timeout=_positive(entry, "start_timeout", 30.0, where),
        max_output_bytes=_positive_int(entry, "max_output_bytes", 1024 * 1024, where),
        on_large_output=on_large,
        max_inflight=_positive_int(entry, "max_inflight", 16, where),
        tools=tools,
    )


def _strings(value: Any, where: str, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
        raise ToolLoadError(f"{where}: '{key}' must be a list of strings")
    return list(value)


def _mapping(value: Any, where: str, key: str) -> dict[str, str]:
    """Names to strings, with ``${NAME}`` replaced by that environment variable (so tokens
    stay out of the file); an unset variable is an error, never an empty string."""
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ToolLoadError(f"{where}: '{key}' maps names to strings")

    def expand(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in os.environ:
            raise ToolLoadError(f"{where}: {key} uses ${{{name}}}, which is not set")
        return os.environ[name]

    return {str(k): _VAR.sub(expand, v) for k, v in value.items()}


def _positive(entry: dict[str, Any], key: str, default: float, where: str) -> float:
    value = entry.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        raise ToolLoadError(f"{where}: '{key}' must be a positive number, got {value!r}")
    return float(value)


def _positive_int(entry: dict[str, Any], key: str, default: int, where: str) -> int:
    """A count (bytes, calls): a whole number above 0 — ``0.5`` would have become 0 and made
    every call fail."""
    value = entry.get(key, default)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ToolLoadError(f"{where}: '{key}' must be a positive whole number, got {value!r}")
    return value
