"""Real MCP servers for the tests: ``probe_server.py`` over stdio (a subprocess per hub) and
over Streamable HTTP on 127.0.0.1 (a subprocess that prints its port once it listens)."""

from __future__ import annotations

import os
import selectors
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from planrail.integrations.mcp import ServerConfig

PROBE = str(Path(__file__).resolve().parent / "probe_server.py")
START_BUDGET = 30.0
"""Seconds a server may take to start on a loaded machine."""


@pytest.fixture
def probe_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The probe's marker directory, in the environment its stdio subprocesses inherit."""
    monkeypatch.setenv("PROBE_DIR", str(tmp_path))
    return tmp_path


def stdio_probe(**options: Any) -> ServerConfig:
    """The probe as a stdio server named ``probe`` (trusted unless told otherwise)."""
    return ServerConfig(
        name="probe", command=(sys.executable, PROBE), **{"trusted": True, **options}
    )


@pytest.fixture
def http_url(probe_dir: Path) -> Iterator[str]:
    """The probe over Streamable HTTP on 127.0.0.1; stopped after the test."""
    proc = subprocess.Popen(
        [sys.executable, PROBE, "--http"],
        stdout=subprocess.PIPE,
        env={**os.environ, "PROBE_DIR": str(probe_dir)},
        text=True,
    )
    try:
        assert proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            if not sel.select(timeout=START_BUDGET):
                raise AssertionError("the HTTP probe did not start in time")
        line = proc.stdout.readline()
        assert line.startswith("PORT "), line
        yield f"http://127.0.0.1:{int(line.split()[1])}/mcp"
    finally:
        proc.kill()
        proc.wait(timeout=START_BUDGET)
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.fixture(params=["stdio", "http"])
def probe(request: pytest.FixtureRequest, probe_dir: Path) -> Any:
    """A factory of probe configs, over stdio and over Streamable HTTP."""
    if request.param == "stdio":
        return stdio_probe
    url = request.getfixturevalue("http_url")

    def http_probe(**options: Any) -> ServerConfig:
        return ServerConfig(name="probe", url=url, **{"trusted": True, **options})

    return http_probe
