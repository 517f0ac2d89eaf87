"""Serve ``@planrail.tool`` functions as an MCP server (the SDK's ``MCPServer``).

Each tool keeps its input schema (its signature) and output schema (its return annotation);
its effect class becomes annotations (``none`` → ``readOnlyHint``, ``idempotent`` →
``idempotentHint``), and a tool that honours idempotency keys says so in its ``_meta``
(``planrail/side_effects: keyed``), which planrail believes of a trusted server. The step
context the function receives carries the idempotency key planrail sent in the request's
``_meta``.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

from planrail.integrations.mcp.tools import META_KEY, SIDE_EFFECTS_KEY
from planrail.plan.tools import StepContext, Tool

__all__ = ["serve_tools"]

_ANNOTATIONS = {
    "none": ToolAnnotations(read_only_hint=True),
    "idempotent": ToolAnnotations(read_only_hint=False, idempotent_hint=True),
    "keyed": ToolAnnotations(read_only_hint=False, idempotent_hint=False, destructive_hint=False),
    "unsafe": ToolAnnotations(read_only_hint=False, idempotent_hint=False, destructive_hint=True),
}
"""What an MCP client is told of each effect class (``keyed`` also goes in the tool's
``_meta``: MCP has no word for "honours an idempotency key")."""


def serve_tools(tools: Iterable[Tool], name: str = "planrail-tools", **options: Any) -> MCPServer:
    """An ``MCPServer`` offering ``tools`` (run it with ``.run()`` for stdio)."""
    server = MCPServer(name, **options)
    for t in tools:
        spec = t.spec
        server.add_tool(
            _handler(t),
            name=t.name,
            description=spec.description,
            annotations=_ANNOTATIONS[spec.side_effects],
            meta={SIDE_EFFECTS_KEY: spec.side_effects},
        )
    return server


def _handler(t: Tool) -> Callable[..., Any]:
    """A function with ``t``'s parameters (less its step context) and return type, plus the
    MCP request context, that calls ``t`` with a step context built from the request."""
    original = inspect.signature(t.fn, eval_str=True)
    params = [p for n, p in original.parameters.items() if n != t.context_param]
    ctx_param = inspect.Parameter("mcp_context", inspect.Parameter.KEYWORD_ONLY, annotation=Context)

    async def call(mcp_context: Context, **kwargs: Any) -> Any:
        meta: dict[str, Any] = dict(mcp_context.request_context.meta or {})
        step = StepContext(
            run_id=str(meta.get("planrail/run_id", "mcp")),
            step_id=str(meta.get("planrail/step_id", t.name)),
            attempt=int(meta.get("planrail/attempt", 1)),
            idempotency_key=str(meta.get(META_KEY) or f"mcp:{uuid.uuid4().hex}"),
        )
        return await t.invoke(kwargs, step)

    hints = {p.name: p.annotation for p in params}
    call.__signature__ = original.replace(  # type: ignore[attr-defined]
        parameters=[*params, ctx_param]
    )
    call.__annotations__ = {**hints, "mcp_context": Context, "return": original.return_annotation}
    call.__name__ = t.name
    return call
