"""Tools for the CLI tests (loaded with ``--tools tests/cli/data/cli_tools.py``).

Every call appends ``step_id`` to the file named by ``$PLANRAIL_TEST_CALLS`` (when set), so a
test — in-process or in a subprocess — can tell whether anything was executed.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pydantic

import planrail


def _log(ctx: planrail.StepContext) -> None:
    path = os.environ.get("PLANRAIL_TEST_CALLS")
    if path:
        with Path(path).open("a", encoding="utf-8") as f:
            f.write(ctx.step_id + "\n")


class Greeting(pydantic.BaseModel):
    text: str
    name: str


@planrail.tool(side_effects="none")
def greet(name: str, ctx: planrail.StepContext) -> Greeting:
    """Greets someone (read-only)."""
    _log(ctx)
    return Greeting(text=f"hello {name}", name=name)


@planrail.tool(side_effects="none")
def shout(text: str, ctx: planrail.StepContext) -> str:
    """Upper-cases a text (read-only)."""
    _log(ctx)
    return text.upper()


@planrail.tool(side_effects="none")
def explode(why: str, ctx: planrail.StepContext) -> str:
    """Always fails, with ``why`` as the message."""
    _log(ctx)
    raise ValueError(why)


@planrail.tool(side_effects="keyed")
def record(text: str, ctx: planrail.StepContext) -> str:
    """Changes the world (so a run needs approval); returns its idempotency key and text."""
    _log(ctx)
    return f"{ctx.idempotency_key}={text}"


@planrail.tool(side_effects="none")
async def wait_forever(ctx: planrail.StepContext) -> str:
    """Never finishes on its own: it runs until the run is cancelled."""
    _log(ctx)
    await asyncio.Event().wait()
    return "unreachable"
