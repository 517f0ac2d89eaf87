"""Tools for the dashboard tests (``--tools tests/web/data/ui_tools.py``).

``wait_for`` (keyed: the runner commits its start before the call, so another process sees it
running) and ``unsafe_wait`` block until the file ``$PLANRAIL_UI_GATES/<step>`` exists, so a
test decides when each step finishes (no fixed sleeps); ``send`` has a secret parameter.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Annotated

import planrail
from planrail.plan.secrets import SECRET


async def _gate(step: str) -> None:
    gates = os.environ.get("PLANRAIL_UI_GATES")
    if not gates:
        return
    while not (Path(gates) / step).exists():  # noqa: ASYNC110 (another process opens the gate)
        await asyncio.sleep(0.02)


@planrail.tool(side_effects="keyed")
async def wait_for(step: str) -> dict[str, str]:
    """Returns once the test opens this step's gate."""
    await _gate(step)
    return {"step": step, "done": "yes"}


@planrail.tool(side_effects="unsafe")
async def unsafe_wait(step: str) -> dict[str, str]:
    """A world-changing call that stays under way until its gate opens."""
    await _gate(step)
    return {"step": step, "sent": "yes"}


@planrail.tool(side_effects="keyed")
async def send(to: str, api_key: Annotated[str, SECRET]) -> dict[str, str]:
    """Sends something with a secret key (the key must never be shown)."""
    return {"to": to, "status": "sent"}


@planrail.tool(side_effects="keyed")
def notify(to: str, text: int) -> dict[str, object]:
    """Sends a message (world-changing: the plan needs approval)."""
    return {"to": to, "text": text}


@planrail.tool(side_effects="none")
def vault(name: str) -> dict[str, str]:
    """Reads a credential (a test value, the same one the tests look for in every page)."""
    return {"name": name, "key": "sk-live-DASHBOARD-0123456789"}


@planrail.tool(side_effects="none")
def quick(n: int) -> int:
    """Returns n + 1."""
    return n + 1


@planrail.tool(side_effects="none")
def boom(n: int) -> int:
    """Always fails (for retry tests)."""
    raise ValueError(f"boom {n}")
