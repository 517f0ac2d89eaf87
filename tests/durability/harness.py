"""The crash harness: kill a runner process with SIGKILL, resume it until done, audit the ledger.

One *trial* is one run of ``crash_runner.build_plan()`` (25 side-effecting steps) driven to the
end through crashes:

- a *boundary* trial kills the first runner at the N-th crossing of one boundary
  (``before_intent``, ``after_intent``, ``after_effect``, ``after_checkpoint``), through the
  runner's fault hook;
- a *random* trial kills one to three successive runners with SIGKILL from here, each after a
  delay drawn from a seeded RNG, counted from the moment the runner says it started.

Then the same command is run again (a resume) until the run reports ``succeeded``, at most
``MAX_INVOCATIONS`` times. The audit reads the ledger and the run store:

- ``duplicates``: effects beyond the first for a step (must be 0 with keys);
- ``missing``: steps with no effect at all (must be 0);
- ``completed``: the run's stored status is ``succeeded``;
- ``flow_ok``: every effect was made with the tokens of its dependencies' effects, and every
  stored step output is the token of that step's effect (stored outputs fed the dependents).

Run as a script for the figures of ``docs/durability.md``::

    python tests/durability/harness.py --trials 200 [--no-keys] [--store sqlite|URL] [--seed 0]

The tests import it (``from .harness import ...``); it has no relative imports so that both work.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import uuid
from collections import Counter
from contextlib import closing
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

RUNNER = Path(__file__).with_name("crash_runner.py")
BOUNDARIES = ("before_intent", "after_intent", "after_effect", "after_checkpoint")
MAX_INVOCATIONS = 12
"""Runner processes one trial may start (kills included) before it counts as not completed."""
RANDOM_KILL_WINDOW = 0.6
"""Random kills land uniformly in [0, this) seconds after a runner says it started."""
STEP_DELAY = 0.004
"""Seconds each tool call takes in random trials, so kills land inside calls too."""
PROCESS_TIMEOUT = 60.0
"""A runner that takes longer than this has hung (a clean run takes about a second)."""


@dataclass
class TrialResult:
    """What one trial did and what the audit found."""

    name: str
    keys: bool
    kills: int = 0
    """Runner processes that died of SIGKILL (by the fault hook or from here)."""
    invocations: int = 0
    completed: bool = False
    duplicates: int = 0
    missing: int = 0
    flow_ok: bool = True
    calls: int = 0
    """Tool calls that reached the ledger (deduplicated ones included)."""
    hangs: int = 0
    """Runners that never finished (killed after ``PROCESS_TIMEOUT``): each one is a bug."""
    in_doubt: list[str] = field(default_factory=list)
    detail: str = ""


@dataclass
class Summary:
    """Figures over many trials."""

    trials: int = 0
    keys: bool = True
    completed: int = 0
    exactly_once: int = 0
    """Trials in which every step's effect happened exactly once."""
    trials_with_duplicates: int = 0
    duplicate_effects: int = 0
    missing_effects: int = 0
    flow_ok: int = 0
    kills: int = 0
    hangs: int = 0
    extra_runs: int = 0
    """Runners beyond one per kill plus the last: runs that stopped early (a lost lease)."""
    by_kind: dict[str, int] = field(default_factory=dict)

    def add(self, r: TrialResult) -> None:
        self.trials += 1
        self.completed += r.completed
        self.exactly_once += r.duplicates == 0 and r.missing == 0
        self.trials_with_duplicates += r.duplicates > 0
        self.duplicate_effects += r.duplicates
        self.missing_effects += r.missing
        self.flow_ok += r.flow_ok
        self.kills += r.kills
        self.hangs += r.hangs
        self.extra_runs += r.invocations - r.kills - r.hangs - 1
        kind = r.name.split(":")[0]
        self.by_kind[kind] = self.by_kind.get(kind, 0) + 1


@dataclass
class Runner:
    """A runner process; its stderr goes to a temporary file so a chatty one never blocks."""

    proc: subprocess.Popen[str]
    err: IO[str]
    err_text: str = ""
    """The runner's stderr, once it finished."""
    hung: bool = False
    """It ran past ``PROCESS_TIMEOUT`` and was killed."""

    def stderr(self) -> str:
        self.err.seek(0)
        return self.err.read().strip()[-2000:]

    def finish(self, kill_after: float | None) -> tuple[int, dict[str, Any]]:
        """Wait for the runner; SIGKILL it if it still runs ``kill_after`` seconds from now.

        Returns its exit code (-9 when killed) and its last JSON line (empty if none).
        """
        proc = self.proc
        if kill_after is not None:
            try:
                proc.wait(timeout=kill_after)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGKILL)
        try:
            out, _ = proc.communicate(timeout=PROCESS_TIMEOUT)
        except subprocess.TimeoutExpired:
            # A hang is a bug the trial reports (``hangs``); the runner is killed like a crash.
            proc.kill()
            out, _ = proc.communicate(timeout=PROCESS_TIMEOUT)
            self.hung = True
        err = self.err_text = self.stderr()
        self.err.close()
        lines = [ln for ln in out.splitlines() if ln.startswith("{")]
        report = json.loads(lines[-1]) if lines else {}
        if proc.returncode not in (0, 1, -signal.SIGKILL):
            raise RuntimeError(f"runner exited {proc.returncode}: {out[-500:]} {err}")
        return proc.returncode, report


