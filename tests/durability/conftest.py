"""Fixtures for the durability tests: one store opener per backend."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from planrail.store import MemoryStore, SQLiteStore, Store

Opener = Callable[[], Store]


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Opens a store over the same backing database at each call, as a new runner process would
    (the memory backend can only hand back the same object). Everything is closed afterwards."""
    opened: list[Store] = []
    if request.param == "memory":
        memory = MemoryStore()
        opened.append(memory)

        def opener() -> Store:
            return memory

    elif request.param == "sqlite":

        def opener() -> Store:
            opened.append(SQLiteStore(tmp_path / "runs.db"))
            return opened[-1]

    else:
        from planrail.store.postgres import PostgresStore

        url: str = request.getfixturevalue("pg_url")

        def opener() -> Store:
            opened.append(PostgresStore(url))
            return opened[-1]

    yield opener
    for store in opened:
        store.close()
