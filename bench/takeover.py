"""Resume after a SIGKILL on the same host: instant lease takeover vs waiting out the lease.

One command, both cases. A runner process starts a durable run (SQLite, ``lease_ttl`` 30 s, the
default) whose one step blocks; once the step runs, the runner is killed with SIGKILL. A second
runner, already started and imported (so Python's start-up is not counted), then resumes the run
with ``lease_wait=120``; the figure is the time from the kill until the resumer holds the run:

- ``takeover``: today's planrail (the lease names a dead process on this host: taken at once);
- ``lease_wait``: the same resumer with the dead-owner check turned off, i.e. what happened
  before (the resumer waits for the 30 s lease to expire).

Medians over rounds (3; 1 with ``--quick``); writes ``bench/results/takeover[-quick].json``.

    python -m bench.takeover [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import planrail

RESULTS = Path(__file__).with_name("results")
LEASE_TTL = 30.0


def _plan() -> tuple[object, list[object]]:
    @planrail.tool(side_effects="keyed")
    async def block(ctx: planrail.StepContext) -> str:
        """Runs for a long time (until killed)."""
        print("running", flush=True)
        await asyncio.sleep(3600)
        return "done"

    tools = [block]
    plan = planrail.validate(
        {"goal": "takeover", "steps": [{"id": "b", "tool": "block", "args": {}}]}, tools
    ).raise_for_errors()
    return plan, tools


def _child(role: str, db: str, mode: str) -> None:
    """``first``: start the run and block; ``resume``: wait for 'go', resume, report."""
    from planrail.engine import lease
    from planrail.engine.executor import Execution
    from planrail.store import SQLiteStore

    plan, tools = _plan()
    if mode == "lease_wait":
        lease.owner_gone = lambda owner: False  # type: ignore[assignment]
    store = SQLiteStore(db)
    execution = Execution(
        plan,  # type: ignore[arg-type]
        tools,  # type: ignore[arg-type]
        store=store,
        run_id="take",
        lease_ttl=LEASE_TTL,
        lease_wait=120.0,
        approve=True,
    )
    if role == "resume":
        print("ready", flush=True)
        sys.stdin.readline()
    asyncio.run(execution.run())


def _once(mode: str) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "runs.db")
        me = [sys.executable, "-m", "bench.takeover", "--child"]
        first = subprocess.Popen([*me, "first", db, mode], stdout=subprocess.PIPE, text=True)
        resumer = subprocess.Popen(
            [*me, "resume", db, mode],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert first.stdout is not None
        assert resumer.stdout is not None
        assert resumer.stdin is not None
        assert first.stdout.readline().strip() == "running"
        assert resumer.stdout.readline().strip() == "ready"
        first.send_signal(signal.SIGKILL)
        first.wait()
        killed = time.monotonic()
        resumer.stdin.write("go\n")
        resumer.stdin.flush()
        line = resumer.stdout.readline().strip()  # the step runs again: the run is held
        took = time.monotonic() - killed
        assert line == "running", line
        resumer.send_signal(signal.SIGKILL)
        resumer.wait()
        return took


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        _child(*argv[1:4])
        return
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    rounds = 1 if args.quick else 3
    takeover = [_once("takeover") for _ in range(rounds)]
    waited = [_once("lease_wait") for _ in range(rounds)]
    result = {
        "rounds": rounds,
        "lease_ttl_s": LEASE_TTL,
        "takeover_s": round(statistics.median(takeover), 3),
        "lease_wait_s": round(statistics.median(waited), 3),
    }
    print(json.dumps(result, indent=2))
    RESULTS.mkdir(exist_ok=True)
    name = "takeover-quick.json" if args.quick else "takeover.json"
    (RESULTS / name).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
