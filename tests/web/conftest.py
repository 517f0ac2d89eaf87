"""Fixtures for the dashboard tests: a store, a served dashboard, one headless Chromium.

The browser is Debian's ``/usr/bin/chromium`` driven by Playwright (never a downloaded build),
started once per test session with a fresh profile; each test gets a new page with no cookies.
Where Chromium or Playwright is missing the browser tests skip with one reason.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from planrail.plan.catalog import load_tools
from planrail.plan.tools import ToolRegistry
from planrail.store import Store, open_store
from planrail.testing.browser import CHROMIUM, CHROMIUM_ARGS, chromium_missing
from planrail.web import Dashboard, DashboardServer, Guard
from planrail.web.server import free_port

DATA = Path(__file__).resolve().parent / "data"
TOOLS = str(DATA / "ui_tools.py")
IMG = Path(__file__).resolve().parents[2] / "docs" / "img"


def registry() -> ToolRegistry:
    reg = ToolRegistry()
    for t in load_tools(TOOLS):
        reg.add(t)
    return reg


@dataclass
class Served:
    """A dashboard served on 127.0.0.1 over a SQLite store in a temporary folder."""

    server: DashboardServer
    store: Store
    store_url: str
    gates: Path
    tmp: Path

    @property
    def token(self) -> str:
        return self.server.dash.guard.token

    def url(self, path: str = "/", *, token: bool = True) -> str:
        return self.server.url(path, token=token)

    def open_gate(self, step: str) -> None:
        (self.gates / step).touch()

    def planrail(self, *args: str) -> subprocess.Popen[bytes]:
        """``planrail ARGS`` in another process, on the same store, with the test tools."""
        env = {
            **os.environ,
            "PLANRAIL_STORE": self.store_url,
            "PLANRAIL_UI_GATES": str(self.gates),
        }
        cmd = [sys.executable, "-c", "from planrail.cli import main; main()", *args]
        return subprocess.Popen(
            cmd, cwd=self.tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    gates = tmp_path / "gates"
    gates.mkdir()
    monkeypatch.setenv("PLANRAIL_UI_GATES", str(gates))
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = open_store(url)
    port = free_port()
    dash = Dashboard(
        store=store,
        guard=Guard("test-token-0123456789", port),
        registry=registry(),
        can_resume=True,
        poll_interval=0.05,
    )
    server = DashboardServer(dash, "127.0.0.1", port).start()
    try:
        yield Served(server, store, url, gates, tmp_path)
    finally:
        for step in ("a", "b", "c", "w"):
            (gates / step).touch()  # let any tool still waiting finish
        server.stop()
        store.close()


class Synced:
    """A Playwright (async API) object used from the test's thread: each coroutine method runs
    on the browser's own loop in its own thread, and the caller waits for its result.

    Playwright's sync API would keep an event loop marked running in the main thread for the
    rest of the session, which breaks every later test that calls ``asyncio.run``.
    """

    def __init__(self, target: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._target = target
        self._loop = loop

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            async def run() -> Any:
                value = attr(*args, **kwargs)
                return await value if inspect.isawaitable(value) else value

            future = asyncio.run_coroutine_threadsafe(run(), self._loop)
            value = future.result(timeout=120)
            return Synced(value, self._loop) if _is_playwright(value) else value

        return call


def _is_playwright(value: Any) -> bool:
    return type(value).__module__.startswith("playwright.")


@pytest.fixture(scope="session")
def browser_context() -> Iterator[Synced]:
    """One headless Chromium for the whole session, with a fresh profile, driven from a thread
    of its own."""
    reason = chromium_missing()
    if reason is not None:
        pytest.skip(reason)
    from playwright.async_api import async_playwright

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="playwright", daemon=True)
    thread.start()
    profile = tempfile.mkdtemp(prefix="planrail-chromium-")

    def on_loop(coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout=120)

    pw = on_loop(async_playwright().start())
    try:
        context = on_loop(
            pw.chromium.launch_persistent_context(
                profile,
                executable_path=CHROMIUM,
                args=CHROMIUM_ARGS,
                headless=True,
                viewport={"width": 1280, "height": 860},
            )
        )
        try:
            yield Synced(context, loop)
        finally:
            on_loop(context.close())
    finally:
        on_loop(pw.stop())
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=30)
        loop.close()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def page(browser_context: Synced) -> Iterator[Any]:
    """A new tab without cookies."""
    browser_context.clear_cookies()
    tab = browser_context.new_page()
    tab.set_default_timeout(20_000)
    try:
        yield tab
    finally:
        tab.close()


@pytest.fixture
def otel() -> Iterator[Any]:
    """The observability tests' in-memory OpenTelemetry SDK (spans kept for assertions)."""
    pytest.importorskip("opentelemetry.sdk", reason="needs the [otel] extra")
    from observe.helpers import otel_setup  # tests/observe (tests/ is on sys.path)

    yield from otel_setup()


TRACED = {
    "goal": "count, then count again",
    "steps": [
        {"id": "count", "tool": "quick", "args": {"n": 1}},
        {"id": "again", "tool": "quick", "args": {"n": "${count}"}, "depends_on": ["count"]},
    ],
}


def traced_run(store: Store, otel: Any, run_id: str) -> None:
    """Run :data:`TRACED` into ``store`` with an OpenTelemetry observer on ``otel``'s SDK."""
    from planrail.observe import OtelObserver
    from planrail.runs import prepare

    observer = OtelObserver(
        tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider
    )
    execution = prepare(TRACED, registry(), store=store, run_id=run_id, observers=[observer])
    assert asyncio.run(execution.run()).status == "succeeded"


REPLAN_GOAL = "count, then tell ops"
FIRST_VERSION = {
    "goal": REPLAN_GOAL,
    "steps": [
        {"id": "count", "tool": "quick", "args": {"n": 1}},
        {"id": "mail", "tool": "boom", "args": {"n": "${count}"}, "depends_on": ["count"]},
        {"id": "after", "tool": "quick", "args": {"n": "${mail}"}, "depends_on": ["mail"]},
    ],
}
REPLAN = {
    "goal": REPLAN_GOAL,
    "steps": [
        {
            "id": "mail",
            "tool": "notify",
            "args": {"to": "ops@example.com", "text": "${count}"},
            "depends_on": ["count"],
        },
        {"id": "summary", "tool": "quick", "args": {"n": 2}},
    ],
}


def replanned_run(store: Store, run_id: str) -> None:
    """An agent's run into ``store``: :data:`FIRST_VERSION` fails at ``mail``; the model's
    replan (:data:`REPLAN`: ``mail`` changed, ``summary`` added, ``after`` dropped, ``count``
    reused) is stored as ``RUN_ID-r1``, waiting for approval (the callback defers)."""
    from planrail.agent import Agent
    from planrail.testing.llm import ScriptedLLM

    agent = Agent(
        ScriptedLLM([FIRST_VERSION, REPLAN]),
        registry(),
        approval=lambda request: None,
        max_replans=1,
        store=store,
        run_id=run_id,
    )
    asyncio.run(agent.run(REPLAN_GOAL))
    replan = store.get_run(f"{run_id}-r1")
    assert replan is not None
    assert replan.status == "awaiting_approval"


def screenshot(page: Any, name: str) -> None:
    """Save a screenshot for docs/dashboard.md."""
    IMG.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(IMG / f"dashboard-{name}.png"))
