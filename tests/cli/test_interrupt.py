"""Ctrl-C during ``planrail run``: running steps are cancelled, the run is recorded
``cancelled`` (nothing half-written) and the command exits 130."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .conftest import DATA, TOOLS, Cli

PLANRAIL = Path(sys.executable).with_name("planrail")


@contextlib.contextmanager
def _sigint_not_ignored() -> Iterator[None]:
    """A child inherits an ignored SIGINT (a shell starts its background jobs so, and Python
    then installs no handler): the suite run that way would wait for a Ctrl-C that can never
    arrive. Handled here while the child starts, SIGINT is back to its default in the child."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def interrupt_run(cli: Cli, run_id: str) -> tuple[int, str, dict[str, Any]]:
    """Start ``hang.json``, send SIGINT once ``forever`` is running; return the exit code, the
    output and what ``show --json`` then reports."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONIOENCODING="utf-8")
    with _sigint_not_ignored():
        proc = subprocess.Popen(
            [str(PLANRAIL), "run", str(DATA / "hang.json"), "--tools", TOOLS, "--run-id", run_id],
            cwd=cli.cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
    watchdog = threading.Timer(60, proc.kill)  # never hang the suite
    watchdog.start()
    try:
        assert proc.stdout is not None
        seen = []
        for line in proc.stdout:
            seen.append(line)
            if "forever running" in line:
                break
        else:
            raise AssertionError("the run ended before 'forever' started:\n" + "".join(seen))
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    code, shown = cli.json("show", run_id, "--json")
    assert code == 0
    return proc.returncode, "".join(seen) + rest, shown


def test_ctrl_c_cancels_the_run_and_exits_130(cli: Cli) -> None:
    """SIGINT while ``forever`` runs (its progress line seen): the process exits 130 saying it
    was interrupted, without a traceback; the stored run is ``cancelled``; the step after
    ``forever`` is never called."""
    code, output, shown = interrupt_run(cli, "r_int")
    assert code == 130, output
    assert "interrupted" in output
    assert "Traceback" not in output
    assert shown["status"] == "cancelled"
    assert "after" not in cli.calls


def test_ctrl_c_leaves_every_stored_step_final(cli: Cli) -> None:
    """After Ctrl-C nothing is half-written in the store: ``forever`` is ``cancelled`` with
    an end time, ``after`` never started, and no step is left ``running`` or ``pending``."""
    _, _, shown = interrupt_run(cli, "r_int2")
    steps = {s["id"]: s for s in shown["steps"]}
    assert steps["forever"]["status"] == "cancelled"
    assert steps["forever"]["finished_at"] is not None
    assert steps["after"]["status"] in {"cancelled", "skipped"}
    assert steps["after"]["started_at"] is None
    assert all(s["status"] not in {"running", "pending"} for s in steps.values())
    if steps["hello"]["status"] == "succeeded":
        assert steps["hello"]["output"] == {"text": "hello Ada", "name": "Ada"}
