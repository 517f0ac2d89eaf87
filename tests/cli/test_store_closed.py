"""A command closes the store it opened when it ends, however it ends (returned, ``typer.Exit``
of any code, a usage error, Ctrl-C), also in-process (``CliRunner``, a program embedding the
app), where no process exit does it for the command. ``ui`` and ``mcp serve`` keep theirs open
while they serve, then close it.

What shows a connection left open: PostgreSQL's driver warns (``ResourceWarning``) when a
connection is collected unclosed, and a SQLite store in WAL mode keeps its ``-wal`` file beside
the database until its last connection closes. Both are looked at while each command's result
(whose traceback holds the command's locals) is still held, then once it is collected.
"""

from __future__ import annotations

import asyncio
import gc
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import planrail
from planrail.plan.catalog import load_tools
from planrail.store import open_store

from .conftest import DATA, TOOLS, Cli

OK_RUN = ["run", str(DATA / "ok.json"), "--tools", TOOLS, "--yes"]
"""``planrail run`` of a plan that succeeds."""

ENDINGS = [
    pytest.param([*OK_RUN, "--run-id", "r2"], 0, id="run-exit-0"),
    pytest.param(
        ["run", str(DATA / "failing.json"), "--tools", TOOLS, "--yes"], 1, id="run-exit-1"
    ),
    pytest.param(["resume", "r1", "--tools", TOOLS], 0, id="resume-nothing-to-do"),
    pytest.param(["runs"], 0, id="runs-returns"),
    pytest.param(["show", "r1", "--json"], 0, id="show"),
    pytest.param(["show", "nope"], 2, id="show-usage-error"),
    pytest.param(["graph", "r1"], 0, id="graph"),
    pytest.param(["graph", "nope"], 2, id="graph-usage-error"),
    pytest.param(["approve", "r1"], 2, id="approve-refused"),
    pytest.param(["cancel", "r1"], 2, id="cancel-refused"),
    pytest.param(["resolve", "r1", "hello", "--retry"], 2, id="resolve-refused"),
]


@contextmanager
def no_connection_left(store_url: str) -> Iterator[list[Any]]:
    """Fails if the block leaves a connection to ``store_url`` open: yields a list to hold the
    block's command results in (kept alive, as an embedding program keeps an exception)."""
    held: list[Any] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        yield held
        if store_url.startswith("sqlite:///"):
            wal = Path(f"{store_url.removeprefix('sqlite:///')}-wal")
            assert not wal.exists(), "a connection to the SQLite store is still open"
        held.clear()
        gc.collect()
    leaked = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert leaked == []


@pytest.fixture
def r1(store_url: str) -> str:
    """``store_url`` holding run ``r1`` (succeeded), made through the API, its store closed."""
    with open_store(store_url) as store:
        execution = planrail.prepare(
            DATA / "ok.json", load_tools(TOOLS), store=store, run_id="r1", approve=True
        )
        assert asyncio.run(execution.run()).status == "succeeded"
    return store_url


def _planrail(cli: Cli, store_url: str, held: list[Any], code: int, *args: str) -> None:
    """``planrail ARGS --store STORE_URL`` in-process: it exits ``code``, and its result is
    kept in ``held`` (not in a local of the test: :func:`no_connection_left` drops it)."""
    held.append(cli(*args, "--store", store_url))
    assert held[-1].exit_code == code, held[-1].output
    assert "Traceback" not in held[-1].output


@pytest.mark.parametrize(("args", "code"), ENDINGS)
def test_a_command_closes_its_store_however_it_ends(
    cli: Cli, r1: str, args: list[str], code: int
) -> None:
    with no_connection_left(r1) as held:
        _planrail(cli, r1, held, code, *args)


def test_a_command_interrupted_by_ctrl_c_closes_its_store(
    cli: Cli, r1: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while ``planrail runs`` prints (the store open): the store is closed all the same."""

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("planrail.cli.runs_cmd.Table", interrupted)
    with no_connection_left(r1) as held:
        _planrail(cli, r1, held, 130, "runs")


def test_ui_and_mcp_serve_keep_their_store_open_while_serving_then_close_it(
    cli: Cli, r1: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each server, stood in for by one that lists the runs and stops: it can (the store is
    open while it serves), and nothing is left open once the command has returned."""
    from planrail.integrations.mcp import server as mcp_server
    from planrail.web.server import DashboardServer

    served: list[str] = []

    def dashboard(self: DashboardServer, sock: Any = None) -> None:
        served.append(f"ui: {len(self.dash.store.list_runs())} run(s)")
        sock.close()  # as uvicorn closes it on shutdown

    class McpServer:
        def __init__(self, service: Any) -> None:
            self.service = service

        def run(self) -> None:
            served.append(f"mcp: {len(self.service.store.list_runs())} run(s)")

    monkeypatch.setattr(DashboardServer, "run", dashboard)
    monkeypatch.setattr(mcp_server, "build_server", McpServer)
    with no_connection_left(r1) as held:
        _planrail(cli, r1, held, 0, "ui", "--port", "0")
        _planrail(cli, r1, held, 0, "mcp", "serve")
    assert served == ["ui: 1 run(s)", "mcp: 1 run(s)"]
