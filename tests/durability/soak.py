"""The interruption soak: runs interrupted every way a user interrupts them, then resumed (and
resolved, as an operator would) until done; a receiver-side ledger counts the effects.

One *trial* drives one run of ``interrupt_runner.build_plan()`` (keyed, idempotent and unsafe
tools, sync and async, a fan-out) to the end. Its first runner is disrupted one way, at a
random moment (seeded) after it says it started — often mid fan-out:

- ``sigkill``: SIGKILL (a crash; the next runner takes the dead runner's lease over at once);
- ``sigint``: one SIGINT (Ctrl-C: the run cancels and records itself, exit 130);
- ``double_sigint``: two SIGINTs 20 ms apart (exit 130 at once, no traceback);
- ``cancel``: ``planrail cancel`` from this process (``operations.cancel`` on the store);
- ``fail_fast``: ``--fail-fast`` with one step failing once, cancelling the others.

Then runners run undisturbed. Between runners, in-doubt steps are resolved as an operator with
the receiver's records would: ``--succeeded`` (with the output the call returned) when the
ledger holds the effect, ``--retry`` when it does not. The audit:

- ``duplicates``: unsafe effects beyond one per step, plus keyed/idempotent steps (or items)
  called with more than one key — must be 0;
- ``missing``: steps or items with no effect — must be 0;
- ``completed``: the stored run ``succeeded``;
- ``tracebacks``: runners whose stderr holds a Python traceback — must be 0;
- ``takeover``: seconds from a SIGKILL to the next runner holding the run (its ``started``
  line to its first commit), against the 30 s lease it would otherwise wait out.

Run as a script for the figures in ``docs/durability.md``::

    python tests/durability/soak.py --trials 500 [--seed 0] [--store URL]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import closing
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

try:  # imported by the tests, or run as a script (and imported so by interrupt_runner.py)
    from .harness import RunnerPool
except ImportError:
    from harness import RunnerPool  # type: ignore[no-redef]

RUNNER = Path(__file__).with_name("interrupt_runner.py")
MODES = ("sigkill", "sigint", "double_sigint", "cancel", "fail_fast")
MAX_INVOCATIONS = 10
WINDOW = 0.5
"""Disruptions land uniformly in [0, this) seconds after the runner says it started."""
TIMEOUT = 60.0
STEPS = ("seed", "fan", "idem", "pay1", "pay2", "last")
UNSAFE = ("pay1", "pay2")
ITEMS = 5
LEDGER_SCHEMA = """
CREATE TABLE IF NOT EXISTS effects (
    id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL, step TEXT NOT NULL,
    kind TEXT NOT NULL);
CREATE UNIQUE INDEX IF NOT EXISTS keyed_once ON effects (key) WHERE kind != 'unsafe';
CREATE TABLE IF NOT EXISTS calls (
    id INTEGER PRIMARY KEY AUTOINCREMENT, step TEXT NOT NULL, key TEXT NOT NULL);
"""
"""The receiver-side ledger: keyed/idempotent effects once per key, unsafe ones every call."""


@dataclass
class Trial:
    mode: str
    invocations: int = 0
    completed: bool = False
    duplicates: int = 0
    missing: int = 0
    tracebacks: int = 0
    resolved: int = 0
    codes: list[int] = field(default_factory=list)
    takeover: float | None = None
    detail: str = ""


@dataclass
class Summary:
    trials: int = 0
    completed: int = 0
    duplicate_effects: int = 0
    missing_effects: int = 0
    tracebacks: int = 0
    resolves: int = 0
    by_mode: dict[str, int] = field(default_factory=dict)
    takeover_median_s: float | None = None
    takeover_max_s: float | None = None
    failures: list[str] = field(default_factory=list)


def _start(
    pool: RunnerPool, config: dict[str, Any]
) -> tuple[subprocess.Popen[str], IO[str], float]:
    runner = pool.start(config)
    return runner.proc, runner.err, time.monotonic()


def _finish(proc: subprocess.Popen[str], err: IO[str]) -> tuple[int, dict[str, Any], str]:
    try:
        out, _ = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    err.seek(0)
    text = err.read()
    err.close()
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    return proc.returncode, (json.loads(lines[-1]) if lines else {}), text


def _disrupt(
    proc: subprocess.Popen[str], mode: str, delay: float, store_url: str, run_id: str
) -> None:
    try:
        proc.wait(timeout=delay)
        return  # it finished first
    except subprocess.TimeoutExpired:
        pass
    if mode == "sigkill":
        proc.send_signal(signal.SIGKILL)
    elif mode == "sigint":
        proc.send_signal(signal.SIGINT)
    elif mode == "double_sigint":
        proc.send_signal(signal.SIGINT)
        try:  # the second Ctrl-C 20 ms after the first, unless the runner is gone already
            proc.wait(timeout=0.02)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGINT)
    elif mode == "cancel":
        from planrail.engine import operations
        from planrail.store import open_store

        # Not created yet, or over already: nothing to cancel.
        with closing(open_store(store_url)) as store, contextlib.suppress(Exception):
            operations.cancel(store, run_id, by="soak")


def _first_commit_after(store_url: str, run_id: str, since_wall: float) -> float | None:
    """Wall time of the run's first event at or after ``since_wall`` (the new runner's)."""
    from planrail.store import open_store

    with closing(open_store(store_url)) as store:
        for event in store.events(run_id):
            if event.at >= since_wall:
                return event.at
    return None


def _resolve_in_doubt(store_url: str, ledger: Path, run_id: str) -> int:
    """As an operator with the receiver's records: succeeded if the effect exists, else retry."""
    from planrail.engine import operations
    from planrail.store import open_store

    done = 0
    with closing(open_store(store_url)) as store, closing(sqlite3.connect(ledger)) as conn:
        for sid, rec in store.get_steps(run_id).items():
            if rec.status != "in_doubt":
                continue
            key = f"{run_id}:{sid}"
            row = conn.execute("SELECT 1 FROM effects WHERE key = ?", (key,)).fetchone()
            if row is not None:
                operations.resolve(
                    store, run_id, sid, "succeeded", output={"token": f"{sid}:{key}"}, by="soak"
                )
            else:
                operations.resolve(store, run_id, sid, "retry", by="soak")
            done += 1
    return done


