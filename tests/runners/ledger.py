"""A receiver-side ledger: what tools did, written by whichever process ran them.

Tools running on Ray workers cannot append to a test's lists, so they append JSON lines to a
file the test names (``O_APPEND`` writes of one short line do not interleave). The ledger is
also the *receiver* of side effects: :func:`apply_effect` is what a payment API or a mailer
would do with an idempotency key — apply it once, ignore a repeat.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
from pathlib import Path
from typing import Any

__all__ = ["Ledger", "apply_effect", "record"]


def record(path: str, **entry: Any) -> None:
    """Append one entry (with the writing process's pid)."""
    line = json.dumps({**entry, "pid": os.getpid()}, sort_keys=True) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def unstopped_start(path: str, step: str) -> bool:
    """Whether this process recorded more starts of ``step`` than stops."""
    me, balance = os.getpid(), 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            entry = json.loads(line)
            if entry.get("step") == step and entry.get("pid") == me:
                balance += {"start": 1, "stopped": -1}.get(entry.get("ev"), 0)
    return balance > 0


def apply_effect(path: str, effect: str, key: str | None) -> bool:
    """The receiver applies ``effect``; with a ``key`` it applies each key once (a repeat is
    acknowledged and ignored). Returns whether it was applied now."""
    with open(path, "a+", encoding="utf-8") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        if key is not None:
            for line in f:
                seen = json.loads(line)
                if seen.get("ev") == "effect" and seen.get("key") == key:
                    return False
        f.write(json.dumps({"ev": "effect", "effect": effect, "key": key, "pid": os.getpid()}))
        f.write("\n")
        return True


class Ledger:
    """The test's view of a ledger file."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / "ledger.jsonl"
        self.path.touch()
        self.release = directory / "release"
        """A FIFO: blocking tools wait until it is readable, which :meth:`let_go` makes it
        (the test and the call may be in different processes)."""
        os.mkfifo(self.release)
        self._writer: int | None = None
        self.started = directory / "started"
        """A FIFO the test reads and a tool writes a byte to once it has begun (the test
        holds it open, so a tool's write never waits or fails)."""
        os.mkfifo(self.started)
        self._started = os.open(self.started, os.O_RDWR | os.O_NONBLOCK)

    async def wait_started(self) -> None:
        """Until a tool has written to :attr:`started` (no polling: the loop watches it)."""
        loop = asyncio.get_running_loop()
        readable = loop.create_future()
        loop.add_reader(self._started, lambda: readable.done() or readable.set_result(None))
        try:
            await readable
        finally:
            loop.remove_reader(self._started)
        os.read(self._started, 1)

    def let_go(self) -> None:
        """Release every blocking tool, now and later: one byte stays in the FIFO (nobody
        reads it), so it is readable for every waiter; the test keeps it open (``O_RDWR``
        never blocks on Linux)."""
        if self._writer is None:
            self._writer = os.open(self.release, os.O_RDWR | os.O_NONBLOCK)
            os.write(self._writer, b"x")

    def __str__(self) -> str:
        return str(self.path)

    def entries(self, ev: str | None = None) -> list[dict[str, Any]]:
        lines = self.path.read_text(encoding="utf-8").splitlines()
        found = [json.loads(line) for line in lines if line]
        return [e for e in found if ev is None or e["ev"] == ev]

    def calls(self, step: str) -> list[dict[str, Any]]:
        """The ``start`` entries of ``step``, one per call."""
        return [e for e in self.entries("start") if e["step"] == step]

    def order(self) -> list[tuple[str, str]]:
        """``(ev, step)`` of every start and end, in the order they happened."""
        return [(e["ev"], e["step"]) for e in self.entries() if e["ev"] in ("start", "end")]
