"""Durable run state: runs, step records, events, idempotency intents and leases.

Open a store with ``open_store(url)``; every backend implements the ``Store`` protocol and
passes the same contract tests::

    memory://                         MemoryStore: this process only, nothing kept
    sqlite:///relative/path.db        SQLiteStore (the default: sqlite:///.planrail/planrail.db)
    sqlite:////absolute/path.db       (a bare file path means SQLite too)
    postgresql://user@host/db         PostgresStore (also postgres://; needs planrail[postgres])
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any

from planrail.errors import StoreError
from planrail.store.base import (
    RUN_STATUSES,
    Event,
    IdempotencyConflictError,
    Intent,
    Lease,
    RunExistsError,
    RunNotFoundError,
    RunRecord,
    StepRecord,
    Store,
)
from planrail.store.memory import MemoryStore
from planrail.store.sqlite import SQLiteStore

if TYPE_CHECKING:
    from planrail.store.postgres import PostgresStore

__all__ = [
    "DEFAULT_STORE_URL",
    "RUN_STATUSES",
    "Event",
    "IdempotencyConflictError",
    "Intent",
    "Lease",
    "MemoryStore",
    "PostgresStore",
    "RunExistsError",
    "RunNotFoundError",
    "RunRecord",
    "SQLiteStore",
    "StepRecord",
    "Store",
    "open_store",
]

DEFAULT_STORE_URL = "sqlite:///.planrail/planrail.db"
"""The store used when neither an argument nor ``PLANRAIL_STORE`` names one."""

_FORMS = (
    "memory://, sqlite:///relative/path.db, sqlite:////absolute/path.db, a bare file path, "
    "or postgresql://user@host:port/dbname"
)


def open_store(url: str | None = None, *, create: bool = True) -> Store:
    """Open the store ``url`` names (see the module docstring for the accepted forms).

    ``None`` means the ``PLANRAIL_STORE`` environment variable, or ``DEFAULT_STORE_URL`` when
    that is unset or empty. A SQLite file (and its folder), or PostgreSQL tables, are created
    when missing; with ``create=False`` the store must exist
    (:class:`~planrail.errors.StoreNotFoundError` otherwise — a missing file, a SQLite
    database of another program, a PostgreSQL schema without planrail's tables — with nothing
    created or changed): what reads or changes
    runs already made opens a store so, since a new empty one holds none of them.
    """
    if url is None:
        url = os.environ.get("PLANRAIL_STORE") or DEFAULT_STORE_URL
    url = url.strip()
    if not url:
        raise StoreError(f"the store URL is empty: use {_FORMS}")
    scheme, sep, rest = url.partition("://")
    if not sep:
        typo = _SCHEME_TYPO.match(url)
        if typo is not None:
            # "postgres:/host/db" would otherwise be a SQLite file in a folder "postgres:".
            raise StoreError(
                f"{url!r} looks like a {typo.group(1)} store URL without its '//': use {_FORMS}"
                f" (for a SQLite file of that name, write ./{url})"
            )
        return _sqlite(os.path.expanduser(url), create)
    scheme = scheme.lower()
    if scheme == "memory":
        if rest:
            raise StoreError(f"a memory store takes no path: use memory:// (got {url!r})")
        return MemoryStore()
    if scheme == "sqlite":
        # As SQLAlchemy spells it: sqlite:///rel.db is relative, sqlite:////abs.db absolute.
        if not rest.startswith("/") or rest == "/":
            raise StoreError(f"a SQLite URL needs a path, as in sqlite:///runs.db (got {url!r})")
        if "?" in rest:
            # Not a part of the file name, as a URL reads it; and no option is read from it.
            raise StoreError(
                f"a SQLite URL takes no query parameters (got {url!r}): name the file alone,"
                " as in sqlite:///runs.db (a file name holding '?' can be given as a bare path)"
            )
        return _sqlite(os.path.expanduser(rest[1:]), create)
    if scheme in ("postgresql", "postgres"):
        from planrail.store.postgres import PostgresStore

        return PostgresStore(url, create=create)
    raise StoreError(f"unknown store URL scheme {scheme!r} in {url!r}: use {_FORMS}")


_SCHEME_TYPO = re.compile(r"(?i)(sqlite|memory|postgresql|postgres):(?!//)")
"""A store URL's scheme with a colon but not ``://`` after it (``sqlite:/x.db``)."""


def _sqlite(path: str, create: bool) -> SQLiteStore:
    return SQLiteStore(path, create=create)


def __getattr__(name: str) -> Any:
    # PostgresStore is loaded on first use so that importing planrail.store never needs psycopg.
    if name == "PostgresStore":
        from planrail.store.postgres import PostgresStore

        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
