"""Fixtures for the dashboard tests: a store, a served dashboard, one headless Chromium.

The browser is Debian's ``/usr/bin/chromium`` driven by Playwright (never a downloaded build),
started once per test session with a fresh profile; each test gets a new page with no cookies.
Where Chromium or Playwright is missing the browser tests skip with one reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
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
from planrail.web import Dashboard, DashboardServer, Guard
from planrail.web.server import free_port

DATA = Path(__file__).resolve().parent / "data"
TOOLS = str(DATA / "ui_tools.py")
IMG = Path(__file__).resolve().parents[2] / "docs" / "img"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


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


def _browser_skip_reason() -> str | None:
    if not (Path(CHROMIUM).exists() or shutil.which("chromium")):
        return "no Debian chromium at /usr/bin/chromium (make test installs it when it can)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright (Python) is not installed (it is in the test dependency group)"
    return None


@pytest.fixture(scope="session")
def browser_context() -> Iterator[Any]:
    """One headless Chromium for the whole session, with a fresh profile."""
    reason = _browser_skip_reason()
    if reason is not None:
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    profile = tempfile.mkdtemp(prefix="planrail-chromium-")
    pw = sync_playwright().start()
    try:
        context = pw.chromium.launch_persistent_context(
            profile,
            executable_path=CHROMIUM,
            args=CHROMIUM_ARGS,
            headless=True,
            viewport={"width": 1280, "height": 860},
        )
        try:
            yield context
        finally:
            context.close()
    finally:
        pw.stop()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def page(browser_context: Any) -> Iterator[Any]:
    """A new tab without cookies."""
    browser_context.clear_cookies()
    tab = browser_context.new_page()
    tab.set_default_timeout(20_000)
    try:
        yield tab
    finally:
        tab.close()


def screenshot(page: Any, name: str) -> None:
    """Save a screenshot for docs/dashboard.md."""
    IMG.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(IMG / f"dashboard-{name}.png"))
