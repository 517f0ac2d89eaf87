"""The ``planrail`` script's entry point: a Ctrl-C from the very first instant exits 130.

Importing planrail and its dependencies takes a good part of a second, and the command's own
SIGINT handling (``planrail.cli.interrupts``) starts only when a run is driven. A Ctrl-C before
that would meet Python's default handler: a ``KeyboardInterrupt`` raised inside some import (a
traceback) or caught by click (``Aborted!``, exit 1). So this module — outside the ``planrail``
package, whose import is the slow part — installs, before importing anything of planrail, a
handler that exits 130 at once with one line and no traceback. Nothing of a run has been
recorded before the command's own handler takes over (it puts this one back when the run is
over); commands that rely on Python's ``KeyboardInterrupt`` restore it for their duration
(``planrail.cli.interrupts.python_sigint``).
"""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType
from typing import Any

EXIT_INTERRUPTED = 130


def early_sigint(signum: int, frame: FrameType | None) -> None:
    """Exit 130 at once: nothing has started that a Ctrl-C must record."""
    try:
        os.write(2, b"interrupted: exiting now (exit 130)\n")
    finally:
        os._exit(EXIT_INTERRUPTED)


def main() -> Any:
    """Install :func:`early_sigint` (unless SIGINT is ignored, as in a shell's background
    job), then run the command."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, early_sigint)
    from planrail.cli import main as planrail_main

    return planrail_main()


if __name__ == "__main__":
    sys.exit(main())
