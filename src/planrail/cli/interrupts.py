"""Ctrl-C on the command line: the first cancels the run cleanly, the second exits at once.

The first SIGINT cancels the task driving the run: the execution cancels its steps and records
them (see ``docs/execution.md``: what each interruption leaves behind) and the command exits 130.
Should that take longer than the grace period, or should a second SIGINT arrive first, the
process exits 130 right away (``os._exit``: no traceback, no waiting for tool threads that do
not return). What was committed stays committed; a resume treats the rest as after a crash.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType, TracebackType
from typing import Any, NoReturn

from rich.console import Console

__all__ = ["Interrupts", "exit_on_interrupt", "python_sigint"]

EXIT_INTERRUPTED = 130


class Interrupts:
    """A SIGINT handler for the time a run is driven (a context manager)."""

    def __init__(self, console: Console, grace: float) -> None:
        self.console = console
        self.grace = grace
        self.count = 0
        self._task: asyncio.Task[Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._previous: Any = None
        self._timer: threading.Timer | None = None

    def attach(self, task: asyncio.Task[Any] | None) -> None:
        """The task whose cancellation cancels the run (called from inside it)."""
        self._task = task
        self._loop = asyncio.get_running_loop()

    def __enter__(self) -> Interrupts:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._on_sigint)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.count == 0:
            if self._previous is not None:
                signal.signal(signal.SIGINT, self._previous)
            return
        # After a first Ctrl-C the handler (and the grace timer) stay: another Ctrl-C while the
        # command finishes up exits 130 at once. Once Python starts finalizing it would put the
        # default handler back (death by SIGINT, not 130): from then on SIGINT is ignored.
        atexit.register(signal.signal, signal.SIGINT, signal.SIG_IGN)

    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1
        if self.count > 1:
            self.exit_now("interrupted again")
        loop, task = self._loop, self._task
        if loop is None or task is None or loop.is_closed() or task.done():
            self.exit_now("interrupted")  # before the run started, or after it ended
        self.console.print(
            "[magenta]interrupting[/]: cancelling the run and recording it"
            f" (Ctrl-C again to exit at once; exiting anyway in {self.grace:g}s)"
        )
        loop.call_soon_threadsafe(task.cancel)
        self._timer = threading.Timer(self.grace, self.exit_now, ("the grace period passed",))
        self._timer.daemon = True
        self._timer.start()

    def exit_now(self, why: str) -> NoReturn:
        """Exit 130 at once: no traceback, no waiting for threads."""
        try:
            self.console.print(f"[magenta]interrupted[/]: {why}; exiting now (exit 130)")
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(EXIT_INTERRUPTED)


def exit_on_interrupt() -> None:
    """From the end of the command on, SIGINT is ignored: Python resets a handler it installed
    to the default when it finalizes, and a Ctrl-C then would kill the process by the signal
    (not exit 130). Called by the ``planrail`` entry point; :class:`Interrupts` handles SIGINT
    while a run is driven, and keeps handling it (exit 130 at once) until the process exits."""
    if threading.current_thread() is threading.main_thread():
        atexit.register(signal.signal, signal.SIGINT, signal.SIG_IGN)


@contextlib.contextmanager
def python_sigint() -> Iterator[None]:
    """Python's own SIGINT handling for the block (``KeyboardInterrupt``; ``asyncio.run``
    cancelling its main task so that the run records itself), in place of the entry point's
    exit-at-once handler (``src/_planrail_entry.py``). SIGINT ignored stays ignored."""
    main = threading.current_thread() is threading.main_thread()
    if not main or signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
