"""Tools for the command-line durability tests (``--tools tests/durability/cli_tools.py``).

Every call is appended as a JSON line to ``$PLANRAIL_TEST_CALLS`` (when set), so a test can tell
whether, and how often, a tool ran — also when the ``planrail`` command ran in a subprocess.
``HOOK``, when a test sets it on the imported module, is awaited after the effect (the crash tests
use it to make the run "die" there).
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

from pydantic import BaseModel

import planrail

HOOK: Callable[[str], Awaitable[None]] | None = None


class Token(BaseModel):
    step: str
    token: str


def calls(path: Path) -> list[dict[str, object]]:
    """The calls recorded in ``path`` (none if the file does not exist)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def _append(target: str, line: str) -> None:
    with open(target, "a") as f:
        f.write(line + "\n")


async def _effect(ctx: planrail.StepContext, step: str, inputs: list[str]) -> Token:
    target = os.environ.get("PLANRAIL_TEST_CALLS")
    if target:
        _append(target, json.dumps({"step": step, "key": ctx.idempotency_key, "inputs": inputs}))
    if HOOK is not None:
        await HOOK(step)
    return Token(step=step, token=f"{step}-token")


@planrail.tool(side_effects="keyed")
async def keyed_write(ctx: planrail.StepContext, step: str, inputs: list[str]) -> Token:
    """Writes an effect, deduplicated by the step's idempotency key."""
    return await _effect(ctx, step, inputs)


@planrail.tool(side_effects="unsafe")
async def unsafe_write(ctx: planrail.StepContext, step: str, inputs: list[str]) -> Token:
    """Writes an effect; a repeat would be a second effect."""
    return await _effect(ctx, step, inputs)


PLAN = {
    "goal": "durability on the command line",
    "steps": [
        {"id": "a", "tool": "keyed_write", "args": {"step": "a", "inputs": []}},
        {
            "id": "b",
            "tool": "unsafe_write",
            "args": {"step": "b", "inputs": ["${a.token}"]},
            "depends_on": ["a"],
        },
        {
            "id": "c",
            "tool": "keyed_write",
            "args": {"step": "c", "inputs": ["${b.token}"]},
            "depends_on": ["b"],
        },
    ],
}
"""``a -> b -> c``; ``b`` is ``unsafe``."""
