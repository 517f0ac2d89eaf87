"""The dashboard stops (``planrail ui`` ended by Ctrl-C, or its server stopped) while a run it
resumed is still under way: the run is cancelled and recorded so — ``cancelled``, its step
``cancelled``, its lease released, resumable at once — before the store closes under it. It
used to be left to die with the process: ``running`` in the store, its lease held until it
expired, and (since the CLI closes its store when a command ends) a log line from a thread
whose store had closed."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import httpx

import planrail
from planrail.engine import operations
from planrail.engine.approval import defer
from planrail.plan.tools import ToolRegistry
from planrail.store import open_store
from planrail.web import Dashboard, DashboardServer, Guard
from planrail.web.server import free_port

STARTED = threading.Event()


@planrail.tool(side_effects="keyed")
async def hold(step: str) -> dict[str, str]:
    """Says it started, then waits until it is cancelled."""
    STARTED.set()
    await asyncio.Event().wait()
    return {"step": step}


def test_a_run_resumed_from_the_dashboard_is_cancelled_when_it_stops(tmp_path: Path) -> None:
    STARTED.clear()
    plan = {"goal": "g", "steps": [{"id": "w", "tool": "hold", "args": {"step": "w"}}]}
    store = open_store(f"sqlite:///{tmp_path / 'runs.db'}")
    try:
        waiting = planrail.runs.prepare(plan, [hold], store=store, approver=defer, run_id="R")
        assert asyncio.run(waiting.run()).status == "awaiting_approval"
        operations.approve(store, "R")
        port = free_port()
        dash = Dashboard(
            store=store,
            guard=Guard("test-token-0123456789", port),
            registry=ToolRegistry.of([hold]),
            can_resume=True,
        )
        server = DashboardServer(dash, "127.0.0.1", port).start()
        headers = {
            "cookie": f"{dash.guard.cookie_name}={dash.guard.session}",
            "origin": server.url("", token=False).rstrip("/"),
            "x-csrf-token": dash.guard.csrf,
        }
        with httpx.Client(timeout=30) as http:
            answer = http.post(server.url("/api/runs/R/resume", token=False), headers=headers)
        assert answer.status_code == 200, answer.text
        assert STARTED.wait(30), "the resumed call started"
        server.stop()
        assert not dash.runners["R"].is_alive()
        record = store.get_run("R")
        steps = store.get_steps("R")
        lease = store.get_lease("R")
    finally:
        store.close()
    assert record is not None
    assert record.status == "cancelled"
    assert steps["w"].status == "cancelled"
    assert lease is None
