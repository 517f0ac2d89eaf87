"""Tools for ``test_streamed_door.py``: loaded in the test process (imported) and by
``planrail plan`` / ``planrail mcp serve`` subprocesses (``--tools PATH``).

Every call is appended to a call ledger: the list ``CALLS`` in this process and, when the
environment variable ``PLANRAIL_AUDIT_LEDGER`` names a file, one JSON line per call there (the
ledger of a subprocess). ``FAILING`` (or ``PLANRAIL_AUDIT_FAILING``, comma-separated) names the
values ``create`` refuses, so a first run fails and a resume can finish.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from typing import Any

from pydantic import BaseModel

import planrail

LEDGER_ENV = "PLANRAIL_AUDIT_LEDGER"
FAILING_ENV = "PLANRAIL_AUDIT_FAILING"

CALLS: list[tuple[str, Any]] = []
"""The calls made in this process: (tool, the value it was called for)."""
FAILING: set[str] = set()
"""Names ``create`` fails for (in this process)."""
COUNTERS: dict[str, int] = {}
"""How often ``bump`` was called per name (its output is that count)."""
STALL_AT: dict[str, int] = {}
"""Per name, the call of ``bump`` that never returns (until cancelled)."""
PEAK: dict[str, int] = {"active": 0, "peak": 0}
"""Calls of ``create`` under way now, and the most there were at once."""
STALLED = threading.Event()
"""Set when a call of ``bump`` stalls (a test in another thread may wait for it)."""


CALLED: dict[str, threading.Event] = {}
"""Per tool, set once it has been called (a test may wait for it from another thread)."""


def called(tool: str) -> threading.Event:
    """The event set when ``tool`` is first called (after :func:`reset`)."""
    return CALLED.setdefault(tool, threading.Event())


def _log(tool: str, value: Any) -> None:
    CALLS.append((tool, value))
    called(tool).set()
    path = os.environ.get(LEDGER_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps([tool, value]) + "\n")


def ledger(path: str | os.PathLike[str]) -> list[list[Any]]:
    """The calls a subprocess made, from its ledger file."""
    try:
        with open(path, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


def reset() -> None:
    CALLS.clear()
    FAILING.clear()
    COUNTERS.clear()
    STALL_AT.clear()
    STALLED.clear()
    CALLED.clear()
    PEAK.update(active=0, peak=0)


def _failing() -> set[str]:
    named = os.environ.get(FAILING_ENV, "")
    return FAILING | {n for n in named.split(",") if n}


class Found(BaseModel):
    names: list[str]
    top: str


class Account(BaseModel):
    user_id: str
    name: str


class Count(BaseModel):
    n: int


@planrail.tool(side_effects="none")
async def lookup(query: str) -> Found:
    """Look names up (read-only)."""
    _log("lookup", query)
    await asyncio.sleep(0)
    return Found(names=[f"{query}-a", f"{query}-b", f"{query}-c"], top=f"{query}-a")


@planrail.tool(side_effects="none")
async def stall(query: str) -> Found:
    """Look names up, slowly: never returns until cancelled (read-only)."""
    _log("stall", query)
    await asyncio.Event().wait()
    raise AssertionError("unreachable")  # pragma: no cover


@planrail.tool(side_effects="none")
async def describe(name: str) -> str:
    """Describe one name (read-only)."""
    _log("describe", name)
    return f"about {name}"


@planrail.tool(side_effects="keyed")
async def create(name: str) -> Account:
    """Create an account for a name (changes the world; honours its key)."""
    _log("create", name)
    PEAK["active"] += 1
    PEAK["peak"] = max(PEAK["peak"], PEAK["active"])
    try:
        await asyncio.sleep(0)  # a turn of the loop: calls started together overlap here
    finally:
        PEAK["active"] -= 1
    if name in _failing():
        raise ValueError(f"cannot create {name}")
    return Account(user_id=f"u_{name}", name=name)


@planrail.tool(side_effects="keyed")
async def bump(name: str) -> Count:
    """Add one to a counter and return it (changes the world; honours its key)."""
    _log("bump", name)
    COUNTERS[name] = COUNTERS.get(name, 0) + 1
    if STALL_AT.get(name) == COUNTERS[name]:
        STALLED.set()
        await asyncio.Event().wait()
    return Count(n=COUNTERS[name])


@planrail.tool(side_effects="unsafe")
async def charge(name: str) -> str:
    """Charge a name's card (changes the world; not safe to repeat)."""
    _log("charge", name)
    if name in _failing():
        raise ValueError(f"card of {name} declined")
    return f"charged {name}"


@planrail.tool(side_effects="unsafe")
async def notify(user_id: str, text: str) -> str:
    """Send a message (changes the world; not safe to repeat)."""
    _log("notify", [user_id, text])
    return f"sent to {user_id}"


TOOLS = [lookup, stall, describe, create, bump, charge, notify]
