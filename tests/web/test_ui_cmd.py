"""`planrail ui` as a command: it serves on 127.0.0.1 and prints the URL with the token."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest


@pytest.mark.parametrize(("host", "in_url"), [([], "127.0.0.1"), (["--host", "::1"], "[::1]")])
def test_planrail_ui_prints_a_token_url_that_signs_in(
    tmp_path: Path, request: pytest.FixtureRequest, host: list[str], in_url: str
) -> None:
    """The printed URL is on 127.0.0.1 (a free port with --port 0) with a random token; it sets
    the session cookie (the page then loads), while the same page without the token is 401.
    On an IPv6 address the URL brackets it (``http://::1:8765/`` is no URL)."""
    if host:
        request.getfixturevalue("ipv6_loopback")
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
    cmd = [sys.executable, "-c", "from planrail.cli import main; main()", "ui", *host]
    cmd += ["--store", f"sqlite:///{tmp_path / 'store.db'}", "--port", "0"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        found = re.search(rf"(http://{re.escape(in_url)}:(\d+)/\?token=(\S+))", line)
        assert found, line
        port = int(found.group(2))
        with httpx.Client(timeout=10) as http:
            bare = http.get(f"http://{in_url}:{port}/")  # listening before the URL is printed
            assert bare.status_code == 401
            signed = http.get(found.group(1), follow_redirects=True)
            assert signed.status_code == 200
            assert "planrail" in signed.text
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


@pytest.mark.parametrize("name", ["myhost.lan:8765", "http://myhost.lan", " "])
def test_allow_host_takes_a_host_name_alone(name: str) -> None:
    """``--allow-host NAME:PORT`` was taken and never matched a Host header: refused (exit 2)."""
    from typer.testing import CliRunner

    from planrail.cli import app

    result = CliRunner().invoke(app, ["ui", "--store", "memory://", "--allow-host", name])
    assert result.exit_code == 2
    assert "without a port or scheme" in " ".join(result.output.split())


def test_the_stop_says_when_a_run_it_gave_up_can_be_resumed() -> None:
    """A run still stopping after the grace (``Dashboard.stop_resumes``) is named with the
    command that takes it over and when it can: once its lease expires (no later: the lease is
    no longer renewed), or now if it holds none."""
    from planrail.cli.ui_cmd import _left_running
    from planrail.store import open_store
    from planrail.testing.clock import FakeClock

    clock = FakeClock()
    with open_store("memory://") as store:
        assert store.acquire_lease("R", "elsewhere:1:x", 30.0, clock.now())
        said = " ".join(_left_running(store, "R", 10.0, clock).split())
        assert "run R had not stopped 10 s after its cancel" in said
        assert "`planrail resume R` can take it over once its lease expires, in 30 s" in said
        store.release_lease("R", "elsewhere:1:x")
        said = " ".join(_left_running(store, "R", 10.0, clock).split())
        assert said.endswith("`planrail resume R` can take it over now[/]")
