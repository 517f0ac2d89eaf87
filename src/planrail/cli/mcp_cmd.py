"""``planrail mcp serve``: planrail as an MCP server (stdio, or Streamable HTTP with --http)."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console

from planrail.cli.common import (
    CatalogOpt,
    ExitCode,
    OverridePolicyOpt,
    PolicyOpt,
    StoreOpt,
    StrictOpt,
    ToolsOpt,
    app,
    fail,
    open_store_or_exit,
    registry_from,
    security_policy,
)
from planrail.cli.listening import check_address, listen_or_exit, url_host
from planrail.cli.mcp_tools import McpConfigOpt, McpOpt, add_mcp_tools
from planrail.cli.printable import console as printable_console
from planrail.errors import MissingExtraError

__all__: list[str] = []

mcp_app = typer.Typer(help="planrail and the Model Context Protocol.", no_args_is_help=True)
app.add_typer(mcp_app, name="mcp")


@mcp_app.command("serve")
def serve_cmd(
    tools: ToolsOpt = None,
    catalog: CatalogOpt = None,
    mcp: McpOpt = None,
    mcp_config: McpConfigOpt = None,
    store: StoreOpt = None,
    policy: PolicyOpt = None,
    strict: StrictOpt = False,
    override_policy: OverridePolicyOpt = False,
    http: Annotated[
        str | None,
        typer.Option(
            "--http",
            metavar="HOST:PORT",
            help="Serve Streamable HTTP at /mcp (port 0: any free port, printed on stderr).",
        ),
    ] = None,
) -> None:
    """Serve validate_plan, run_plan, get_run, list_runs and resume_run over MCP (stdio by
    default); the plans' tools come from --tools and --mcp servers. The runs run under --policy
    (and --strict), stored with them; resume_run refuses a run started under another policy
    unless --override-policy. A call the policy holds for approval is refused. See docs/mcp.md."""
    console = printable_console(stderr=True, highlight=False)  # stdout: the protocol's
    host, port = _address(http, console) if http is not None else ("", 0)
    try:
        from planrail.integrations.mcp.server import Service, build_server
    except MissingExtraError as exc:
        raise fail(console, exc.message, ExitCode.USAGE) from None
    security = security_policy(policy, strict, console)
    registry = registry_from(tools, catalog, console)
    add_mcp_tools(registry, mcp, mcp_config, console)
    service = Service(
        registry, open_store_or_exit(store, console), security, policy_override=override_policy
    )
    server = build_server(service)
    if http is None:
        server.run()
        return
    import uvicorn

    sock = listen_or_exit(console, host, port)
    bound = sock.getsockname()[1]

    class Announcing(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            console.print(f"planrail MCP server on http://{url_host(host)}:{bound}/mcp")

    app_ = server.streamable_http_app(host=host)
    Announcing(uvicorn.Config(app_, host=host, port=bound, log_level="warning")).run([sock])


def _address(value: str, console: Console) -> tuple[str, int]:
    """HOST:PORT, an IPv6 host bracketed as in a URL (``[::1]:8765``) or not (``::1:8765``)."""
    host, sep, port = value.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port.isdigit():
        raise fail(console, f"--http {value}: expected HOST:PORT", ExitCode.USAGE)
    if (number := int(port)) > 65535:
        raise fail(console, f"--http {value}: a port is 0 to 65535", ExitCode.USAGE)
    check_address(console, host, number)
    return host, number
