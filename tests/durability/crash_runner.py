"""A runner process for the crash tests: runs (or resumes) one durable run, and may die on cue.

Run as a script (``sys.executable crash_runner.py``), never imported by the tests. It imports
planrail, prints ``ready``, then reads one JSON line of configuration from stdin, so the test
harness can keep a warm spare process and not pay the import time inside every trial::

    {"store": URL, "ledger": PATH, "run_id": ID, "keys": true, "lease_ttl": 0.3,
     "step_delay": 0.0, "crash_at": "after_effect:7" | null, "tool": "keyed" | "unsafe"}

It prints ``started`` just before the run begins (the harness times random kills from there)
and, at the end, one JSON line: ``{"status", "steps": {id: status}}``. Exit code:
0 the run succeeded, 1 it finished otherwise, 3 the lease stayed busy, -9 killed.

The plan (``build_plan``): four parallel chains of six steps with cross joins, and a final join
— 25 side-effecting steps. Every step calls a tool that appends one *effect* to a ledger (a
SQLite file separate from the run store) and returns a token; its dependents receive the tokens
of their dependencies, and the ledger records the inputs each effect was made with.

- ``keys: true``: the ledger deduplicates by ``StepContext.idempotency_key`` (what a real
  upstream honouring idempotency keys does), so a repeated call returns the first token;
- ``keys: false``: the tool still claims ``side_effects="keyed"`` but ignores the key (a fresh
  random key per call): the same harness must then show duplicate effects.

Every call, deduplicated or not, is also counted in the ledger's ``calls`` table.

Fault injection (``crash_at`` in the configuration, else ``$PLANRAIL_CRASH_AT``):
``BOUNDARY:N`` sends this process SIGKILL at the N-th crossing of BOUNDARY, one of

- ``before_intent``: about to commit a step's intent (nothing of the call recorded yet);
- ``after_intent``: the intent is committed, the tool not yet called;
- ``after_effect``: the tool's effect is committed in the ledger, its outcome not yet recorded;
- ``after_checkpoint``: a batch of step outcomes was committed to the run store.

The hooks are installed by monkeypatching here: planrail's own code has no fault hooks.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import sys
import threading
import uuid
from contextlib import closing
from typing import Any

from pydantic import BaseModel

import planrail
from planrail.engine import checkpoint
from planrail.engine.executor import Execution
from planrail.engine.lease import RunBusyError
from planrail.store import open_store

CHAINS = 4
LENGTH = 6
CROSS = {"c1s3": "c0s2", "c2s2": "c3s1", "c3s4": "c2s3", "c0s5": "c1s4"}
"""Extra dependencies between chains: step -> a step of another chain."""
BOUNDARIES = ("before_intent", "after_intent", "after_effect", "after_checkpoint")
LEASE_WAIT = 120.0
"""Seconds a resumer waits for the lease of the runner it replaces (killed or finishing)."""

LEDGER_SCHEMA = """
CREATE TABLE IF NOT EXISTS effects (
    effect_key TEXT PRIMARY KEY, step TEXT NOT NULL, token TEXT NOT NULL, inputs TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS calls (
    id INTEGER PRIMARY KEY AUTOINCREMENT, step TEXT NOT NULL, key TEXT NOT NULL,
    pid INTEGER NOT NULL);
"""


def step_ids() -> list[str]:
    """Every step id of ``build_plan()``, in plan order."""
    return [f"c{c}s{s}" for s in range(LENGTH) for c in range(CHAINS)] + ["done"]


def dependencies() -> dict[str, list[str]]:
    """``{step: its depends_on}`` of ``build_plan()``."""
    deps: dict[str, list[str]] = {}
    for s in range(LENGTH):
        for c in range(CHAINS):
            sid = f"c{c}s{s}"
            deps[sid] = ([f"c{c}s{s - 1}"] if s else []) + ([CROSS[sid]] if sid in CROSS else [])
    deps["done"] = [f"c{c}s{LENGTH - 1}" for c in range(CHAINS)]
    return deps


def build_plan(tool_name: str = "write") -> dict[str, Any]:
    """The 25-step plan; chains 0 and 2 use the sync tool, 1 and 3 (and ``done``) the async one."""
    steps = []
    for sid, deps in dependencies().items():
        sync = sid[1] in "02"
        steps.append(
            {
                "id": sid,
                "tool": f"{tool_name}_sync" if sync else f"{tool_name}_async",
                "args": {"step": sid, "inputs": [f"${{{d}.token}}" for d in deps]},
                "depends_on": deps,
            }
        )
    return {"goal": "crash test: every effect exactly once", "steps": steps}


# ---------------------------------------------------------------------------- ledger


def open_ledger(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=60, isolation_level=None)
    conn.executescript(LEDGER_SCHEMA)
    return conn


class Mark(BaseModel):
    step: str
    token: str


CONFIG: dict[str, Any] = {}
_faults: dict[str, int] = {}
_fault_lock = threading.Lock()


def fault(boundary: str) -> None:
    """SIGKILL this process if this is the configured crossing of ``boundary``."""
    target = CONFIG.get("crash_at")
    if not target:
        return
    name, _, count = target.partition(":")
    if name != boundary:
        return
    with _fault_lock:
        _faults[boundary] = _faults.get(boundary, 0) + 1
        hit = _faults[boundary] == int(count)
    if hit:
        os.kill(os.getpid(), signal.SIGKILL)


def effect(ctx: planrail.StepContext, step: str, inputs: list[str]) -> Mark:
    """Append one effect to the ledger (deduplicated by key in ``keys`` mode), return its token."""
    key = ctx.idempotency_key if CONFIG.get("keys", True) else uuid.uuid4().hex
    with closing(open_ledger(CONFIG["ledger"])) as conn:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "INSERT INTO calls (step, key, pid) VALUES (?, ?, ?)", (step, key, os.getpid())
        )
        row = conn.execute("SELECT token FROM effects WHERE effect_key = ?", (key,)).fetchone()
        if row is None:
            token = uuid.uuid4().hex
            conn.execute(
                "INSERT INTO effects VALUES (?, ?, ?, ?)", (key, step, token, json.dumps(inputs))
            )
        else:
            token = row[0]
        conn.execute("COMMIT")
    fault("after_effect")
    return Mark(step=step, token=token)


async def upstream_latency() -> None:
    """Async tools wait ``step_delay`` seconds first, as a call to a slow upstream would (this is
    the workload's latency, which gives the random SIGKILLs something to interrupt)."""
    delay = float(CONFIG.get("step_delay", 0.0))
    if delay:
        await asyncio.sleep(delay)


@planrail.tool(side_effects="keyed")
def write_sync(ctx: planrail.StepContext, step: str, inputs: list[str]) -> Mark:
    """Record an effect (runs in a worker thread)."""
    return effect(ctx, step, inputs)


@planrail.tool(side_effects="keyed")
async def write_async(ctx: planrail.StepContext, step: str, inputs: list[str]) -> Mark:
    """Record an effect (runs on the event loop)."""
    await upstream_latency()
    return effect(ctx, step, inputs)


@planrail.tool(side_effects="unsafe")
def unsafe_sync(ctx: planrail.StepContext, step: str, inputs: list[str]) -> Mark:
    """The same effect from a tool that does not promise to honour keys."""
    return effect(ctx, step, inputs)


@planrail.tool(side_effects="unsafe")
async def unsafe_async(ctx: planrail.StepContext, step: str, inputs: list[str]) -> Mark:
    """The same effect from a tool that does not promise to honour keys (async)."""
    await upstream_latency()
    return effect(ctx, step, inputs)


TOOLS = [write_sync, write_async, unsafe_sync, unsafe_async]


# ---------------------------------------------------------------------------- fault hooks


def install_hooks() -> None:
    """Wrap the checkpointer's intent and record commits with the fault points."""
    # Intents are group-committed: the boundary is the commit that makes them durable (their
    # calls start after it), whether alone or with a batch of outcomes.
    intent, record = checkpoint.Checkpointer._commit_queued, checkpoint.Checkpointer.record

    def hooked_intent(self: checkpoint.Checkpointer, *args: Any, **kwargs: Any) -> None:
        fault("before_intent")
        intent(self, *args, **kwargs)
        fault("after_intent")

    def hooked_record(self: checkpoint.Checkpointer, *args: Any, **kwargs: Any) -> None:
        record(self, *args, **kwargs)
        fault("after_checkpoint")

    checkpoint.Checkpointer._commit_queued = hooked_intent  # type: ignore[method-assign]
    checkpoint.Checkpointer.record = hooked_record  # type: ignore[method-assign]


# ---------------------------------------------------------------------------- main


def run_once() -> int:
    store = open_store(CONFIG["store"])
    with closing(open_ledger(CONFIG["ledger"])):
        pass
    plan = planrail.validate(
        build_plan("unsafe" if CONFIG.get("tool") == "unsafe" else "write"), TOOLS
    ).raise_for_errors()
    print("started", flush=True)
    # A resumer may find the lease of the runner it replaces (killed, or still finishing):
    # the executor waits for it to be released or to expire, on its clock, before taking over.
    execution = Execution(
        plan,
        TOOLS,
        store=store,
        run_id=CONFIG["run_id"],
        lease_ttl=float(CONFIG.get("lease_ttl", 0.3)),
        lease_wait=LEASE_WAIT,
        approve=True,
    )
    try:
        result = asyncio.run(execution.run())
    except RunBusyError:
        print(json.dumps({"status": "busy"}), flush=True)
        return 3
    steps = {sid: str(r.status) for sid, r in result.steps.items()}
    print(
        json.dumps(
            {
                "status": result.status,
                "error": result.error,
                "steps": steps,
            }
        ),
        flush=True,
    )
    store.close()
    return 0 if result.status == "succeeded" else 1


def main() -> int:
    install_hooks()
    print("ready", flush=True)
    line = sys.stdin.readline()
    if not line.strip():
        return 2  # the harness closed a spare it no longer needs
    CONFIG.update(json.loads(line))
    CONFIG.setdefault("crash_at", os.environ.get("PLANRAIL_CRASH_AT"))
    return run_once()


if __name__ == "__main__":
    sys.exit(main())
