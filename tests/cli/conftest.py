"""Fixtures for the CLI tests: an isolated working directory, store and call log."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from planrail.cli import app

DATA = Path(__file__).resolve().parent / "data"
TOOLS = str(DATA / "cli_tools.py")


@pytest.fixture(scope="session", autouse=True)
def _owned_main_thread_loop() -> Iterator[None]:
    """Own the main thread's "current" event loop (see ``tests/engine/conftest.py``): the CLI
    calls ``asyncio.run``, which would otherwise orphan the loop pytest-asyncio left there."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    yield
    asyncio.set_event_loop(None)
    loop.close()


@dataclass
class Cli:
    """Runs ``planrail`` in-process in an isolated directory with its own store."""

    cwd: Path
    calls_file: Path

    def __call__(self, *args: str) -> Any:
        return CliRunner().invoke(app, list(args))

    def json(self, *args: str) -> tuple[int, Any]:
        """Exit code and the one JSON object printed on stdout."""
        result = self(*args)
        return result.exit_code, json.loads(result.stdout)

    @property
    def calls(self) -> list[str]:
        """Steps whose tool was called, in call order."""
        if not self.calls_file.exists():
            return []
        return self.calls_file.read_text().split()


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cli:
    """A ``planrail`` runner in ``tmp_path``: SQLite store there, wide plain output, call log."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PLANRAIL_STORE", f"sqlite:///{tmp_path / 'store.db'}")
    monkeypatch.setenv("PLANRAIL_TEST_CALLS", str(tmp_path / "calls.txt"))
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("NO_COLOR", "1")
    return Cli(tmp_path, tmp_path / "calls.txt")
