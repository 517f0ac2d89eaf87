"""Driving a real ``planrail`` process to be interrupted: started so that SIGINT reaches it,
under a watchdog that never lets it hang the suite (tests/cli, tests/planning)."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
from collections.abc import Iterator
from typing import Any

WATCHDOG = 60.0
"""Seconds a started process may live before the watchdog kills it."""


@contextlib.contextmanager
def sigint_not_ignored() -> Iterator[None]:
    """A child inherits an ignored SIGINT (a shell starts its background jobs so, and Python
    then installs no handler): the suite run that way would wait for a Ctrl-C that can never
    arrive. Handled here while the child starts, SIGINT is back to its default in the child."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def watched(args: list[str], **popen: Any) -> Iterator[subprocess.Popen[str]]:
    """``args`` started with SIGINT at its default, its output (stdout and stderr) one text
    pipe; killed by the watchdog after :data:`WATCHDOG` seconds, and at the end if still up."""
    with sigint_not_ignored():
        proc = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **popen
        )
    watchdog = threading.Timer(WATCHDOG, proc.kill)
    watchdog.start()
    try:
        yield proc
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def lines_until(proc: subprocess.Popen[str], seen: str, what: str) -> list[str]:
    """The lines ``proc`` printed up to the first holding ``seen``; AssertionError (with them)
    if it ended first (``what``: what should have been seen)."""
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if seen in line:
            return lines
    raise AssertionError(f"the command ended before {what}:\n" + "".join(lines))
