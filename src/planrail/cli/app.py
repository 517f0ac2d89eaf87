"""The ``planrail`` command. Exit codes are part of the contract (see ``docs/cli.md``).

Each command lives in its own module and registers itself on the one Typer app of
:mod:`planrail.cli.common`; this module imports them all and is the script's entry point.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from rich.markup import escape

from planrail.cli.common import ExitCode, app
from planrail.cli.printable import console as printable_console
from planrail.errors import PlanrailError

__all__ = ["ExitCode", "app", "main"]

_COMMANDS = (
    "run_cmd",
    "plan_cmd",
    "approval_screen",
    "runs_cmd",
    "ops_cmd",
    "inspect_cmd",
    "mcp_cmd",
    "ui_cmd",
)
"""The modules whose import registers the commands (in the order ``--help`` lists them)."""
for _name in _COMMANDS:
    importlib.import_module(f"planrail.cli.{_name}")


def main(argv: list[str] | None = None) -> Any:
    """Entry point of the ``planrail`` script."""
    from planrail.cli.interrupts import exit_on_interrupt

    exit_on_interrupt()
    for stream in (sys.stdout, sys.stderr):  # text quoting undecodable command-line bytes (a
        # lone surrogate) is printed escaped, not raised as UnicodeEncodeError mid-message
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    try:
        return app(args=argv, prog_name="planrail")
    except PlanrailError as exc:  # anything not handled by a command: one line, never a traceback
        printable_console(stderr=True).print(
            f"[red]error:[/] {escape(exc.message)}", highlight=False
        )
        sys.exit(ExitCode.USAGE)
