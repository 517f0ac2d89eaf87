"""Tools for ``tests/cli/test_resume_execution_options.py`` (``--tools`` this file): calls that
show how many of them were under way at once, and which ran.

``call_api`` appends ``+NAME`` to the file named by ``$PLANRAIL_TEST_FLIGHT`` as it starts and
``-NAME`` as it ends (also when it fails or is cancelled). It then waits, turn by turn of the
event loop, until ``$PLANRAIL_TEST_WIDTH`` calls are under way together — giving up after
``GIVE_UP_AFTER`` turns, so that a run allowing fewer ends (with fewer) instead of hanging.
It fails if NAME is in the comma-separated ``$PLANRAIL_TEST_FAIL``.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import planrail

GIVE_UP_AFTER = 1000
"""Turns of the event loop a call waits for the others (no clock: no wall time involved)."""

RUNNING = {"now": 0}


def _log(line: str) -> None:
    with Path(os.environ["PLANRAIL_TEST_FLIGHT"]).open("a", encoding="utf-8") as f:
        f.write(line + "\n")


@planrail.tool(side_effects="keyed")
async def call_api(name: str) -> str:
    """Calls an API that changes the world (a run needs approval); see the module docstring."""
    _log(f"+{name}")
    RUNNING["now"] += 1
    try:
        width = int(os.environ.get("PLANRAIL_TEST_WIDTH", "1"))
        for _ in range(GIVE_UP_AFTER):
            if RUNNING["now"] >= width:
                break
            await asyncio.sleep(0)
        if name in os.environ.get("PLANRAIL_TEST_FAIL", "").split(","):
            raise ValueError(f"the API said no to {name}")
        return name
    finally:
        RUNNING["now"] -= 1
        _log(f"-{name}")
