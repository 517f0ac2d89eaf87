"""A tool for the ``planrail mcp serve`` test of a call that outlives its cancelled run: its
first call (the one that takes the file ``hold``) blocks its thread until the test releases
it, and tells the test through named pipes (in the directory ``HELD_DIR`` names) when it has
started and when it is about to return."""

from __future__ import annotations

import os
from pathlib import Path

import planrail


def _pipe(name: str) -> Path:
    return Path(os.environ["HELD_DIR"]) / name


@planrail.tool(side_effects="keyed")
def post(text: str, ctx: planrail.StepContext) -> str:
    """Post a message (changes the world; honours its key)."""
    with open(_pipe("ledger"), "a") as ledger:
        ledger.write(f"start {ctx.idempotency_key}\n")
    try:  # the first call takes the hold (atomically: a second call at once does not)
        os.rename(_pipe("hold"), _pipe("taken"))
        held = True
    except FileNotFoundError:
        held = False
    if held:
        _pipe("started").write_text("started")  # blocks until the test reads it
        _pipe("release").read_text()  # blocks until the test releases the call
    with open(_pipe("ledger"), "a") as ledger:
        ledger.write(f"end {ctx.idempotency_key}\n")
    if held:
        _pipe("ended").write_text("ended")
    return f"posted {text}"
