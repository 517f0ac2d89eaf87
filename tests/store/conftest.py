"""Fixtures for the store tests: every backend behind one ``store`` fixture, and record makers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from planrail.store import Event, MemoryStore, RunRecord, SQLiteStore, StepRecord, Store

BACKENDS = [
    "memory",
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.postgres),
    "detachable",  # a store through its switch, on (the dashboard resumes a run so)
]
DURABLE_BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]

Opener = Callable[[], Store]


def _opener(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Opener:
    if backend == "memory":
        return MemoryStore
    if backend == "detachable":
        from planrail.store.detach import Detachable

        return lambda: Detachable(MemoryStore())
    if backend == "sqlite":
        path = tmp_path / "store" / "planrail.db"
        return lambda: SQLiteStore(path)
    from planrail.store.postgres import PostgresStore

    url: str = request.getfixturevalue("pg_url")
    return lambda: PostgresStore(url)


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """An empty store of each backend, closed after the test."""
    with _opener(request, request.param, tmp_path)() as opened:
        yield opened


@pytest.fixture(params=DURABLE_BACKENDS)
def open_durable(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Opens a new store object over the same backing database each time it is called."""
    opened: list[Store] = []
    opener = _opener(request, request.param, tmp_path)

    def open_again() -> Store:
        opened.append(opener())
        return opened[-1]

    yield open_again
    for s in opened:
        s.close()


@pytest.fixture
def make_run() -> Callable[..., RunRecord]:
    """Builds a valid ``RunRecord``; keyword arguments override the defaults."""

    def make(run_id: str = "run-1", **fields: Any) -> RunRecord:
        defaults: dict[str, Any] = {
            "plan": {"goal": "onboard", "steps": [{"id": "account", "tool": "create_account"}]},
            "plan_hash": "sha256:abc",
            "status": "running",
            "created_at": 1000.0,
            "updated_at": 1000.0,
        }
        return RunRecord(run_id=run_id, **{**defaults, **fields})

    return make


@pytest.fixture
def make_step() -> Callable[..., StepRecord]:
    """Builds a valid ``StepRecord``; keyword arguments override the defaults."""

    def make(step_id: str = "account", run_id: str = "run-1", **fields: Any) -> StepRecord:
        defaults: dict[str, Any] = {"status": "pending", "idempotency_key": f"{run_id}:{step_id}"}
        return StepRecord(run_id=run_id, step_id=step_id, **{**defaults, **fields})

    return make


@pytest.fixture
def make_event() -> Callable[..., Event]:
    """Builds an ``Event`` with seq 0, as ``commit`` expects."""

    def make(type: str = "step_started", run_id: str = "run-1", **fields: Any) -> Event:
        return Event(run_id=run_id, type=type, at=fields.pop("at", 1000.0), **fields)

    return make
