"""Crash safety: runner processes killed with SIGKILL at random moments and at every boundary,
then resumed until done — every effect exactly once, nothing missing, every run completed.

The harness (``harness.py``) and the runner (``crash_runner.py``) are described there. The default
suite runs a dozen trials; ``make soak`` (``-m slow``) runs 200 with keys and 200 without.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

import pytest

from .harness import BOUNDARIES, RunnerPool, Summary, TrialResult, run_many, run_trial

SOAK_TRIALS = 200
TTL = 1.0
"""Lease of the default-suite runners: long enough that a loaded machine rarely makes a runner
miss its heartbeat (the soak keeps the harness's 0.3 s and so exercises lost leases too)."""


@pytest.fixture
def pool() -> Iterator[RunnerPool]:
    """Runner processes started one ahead (closed after the test)."""
    p = RunnerPool()
    yield p
    p.close()


def _assert_exactly_once(r: TrialResult) -> None:
    assert r.completed, f"{r.name}: the run did not complete in {r.invocations} runners {r}"
    assert r.duplicates == 0, f"{r.name}: {r.duplicates} duplicate effects {r}"
    assert r.missing == 0, f"{r.name}: {r.missing} steps without their effect {r}"
    assert r.flow_ok, f"{r.name}: {r.detail}"
    assert r.hangs == 0, f"{r.name}: {r.detail}"


@pytest.mark.parametrize("boundary", BOUNDARIES)
@pytest.mark.parametrize("n", [1, 7])  # a clean run crosses each boundary at least 14 times
def test_kill_at_each_boundary_then_resume(
    pool: RunnerPool, tmp_path: Path, boundary: str, n: int
) -> None:
    """SIGKILL at the n-th crossing of a boundary, then resume: every effect exactly once, the
    run completes, and the stored outputs fed the dependents."""
    r = run_trial(pool, tmp_path, f"{boundary}:{n}", crash_at=f"{boundary}:{n}", lease_ttl=TTL)
    assert r.kills == 1, "the fault hook did not fire"
    _assert_exactly_once(r)


def test_random_kills_then_resume(pool: RunnerPool, tmp_path: Path) -> None:
    """Runners killed at random moments (up to 2 kills per run, seeded), then resumed: every
    effect exactly once, nothing missing, every run completed."""
    rng = random.Random(7)
    for i in range(3):
        r = run_trial(
            pool, tmp_path / str(i), f"random:{i}", random_kills=2, rng=rng, lease_ttl=TTL
        )
        _assert_exactly_once(r)


def test_without_keys_the_harness_sees_duplicates(pool: RunnerPool, tmp_path: Path) -> None:
    """Proof the crash test can fail: when the tool ignores its idempotency key, a kill after the
    effect and before its checkpoint makes the resumed run repeat the effect."""
    r = run_trial(
        pool, tmp_path, "after_effect:5", keys=False, crash_at="after_effect:5", lease_ttl=TTL
    )
    assert r.kills == 1
    assert r.completed
    assert r.duplicates >= 1
    assert r.missing == 0


@pytest.mark.postgres
def test_kill_and_resume_on_postgres(pool: RunnerPool, tmp_path: Path, pg_url: str) -> None:
    """The same guarantee with the run store on PostgreSQL (the ledger stays a SQLite file)."""
    for i, boundary in enumerate(("after_intent", "after_effect")):
        r = run_trial(
            pool,
            tmp_path / str(i),
            f"{boundary}:9",
            store=pg_url,
            crash_at=f"{boundary}:9",
            lease_ttl=2.0,  # each PostgreSQL commit is a network round trip and an fsync
        )
        assert r.kills == 1
        _assert_exactly_once(r)


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_soak_200_trials_with_and_without_keys(tmp_path: Path) -> None:
    """200 trials (100 at boundaries, 100 random kills) with keys: all exactly once and complete;
    the same 200 without keys: duplicates appear (the figures of docs/durability.md)."""
    with_keys, _ = run_many(tmp_path / "keys", SOAK_TRIALS, keys=True, seed=0)
    without, _ = run_many(tmp_path / "nokeys", SOAK_TRIALS, keys=False, seed=0)
    print("\nwith keys:", asdict(with_keys), "\nwithout keys:", asdict(without))
    _check_soak(with_keys, without)


def _check_soak(with_keys: Summary, without: Summary) -> None:
    assert with_keys.trials == SOAK_TRIALS
    assert with_keys.completed == SOAK_TRIALS
    assert with_keys.exactly_once == SOAK_TRIALS
    assert with_keys.duplicate_effects == 0
    assert with_keys.missing_effects == 0
    assert with_keys.flow_ok == SOAK_TRIALS
    assert with_keys.hangs == without.hangs == 0
    assert without.completed == SOAK_TRIALS
    assert without.missing_effects == 0
    assert without.trials_with_duplicates > 0