class RunnerPool:
    """Starts runner processes one ahead, so Python's start-up and planrail's import overlap
    with the previous runner's work instead of adding to every trial."""

    def __init__(self, env: dict[str, str] | None = None, runner: Path = RUNNER) -> None:
        self.env = {**os.environ, **(env or {})}
        self.runner = runner
        """The runner script (``crash_runner.py``; the soak's ``interrupt_runner.py``)."""
        self._spare: Runner | None = None

    def _spawn(self) -> Runner:
        err = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 (closed by Runner.finish)
        proc = subprocess.Popen(
            [sys.executable, str(self.runner)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env=self.env,
        )
        return Runner(proc, err)

    def start(self, config: dict[str, Any]) -> Runner:
        """A runner that has imported planrail and been given ``config``; returns once it
        printed ``started``."""
        runner = self._spare or self._spawn()
        self._spare = self._spawn()
        proc = runner.proc
        assert proc.stdin is not None
        assert proc.stdout is not None
        ready = proc.stdout.readline().strip()
        if ready != "ready":
            proc.wait(PROCESS_TIMEOUT)
            raise RuntimeError(f"runner did not start: {ready!r} {runner.stderr()}")
        proc.stdin.write(json.dumps(config) + "\n")
        proc.stdin.close()
        proc.stdin = None  # closed: communicate() must not flush it
        started = proc.stdout.readline().strip()
        if started != "started":
            proc.wait(PROCESS_TIMEOUT)
            raise RuntimeError(f"runner failed before starting: {started!r} {runner.stderr()}")
        return runner

    def close(self) -> None:
        """Stop the spare runner (an empty configuration line makes it exit at once)."""
        if self._spare is not None:
            spare, self._spare = self._spare, None
            assert spare.proc.stdin is not None
            spare.proc.stdin.close()
            spare.proc.stdin = None
            spare.proc.communicate(timeout=PROCESS_TIMEOUT)
            spare.err.close()


def run_trial(
    pool: RunnerPool,
    workdir: Path,
    name: str,
    *,
    store: str | None = None,
    keys: bool = True,
    crash_at: str | None = None,
    random_kills: int = 0,
    rng: random.Random | None = None,
    tool: str = "keyed",
    lease_ttl: float = 0.3,
) -> TrialResult:
    """One trial in ``workdir`` (a fresh ledger; a fresh SQLite store unless ``store`` names
    one — a PostgreSQL URL is shared, so each trial gets its own run id).

    ``lease_ttl`` is short so that a resume does not wait long for a killed runner's lease; it
    must still exceed the longest the runner's event loop is held up by store calls, or the
    runner loses its lease and stops (then the trial just needs one more resume).
    """
    workdir.mkdir(parents=True, exist_ok=True)
    ledger = workdir / "ledger.sqlite"
    store_url = store or f"sqlite:///{workdir / 'runs.db'}"
    run_id = f"crash_{uuid.uuid4().hex[:10]}"
    result = TrialResult(name=name, keys=keys)
    base = {
        "store": store_url,
        "ledger": str(ledger),
        "run_id": run_id,
        "keys": keys,
        "tool": tool,
        "lease_ttl": lease_ttl,
        "step_delay": STEP_DELAY if random_kills else 0.0,
    }
    for invocation in range(MAX_INVOCATIONS):
        config = {**base, "crash_at": crash_at if invocation == 0 else None}
        kill_after = None
        if random_kills and rng is not None and result.kills < random_kills:
            kill_after = rng.uniform(0.0, RANDOM_KILL_WINDOW)
        runner = pool.start(config)
        code, report = runner.finish(kill_after)
        result.invocations += 1
        if runner.hung:
            result.hangs += 1
            result.detail += f" runner {invocation} hung: {runner.err_text[-300:]};"
            continue
        if code == -signal.SIGKILL:
            result.kills += 1
            continue
        if report.get("status") == "succeeded":
            break
        if tool == "unsafe" and report.get("status") == "failed":
            result.in_doubt = sorted(s for s, st in report["steps"].items() if st == "in_doubt")
            break
    audit(result, ledger, store_url, run_id)
    return result


def audit(result: TrialResult, ledger: Path, store_url: str, run_id: str) -> None:
    """Fill in the audit fields of ``result`` from the ledger and the run store."""
    from planrail.engine.checkpoint import load_result
    from planrail.store import open_store

    deps = _runner_module().dependencies()
    with closing(sqlite3.connect(ledger)) as conn:
        rows = conn.execute("SELECT step, token, inputs FROM effects").fetchall()
        result.calls = conn.execute("SELECT count(*) FROM calls").fetchone()[0]
    per_step = Counter(step for step, _, _ in rows)
    result.duplicates = sum(n - 1 for n in per_step.values() if n > 1)
    result.missing = sum(1 for sid in deps if per_step[sid] == 0)
    unknown = set(per_step) - set(deps)
    if unknown:
        result.flow_ok = False
        result.detail += f" effects of unknown steps {sorted(unknown)};"
    with closing(open_store(store_url)) as store:
        stored = load_result(store, run_id)
    result.completed = stored is not None and stored.status == "succeeded"
    tokens: dict[str, set[str]] = {}
    for step, token, _ in rows:
        tokens.setdefault(step, set()).add(token)
    for step, _, inputs in rows:
        got = json.loads(inputs)
        if len(got) != len(deps[step]) or any(
            t not in tokens.get(d, set()) for t, d in zip(got, deps[step], strict=False)
        ):
            result.flow_ok = False
            result.detail += f" {step} made with inputs {got} that no dependency produced;"
    if result.completed and stored is not None:
        for sid, rec in stored.steps.items():
            out = rec.output or {}
            if out.get("token") not in tokens.get(sid, set()):
                result.flow_ok = False
                result.detail += f" stored output of {sid} is not its effect's token;"


def _runner_module() -> Any:
    """``crash_runner`` loaded from its file (it is a script, not part of a package)."""
    module = sys.modules.get("planrail_crash_runner")
    if module is None:
        spec = importlib.util.spec_from_file_location("planrail_crash_runner", RUNNER)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["planrail_crash_runner"] = module
        spec.loader.exec_module(module)
    return module


def trial_plan(trials: int, seed: int) -> list[tuple[str, dict[str, Any]]]:
    """``trials`` trial specs: half boundary kills (each boundary, N = 1, 2, …, 25 cycling),
    half random kills (1–3 per trial)."""
    steps = 25
    specs: list[tuple[str, dict[str, Any]]] = []
    boundary_trials = trials // 2
    for i in range(boundary_trials):
        boundary = BOUNDARIES[i % len(BOUNDARIES)]
        n = 1 + (i // len(BOUNDARIES) * 7 + i) % steps
        specs.append((f"{boundary}:{n}", {"crash_at": f"{boundary}:{n}"}))
    rng = random.Random(seed)
    for i in range(trials - boundary_trials):
        specs.append((f"random:{i}", {"random_kills": rng.randint(1, 3)}))
    return specs


def run_many(
    workdir: Path,
    trials: int,
    *,
    keys: bool = True,
    store: str | None = None,
    seed: int = 0,
    progress: bool = False,
) -> tuple[Summary, list[TrialResult]]:
    """Run ``trial_plan(trials, seed)`` and summarise."""
    rng = random.Random(seed + 1)
    pool = RunnerPool()
    summary, results = Summary(keys=keys), []
    try:
        for i, (name, spec) in enumerate(trial_plan(trials, seed)):
            r = run_trial(pool, workdir / f"t{i}", name, store=store, keys=keys, rng=rng, **spec)
            summary.add(r)
            results.append(r)
            if progress:
                print(
                    f"{i + 1:4d} {name:22s} kills={r.kills} runs={r.invocations} "
                    f"done={r.completed} dup={r.duplicates} missing={r.missing} flow={r.flow_ok}"
                    + (f" hangs={r.hangs}" if r.hangs else ""),
                    flush=True,
                )
    finally:
        pool.close()
    return summary, results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="planrail crash harness")
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--no-keys", action="store_true", help="tools ignore the key")
    parser.add_argument("--store", default=None, help="a store URL (default: SQLite per trial)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tmp", default=None, help="where trials write (default: $TMPDIR)")
    parser.add_argument("--json", type=Path, default=None, help="also write the summary here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="planrail-crash-", dir=args.tmp) as tmp:
        summary, _ = run_many(
            Path(tmp),
            args.trials,
            keys=not args.no_keys,
            store=args.store,
            seed=args.seed,
            progress=True,
        )
    print(json.dumps(asdict(summary), indent=2))
    if args.json is not None:
        args.json.write_text(json.dumps(asdict(summary), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
