"""The dashboard stops (``planrail ui`` ended by Ctrl-C, or its server stopped) while a run it
resumed is still under way: the run is cancelled and recorded so — ``cancelled``, its step
``cancelled``, its lease released, resumable at once — before the store closes under it. It
used to be left to die with the process: ``running`` in the store, its lease held until it
expired, and (since the CLI closes its store when a command ends) a log line from a thread
whose store had closed.

A run that has not recorded its cancel when the grace is over (a tool slow to stop) is given up:
cut off from the store before the store closes, it writes nothing more and ends without a log
line; the store keeps it as a crash leaves it, for a resume once its lease has expired. It used
to record its end against the closed store: a traceback logged, then a warning."""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path

import httpx
import pytest

import planrail
from planrail.engine import operations
from planrail.engine.approval import defer
from planrail.engine.lease import RunBusyError
from planrail.plan.tools import Tool, ToolRegistry
from planrail.store import Store, open_store
from planrail.testing.clock import FakeClock
from planrail.web import Dashboard, DashboardServer, Guard
from planrail.web.server import free_port

STARTED = threading.Event()
CANCELLED = threading.Event()
RELEASE = threading.Event()


@planrail.tool(side_effects="keyed")
async def hold(step: str) -> dict[str, str]:
    """Says it started, then waits until it is cancelled."""
    STARTED.set()
    await asyncio.Event().wait()
    return {"step": step}


@planrail.tool(side_effects="keyed")
async def slow_to_stop(step: str) -> dict[str, str]:
    """Says it started, then waits until it is cancelled; says that too, and takes until the
    test releases it to stop."""
    STARTED.set()
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        CANCELLED.set()
        await asyncio.to_thread(RELEASE.wait)
        raise
    return {"step": step}


def resumed(store: Store, tool: Tool, *, stop_grace: float = 10.0) -> DashboardServer:
    """A dashboard over ``store`` that has resumed run ``R`` (one step ``w`` of ``tool``, made
    waiting for approval and approved), once the step's call has started."""
    STARTED.clear()
    plan = {"goal": "g", "steps": [{"id": "w", "tool": tool.name, "args": {"step": "w"}}]}
    waiting = planrail.runs.prepare(plan, [tool], store=store, approver=defer, run_id="R")
    assert asyncio.run(waiting.run()).status == "awaiting_approval"
    operations.approve(store, "R")
    port = free_port()
    dash = Dashboard(
        store=store,
        guard=Guard("test-token-0123456789", port),
        registry=ToolRegistry.of([tool]),
        can_resume=True,
        stop_grace=stop_grace,
    )
    server = DashboardServer(dash, "127.0.0.1", port).start()
    headers = {
        "cookie": f"{dash.guard.cookie_name}={dash.guard.session}",
        "origin": server.url("", token=False).rstrip("/"),
        "x-csrf-token": dash.guard.csrf,
    }
    try:
        with httpx.Client(timeout=30) as http:
            answer = http.post(server.url("/api/runs/R/resume", token=False), headers=headers)
        assert answer.status_code == 200, answer.text
        assert STARTED.wait(30), "the resumed call started"
    except BaseException:
        server.stop()
        raise
    return server


def test_a_run_resumed_from_the_dashboard_is_cancelled_when_it_stops(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'runs.db'}")
    try:
        server = resumed(store, hold)
        assert server.stop() == []
        assert not server.dash.runners["R"].is_alive()
        record = store.get_run("R")
        steps = store.get_steps("R")
        lease = store.get_lease("R")
    finally:
        store.close()
    assert record is not None
    assert record.status == "cancelled"
    assert steps["w"].status == "cancelled"
    assert lease is None


def test_a_run_still_stopping_after_the_grace_is_given_up_without_a_word_to_the_store(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """With no grace, the stop gives the run up at once (its tool has not let go of the cancel)
    and names it; the store closes, as ``planrail ui``'s does when the command ends. Released
    then, the run ends without a log line and without a write: the store holds what it held at
    the stop — ``running``, its lease as last renewed — and the run can be resumed once that
    lease has expired (not before: the dashboard's process still lives)."""
    CANCELLED.clear()
    RELEASE.clear()
    caplog.set_level(logging.INFO)
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    store = open_store(url)
    try:
        server = resumed(store, slow_to_stop, stop_grace=0)
        assert server.stop() == ["R"]
        assert CANCELLED.wait(30), "the cancel reached the call"
        events = store.events("R")
        lease = store.get_lease("R")
        store.close()
        RELEASE.set()
        thread = server.dash.runners["R"]
        thread.join(30)
        assert not thread.is_alive()
    finally:
        RELEASE.set()  # a failed test leaves no call waiting
        store.close()
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert not [r for r in caplog.records if "R" in r.getMessage().split()]
    with open_store(url) as reopened:
        record = reopened.get_run("R")
        assert record is not None
        assert record.status == "running"
        assert reopened.events("R") == events
        assert reopened.get_lease("R") == lease
        assert lease is not None
        with pytest.raises(RunBusyError):
            operations.check_resumable(reopened, "R", FakeClock(wall=lease.expires_at - 1))
        operations.check_resumable(reopened, "R", FakeClock(wall=lease.expires_at))