def run_trial(
    pool: RunnerPool, workdir: Path, mode: str, rng: random.Random, store: str | None
) -> Trial:
    workdir.mkdir(parents=True, exist_ok=True)
    ledger = workdir / "ledger.sqlite"
    with closing(sqlite3.connect(ledger)) as conn:
        conn.executescript(LEDGER_SCHEMA)
    store_url = store or f"sqlite:///{workdir / 'runs.db'}"
    run_id = f"soak_{uuid.uuid4().hex[:10]}"
    trial = Trial(mode)
    killed_at: float | None = None
    for n in range(MAX_INVOCATIONS):
        first = n == 0
        config = {
            "store": store_url,
            "ledger": str(ledger),
            "run_id": run_id,
            "fail_fast": first and mode == "fail_fast",
            "fail": first and mode == "fail_fast",
        }
        proc, err, began = _start(pool, config)
        if first:
            _disrupt(proc, mode, rng.uniform(0.0, WINDOW), store_url, run_id)
            if (mode == "sigkill" and proc.poll() is None) or proc.returncode == -signal.SIGKILL:
                killed_at = time.time()
        elif killed_at is not None and trial.takeover is None:
            started_wall = time.time() - (time.monotonic() - began)
            code, report, text = _finish(proc, err)
            at = _first_commit_after(store_url, run_id, started_wall)
            trial.takeover = None if at is None else max(0.0, at - started_wall)
            proc = None  # type: ignore[assignment]
        if proc is not None:
            code, report, text = _finish(proc, err)
        trial.invocations += 1
        trial.codes.append(code)
        if "Traceback" in text:
            trial.tracebacks += 1
            trial.detail += f" traceback: {text[-400:]}"
        if report.get("status") == "succeeded":
            break
        trial.resolved += _resolve_in_doubt(store_url, ledger, run_id)
    _audit(trial, ledger, store_url, run_id)
    return trial


def _audit(trial: Trial, ledger: Path, store_url: str, run_id: str) -> None:
    from planrail.engine.checkpoint import load_result
    from planrail.store import open_store

    with closing(sqlite3.connect(ledger)) as conn:
        effects = conn.execute("SELECT key, step, kind FROM effects").fetchall()
        calls = conn.execute("SELECT step, key FROM calls").fetchall()
    per_key: dict[str, int] = {}
    for key, _, _ in effects:
        per_key[key] = per_key.get(key, 0) + 1
    trial.duplicates = sum(c - 1 for c in per_key.values() if c > 1)
    expected = {f"{run_id}:{s}" for s in STEPS if s != "fan"}
    expected |= {f"{run_id}:fan:{i}" for i in range(ITEMS)}
    trial.missing = len(expected - set(per_key))
    strange = {k for _, k in calls} - expected
    if strange:
        trial.duplicates += len(strange)
        trial.detail += f" calls with unexpected keys {sorted(strange)[:3]};"
    with closing(open_store(store_url)) as store:
        stored = load_result(store, run_id)
    trial.completed = stored is not None and stored.status == "succeeded"
    if not trial.completed and stored is not None:
        trial.detail += f" ended {stored.status}: {stored.error};"


def run_many(
    workdir: Path, trials: int, seed: int = 0, store: str | None = None, progress: bool = False
) -> Summary:
    rng = random.Random(seed)
    pool = RunnerPool(runner=RUNNER)
    summary = Summary()
    takeovers: list[float] = []
    try:
        for i in range(trials):
            mode = MODES[i % len(MODES)]
            t = run_trial(pool, workdir / f"t{i}", mode, rng, store)
            summary.trials += 1
            summary.completed += t.completed
            summary.duplicate_effects += t.duplicates
            summary.missing_effects += t.missing
            summary.tracebacks += t.tracebacks
            summary.resolves += t.resolved
            summary.by_mode[mode] = summary.by_mode.get(mode, 0) + 1
            if t.takeover is not None:
                takeovers.append(t.takeover)
            if not t.completed or t.duplicates or t.missing or t.tracebacks:
                summary.failures.append(f"{i} {mode}: {t.detail} codes={t.codes}")
            if progress:
                print(
                    f"{i + 1:4d} {mode:14s} runs={t.invocations} codes={t.codes} done={t.completed}"
                    f" dup={t.duplicates} missing={t.missing} resolved={t.resolved}"
                    + (f" takeover={t.takeover:.3f}s" if t.takeover is not None else ""),
                    flush=True,
                )
    finally:
        pool.close()
    if takeovers:
        summary.takeover_median_s = round(statistics.median(takeovers), 3)
        summary.takeover_max_s = round(max(takeovers), 3)
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="planrail interruption soak")
    parser.add_argument(
        "--trials", type=int, default=int(os.environ.get("PLANRAIL_SOAK_TRIALS", 500))
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--store", default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="planrail-soak-") as tmp:
        summary = run_many(Path(tmp), args.trials, args.seed, args.store, progress=True)
    text = json.dumps(asdict(summary), indent=2)
    print(text)
    if args.json is not None:
        args.json.write_text(text + "\n")
    return 0 if not summary.failures else 1


if __name__ == "__main__":
    sys.exit(main())
