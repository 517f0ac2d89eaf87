"""MCP tools as planrail tools: ``NAME.TOOL``, their specs, and one call as one attempt.

- ``inputSchema`` becomes the spec's input schema (arguments are checked at validation time,
  and again against the resolved values before each call, with the draft its ``$schema``
  names; a schema that is not JSON Schema fails the listing: ``schemas.py``); ``outputSchema``
  its output schema, so references into the output are type-checked before approval. The
  step's output is the call's structured content; a tool without structured content gives its
  text (the text blocks joined), or, when it returns other kinds of content, the content
  blocks as JSON.
- The effect class comes from the annotations (``readOnlyHint`` → ``none``,
  ``idempotentHint`` → ``idempotent``, else ``unsafe``; a ``planrail/side_effects`` entry in
  the tool's ``_meta`` wins) only for a *trusted* server; every tool of an untrusted server is
  ``unsafe`` and needs approval. The operator's ``tools`` entries in the config override both.
- The step's idempotency key goes in the request's ``_meta`` (:data:`META_KEY`), with the run
  id, step id and attempt.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mcp_types
import pydantic_core

from planrail.engine.gate import bind_schemas
from planrail.errors import ArgumentError, OutputError, ToolLoadError
from planrail.integrations.mcp.config import ServerConfig
from planrail.integrations.mcp.errors import (
    MCPToolError,
    OutcomeUnknownError,
    OutputTooLargeError,
)
from planrail.integrations.mcp.hub import Dropped, MCPHub, schema_hash
from planrail.integrations.mcp.schemas import argument_problem, checked_validator
from planrail.plan.catalog import parse_catalog
from planrail.plan.effects import tool_effect
from planrail.plan.model import Plan
from planrail.plan.tools import StepContext, ToolRegistry, ToolSpec

__all__ = [
    "META_KEY",
    "SIDE_EFFECTS_KEY",
    "MCPTool",
    "apply_pins",
    "bind_approval",
    "mcp_tools",
    "pins",
    "spec_for",
]

META_KEY = "planrail/idempotency_key"
"""The ``_meta`` entry of every ``tools/call`` request holding the step's idempotency key
(``planrail/run_id``, ``planrail/step_id`` and ``planrail/attempt`` are sent too)."""

SIDE_EFFECTS_KEY = "planrail/side_effects"
"""A tool's ``_meta`` entry with its planrail effect class (``keyed``: it honours the key),
believed of trusted servers only."""

_TRUNCATED = "…[truncated by planrail: the output had {size} bytes]"


def spec_for(server: ServerConfig, remote: mcp_types.Tool) -> ToolSpec:
    """The planrail spec of ``remote``, named ``SERVER.TOOL``."""
    entry = remote.model_dump(mode="json", by_alias=True, exclude_none=True)
    ours: dict[str, Any] = {"timeout": server.call_timeout}
    if not server.trusted:
        ours |= {"side_effects": "unsafe", "requires_approval": True}
    elif (remote.meta or {}).get(SIDE_EFFECTS_KEY) in ("none", "idempotent", "keyed", "unsafe"):
        ours["side_effects"] = (remote.meta or {})[SIDE_EFFECTS_KEY]
    ours |= dict(server.tools.get(remote.name, {}))
    entry["x-planrail"] = ours
    entry["name"] = f"{server.name}.{remote.name}"
    (spec,) = parse_catalog([entry], source=f"MCP server {server.name!r}")
    return spec


class MCPTool:
    """A tool of an MCP server, callable as a step (the tool protocol).

    ``pin`` is the schema hash the plan was approved with (by default the one listed when
    the tool was made); a call is refused while the server reports another.
    """

    def __init__(self, hub: MCPHub, server: ServerConfig, remote: mcp_types.Tool) -> None:
        self.hub = hub
        self.server = server
        self.remote_name = remote.name
        self.spec = spec_for(server, remote)
        self.name = self.spec.name
        self.schema_hash = schema_hash(remote)
        self.pin: str | None = self.schema_hash
        self._validator = checked_validator(
            server.name, remote.name, "inputSchema", remote.input_schema
        )

    def __repr__(self) -> str:
        return f"<planrail MCPTool {self.name!r}>"

    async def invoke(self, args: Mapping[str, Any], ctx: StepContext) -> Any:
        """One ``tools/call`` (see :class:`~planrail.plan.tools.ToolProtocol`)."""
        arguments = dict(args)
        problem = argument_problem(self.name, self._validator, arguments)
        if problem is not None:
            raise ArgumentError(
                f"arguments for MCP tool '{self.name}' do not fit its input schema: {problem}"
            )
        meta = {
            META_KEY: ctx.idempotency_key,
            "planrail/run_id": ctx.run_id,
            "planrail/step_id": ctx.step_id,
            "planrail/attempt": ctx.attempt,
        }
        try:
            result = await self.hub.call(
                self.server.name, self.remote_name, arguments, meta, self.pin
            )
        except Dropped as exc:
            safe = tool_effect(self.spec).may_rerun
            then = (
                "calling it again is safe (it honours idempotency keys)"
                if safe
                else "it does not honour idempotency keys, so it is in doubt: decide with"
                " `planrail resolve`"
            )
            what = (
                f"the connection to MCP server {self.server.name!r} dropped during the call of"
                f" '{self.name}' ({exc})"
                if exc.garbled is None
                else f"MCP server {self.server.name!r} wrote a line on stdout that is not"
                f" JSON-RPC ({exc.garbled}) while the call of '{self.name}' was in flight,"
                " perhaps its answer, cut or garbled"
            )
            raise OutcomeUnknownError(
                f"{what}; it may or may not have happened; {then}", in_doubt=not safe
            ) from exc
        except RuntimeError as exc:  # the SDK checked structured content against outputSchema
            raise OutputError(f"MCP tool '{self.name}': {exc}") from exc
        return self.output(result)

    def output(self, result: mcp_types.CallToolResult) -> Any:
        """The step's output from a call's result (``isError`` raises :class:`MCPToolError`)."""
        if result.is_error:
            text = _text(result.content) or "(no message)"
            raise MCPToolError(f"MCP tool '{self.name}' failed: {text}")
        limit = self.server.max_output_bytes
        if result.structured_content is not None:
            size = len(pydantic_core.to_json(result.structured_content))
            if size > limit:
                raise self._too_large(size, "structured outputs are never truncated")
            return result.structured_content
        if all(isinstance(b, mcp_types.TextContent) for b in result.content):
            text = _text(result.content)
            size = len(text.encode("utf-8"))
            if size <= limit:
                return text
            if self.server.on_large_output == "truncate":
                cut = text.encode("utf-8")[:limit].decode("utf-8", errors="ignore")
                return cut + _TRUNCATED.format(size=size)
            raise self._too_large(size, "on_large_output: truncate would cut it")
        blocks = [
            b.model_dump(mode="json", by_alias=True, exclude_none=True) for b in result.content
        ]
        size = len(pydantic_core.to_json(blocks))
        if size > limit:
            raise self._too_large(size, "content blocks are never truncated")
        return blocks

    def _too_large(self, size: int, note: str) -> OutputTooLargeError:
        return OutputTooLargeError(
            f"MCP tool '{self.name}' returned {size:,} bytes, over max_output_bytes"
            f" ({self.server.max_output_bytes:,}) of server {self.server.name!r}; {note}"
        )


def _text(content: list[mcp_types.ContentBlock]) -> str:
    return "\n".join(b.text for b in content if isinstance(b, mcp_types.TextContent))


async def mcp_tools(hub: MCPHub) -> list[MCPTool]:
    """Every tool of every server of ``hub``, as planrail tools."""
    listings = await hub.alisting()
    for server, tools in listings.items():
        _check_entries(hub.servers[server], tools)
    return [
        MCPTool(hub, hub.servers[server], remote)
        for server, tools in listings.items()
        for remote in tools.values()
    ]


def _check_entries(server: ServerConfig, listed: Mapping[str, mcp_types.Tool]) -> None:
    """The config's ``tools`` entries name tools the server lists: an entry for a tool it does
    not list (a typo) would drop the operator's word (``requires_approval``) without a sign."""
    unknown = sorted(set(server.tools) - set(listed))
    if unknown:
        names = ", ".join(sorted(listed)) or "none"
        raise ToolLoadError(
            f"MCP server {server.name!r}: the config's 'tools' name {unknown} it does not list"
            f" (it lists: {names})"
        )


def pins(tools: list[MCPTool], names: set[str] | None = None) -> dict[str, str]:
    """The schema hashes an approval binds to (of the tools named, or all)."""
    return {t.name: t.schema_hash for t in tools if names is None or t.name in names}


def apply_pins(tools: list[MCPTool], pinned: Mapping[str, str]) -> None:
    """Bind each tool to the schema hash an earlier approval recorded for it."""
    for t in tools:
        if t.name in pinned:
            t.pin = pinned[t.name]


def bind_approval(approval: dict[str, Any], plan: Plan, registry: ToolRegistry) -> dict[str, Any]:
    """Bind ``approval`` to the schemas of the plan's MCP tools — the run path's own
    :func:`planrail.engine.gate.bind_schemas` (``tool_schemas`` in the approval record)."""
    return bind_schemas(approval, plan, registry)
