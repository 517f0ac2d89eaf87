"""A runner process for the interruption soak: drives one durable run the way ``planrail run``
does (``planrail.cli.common.execute``: the CLI's Ctrl-C handling and exit codes), and may be
interrupted at any moment by the soak (``soak.py``).

Run as a script, never imported by the tests. Like ``crash_runner.py`` it prints ``ready``,
reads one JSON line of configuration from stdin, prints ``started`` just before the run, and at
the end one JSON line ``{"status", "steps": {id: status}}``::

    {"store": URL, "ledger": PATH, "run_id": ID, "fail_fast": false, "fail": false}

The plan mixes every kind of tool, sync and async, with a fan-out: ``seed`` (keyed) lists five
items; ``fan`` (keyed, sync, two at a time) runs once per item; ``idem`` (idempotent) follows
``seed``; ``pay1`` and ``pay2`` are unsafe (``pay2`` after ``fan``); ``last`` (keyed) joins
``pay2`` and ``idem``. Each call reaches a *receiver-side ledger* (a SQLite file apart from the
run store): keyed and idempotent effects are deduplicated by the idempotency key, as a real
upstream honouring keys does; unsafe effects are appended on every call, so a call made twice
shows as two effects. With ``fail``, ``idem`` fails once (so ``--fail-fast`` cancels the rest).

Exit codes are the CLI's: 0 succeeded, 1 failed, 130 interrupted/cancelled, 2 busy.
"""

from __future__ import annotations

import asyncio
import json
import random
import sqlite3
import sys
import threading
from contextlib import closing
from typing import Any

from rich.console import Console
from soak import LEDGER_SCHEMA  # this folder is on sys.path: the runner runs as a script

import planrail
from planrail.cli.common import ExitCode, execute, exit_code
from planrail.cli.interrupts import exit_on_interrupt
from planrail.engine.executor import Execution
from planrail.errors import PlanrailError
from planrail.store import open_store

CONFIG: dict[str, Any] = {}
ITEMS = [1, 2, 3, 4, 5]


def open_ledger(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=30, isolation_level=None)
    conn.executescript(LEDGER_SCHEMA)
    return conn


def _effect(ctx: planrail.StepContext, kind: str) -> dict[str, str]:
    """One effect at the receiver; returns the token the step outputs."""
    with closing(open_ledger(CONFIG["ledger"])) as conn:
        conn.execute(
            "INSERT INTO calls (step, key) VALUES (?, ?)", (ctx.step_id, ctx.idempotency_key)
        )
        if kind == "unsafe":
            conn.execute(
                "INSERT INTO effects (key, step, kind) VALUES (?, ?, ?)",
                (ctx.idempotency_key, ctx.step_id, kind),
            )
        else:
            conn.execute(
                "INSERT OR IGNORE INTO effects (key, step, kind) VALUES (?, ?, ?)",
                (ctx.idempotency_key, ctx.step_id, kind),
            )
    return {"token": f"{ctx.step_id}:{ctx.idempotency_key}"}


def _pause() -> float:
    return random.uniform(0.005, 0.04)


@planrail.tool(side_effects="keyed")
async def seed(ctx: planrail.StepContext) -> list[int]:
    """Lists the items (a keyed effect)."""
    await asyncio.sleep(_pause())
    _effect(ctx, "keyed")
    return list(ITEMS)


@planrail.tool(side_effects="keyed")
def put(ctx: planrail.StepContext, n: int) -> dict[str, str]:
    """A keyed effect per item (sync: runs in a thread)."""
    threading.Event().wait(_pause())
    return _effect(ctx, "keyed")


@planrail.tool(side_effects="idempotent")
async def idem(ctx: planrail.StepContext, n: int) -> dict[str, str]:
    """An idempotent effect; fails once when the configuration says so."""
    await asyncio.sleep(_pause())
    if CONFIG.get("fail"):
        raise ValueError("upstream said no (once)")
    return _effect(ctx, "idempotent")


@planrail.tool(side_effects="unsafe")
async def pay(ctx: planrail.StepContext, amount: int) -> dict[str, str]:
    """An unsafe effect: every call is an effect (async)."""
    await asyncio.sleep(_pause())
    return _effect(ctx, "unsafe")


@planrail.tool(side_effects="unsafe")
def pay_sync(ctx: planrail.StepContext, amount: int) -> dict[str, str]:
    """An unsafe effect: every call is an effect (sync)."""
    threading.Event().wait(_pause())
    return _effect(ctx, "unsafe")


TOOLS = [seed, put, idem, pay, pay_sync]
UNSAFE_STEPS = ("pay1", "pay2")
STEPS = ("seed", "fan", "idem", "pay1", "pay2", "last")


def build_plan() -> dict[str, Any]:
    return {
        "goal": "interruption soak",
        "steps": [
            {"id": "seed", "tool": "seed", "args": {}},
            {
                "id": "fan",
                "tool": "put",
                "for_each": "${seed}",
                "args": {"n": "${item}"},
                "max_parallel": 2,
                "depends_on": ["seed"],
            },
            {"id": "idem", "tool": "idem", "args": {"n": 1}, "depends_on": ["seed"]},
            {"id": "pay1", "tool": "pay_sync", "args": {"amount": 1}},
            {"id": "pay2", "tool": "pay", "args": {"amount": 2}, "depends_on": ["fan"]},
            {
                "id": "last",
                "tool": "put",
                "args": {"n": 0},
                "depends_on": ["pay2", "idem"],
            },
        ],
    }


def main() -> int:
    exit_on_interrupt()  # as the `planrail` entry point does
    try:
        return _main()
    except KeyboardInterrupt:  # before the run is driven: what click does (no traceback)
        return int(ExitCode.INTERRUPTED)


def _main() -> int:
    print("ready", flush=True)
    line = sys.stdin.readline()
    if not line.strip():
        return 2
    CONFIG.update(json.loads(line))
    store = open_store(CONFIG["store"])
    plan = planrail.validate(build_plan(), TOOLS).raise_for_errors()
    execution = Execution(
        plan,
        TOOLS,
        store=store,
        run_id=CONFIG["run_id"],
        failure_mode="fail_fast" if CONFIG.get("fail_fast") else "continue",
        approve=True,
    )
    execution.watch_interval = 0.05
    print("started", flush=True)
    console = Console(stderr=True, quiet=True)
    try:
        result = execute(execution, console, quiet=True)
    except PlanrailError:
        print(json.dumps({"status": "busy"}), flush=True)
        return int(ExitCode.USAGE)
    except BaseException as exc:  # typer.Exit from a busy run
        code = getattr(exc, "exit_code", None)
        print(json.dumps({"status": "busy", "code": code}), flush=True)
        return int(code) if isinstance(code, int) else 2
    steps = {sid: str(r.status) for sid, r in result.steps.items()}
    print(json.dumps({"status": result.status, "steps": steps}), flush=True)
    store.close()
    return int(exit_code(result))


if __name__ == "__main__":
    sys.exit(main())
