"""``planrail ui``: the local dashboard (see ``docs/dashboard.md``; needs the ``[web]`` extra)."""

from __future__ import annotations

import math
import re
from typing import Annotated

import typer
from rich.markup import escape

from planrail.cli.common import (
    CatalogOpt,
    ExitCode,
    StoreOpt,
    ToolsOpt,
    app,
    fail,
    open_store_or_exit,
    operator_name,
    out,
    registry_from,
)
from planrail.cli.listening import check_address, listen_or_exit
from planrail.clock import SYSTEM_CLOCK
from planrail.store import Store
from planrail.types import Clock

__all__: list[str] = []

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
MIN_TOKEN_LENGTH = 16
"""The shortest ``--token`` taken (the generated ones are 32 characters)."""
_URL_SAFE = re.compile(r"[A-Za-z0-9_.~-]+")


@app.command("ui")
def ui_cmd(
    store: StoreOpt = None,
    host: Annotated[
        str, typer.Option("--host", help="Address to listen on (0.0.0.0 needs --token).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="0: any free port.")] = 8765,
    token: Annotated[
        str | None,
        typer.Option(
            "--token", envvar="PLANRAIL_UI_TOKEN", help="Access token (default: a random one)."
        ),
    ] = None,
    allow_host: Annotated[
        list[str] | None,
        typer.Option("--allow-host", help="Another host name the browser may use; repeatable."),
    ] = None,
    tools: ToolsOpt = None,
    catalog: CatalogOpt = None,
) -> None:
    """Serve a dashboard of the store's runs: watch them live, approve, cancel, resolve, resume.

    Prints the URL to open (it carries the access token). Resuming runs needs their tools
    (--tools/--catalog, as for `planrail run`); without them resume is disabled.
    """
    console = out(False)
    try:
        from planrail.web import Dashboard, DashboardServer, Guard, new_token
    except ImportError:
        raise fail(
            console, "planrail ui needs the web extra: pip install 'planrail[web]'", ExitCode.USAGE
        ) from None
    check_address(console, host, port)
    if host not in LOOPBACK and not token:
        raise fail(
            console,
            f"--host {host} makes the dashboard reachable from other machines: give an explicit"
            " --token (or PLANRAIL_UI_TOKEN)",
            ExitCode.USAGE,
        )
    if token is not None and (len(token) < MIN_TOKEN_LENGTH or not _URL_SAFE.fullmatch(token)):
        raise fail(
            console,
            f"--token must be at least {MIN_TOKEN_LENGTH} characters of A-Z a-z 0-9 - _ . ~"
            " (it is the key to every operator action, and it travels in the printed URL);"
            " one is printed by: python -c 'import secrets; print(secrets.token_urlsafe(24))'",
            ExitCode.USAGE,
        )
    for name in allow_host or ():
        if not name.strip() or name.count(":") == 1 or "/" in name:
            raise fail(
                console,
                f"--allow-host {name!r}: give a host name or address alone, without a port"
                " or scheme (the port is --port's)",
                ExitCode.USAGE,
            )
    registry = registry_from(tools, catalog, console)
    the_store = open_store_or_exit(store, console)
    sock = listen_or_exit(console, host, port)
    port = int(sock.getsockname()[1])
    hosts = {"127.0.0.1", "localhost", "::1", *(allow_host or ())}
    if host not in ("0.0.0.0", "::"):
        hosts.add(host)
    dash = Dashboard(
        store=the_store,
        guard=Guard(token or new_token(), port, hosts),
        registry=registry,
        can_resume=bool(tools or catalog),
        operator=operator_name().replace("(cli)", "(dashboard)"),
    )
    server = DashboardServer(dash, host, port)
    console.print(f"planrail dashboard: [bold]{server.url()}[/]")
    if not dash.can_resume:
        console.print("[dim]resume disabled: pass --tools/--catalog to run steps from here[/]")
    try:
        server.run(sock)
    finally:  # uvicorn raises Ctrl-C's KeyboardInterrupt again once it has stopped
        for run_id in dash.given_up:
            console.print(_left_running(the_store, run_id, dash.stop_grace), highlight=False)


def _left_running(store: Store, run_id: str, grace: float, clock: Clock = SYSTEM_CLOCK) -> str:
    """What the stop says of a run it gave up still running (``Dashboard.stop_resumes``)."""
    lease = store.get_lease(run_id)
    left = 0.0 if lease is None else lease.expires_at - clock.now()
    when = f"once its lease expires, in {math.ceil(left)} s at the latest" if left > 0 else "now"
    return (
        f"[yellow]run {escape(run_id)} had not stopped {grace:g} s after its cancel: it is left"
        f" as a crash leaves it (running); `planrail resume {escape(run_id)}` can take it over"
        f" {when}[/]"
    )
