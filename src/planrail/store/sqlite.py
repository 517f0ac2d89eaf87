"""``SQLiteStore``: the default store, one file that several processes may share."""

from __future__ import annotations

import contextlib
import os
import secrets
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from planrail.errors import StoreCorruptError, StoreError, StoreNotFoundError
from planrail.store._codec import INTENT_COLUMNS, conflict, encode_intent
from planrail.store._sql import (
    TABLES,
    SQLStoreBase,
    Statements,
    foreign_tables,
    schema_v1,
    schema_v2,
)
from planrail.store.base import Intent

__all__ = ["SCHEMA_VERSION", "SQLiteStore"]

MIGRATIONS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (1, schema_v1(json_type="TEXT", float_type="REAL", bool_type="INTEGER")),
    (2, schema_v2()),
)
"""``(version, statements)`` pairs, applied in order to bring a file up to ``SCHEMA_VERSION``."""

SCHEMA_VERSION = MIGRATIONS[-1][0]

_HEADER = b"SQLite format 3\x00"
_SQL = Statements("?")
_CORRUPT_CODES = {sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB}
_BUSY_CODES = {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED}
_WAL_PAGES = 10_000
"""WAL pages after which a commit checkpoints them into the database (SQLite's default: 1,000,
about 4 MB). A durable run writes a few pages per commit, so with the default a checkpoint —
copying the pages and an fsync of the database file, 10-25 ms — lands inside a run of a
thousand steps once or twice, holding up the commit (and the steps waiting on it) it lands in.
At 10,000 (about 40 MB of WAL) most runs see none; closing the store checkpoints what is left."""
_KEYS_PER_QUERY = 500
_KNOWN_KEYS = (
    "SELECT idempotency_key, args_hash FROM intents WHERE run_id = ? AND idempotency_key IN ({})"
)
_INSERT_INTENT = (
    f"INSERT INTO intents ({', '.join(INTENT_COLUMNS)}) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (run_id, idempotency_key) DO NOTHING"
)


class SQLiteStore(SQLStoreBase):
    """A ``Store`` in one SQLite file (standard library ``sqlite3``, WAL mode).

    Several processes may open the same file: every write is one ``BEGIN IMMEDIATE``
    transaction, and a writer waits up to ``busy_timeout`` seconds for another to finish.
    JSON fields are stored as text. The schema is versioned (table ``schema_version``) and
    migrated forward on open; a file written by a newer planrail is refused, as is a damaged
    one (``StoreCorruptError``): planrail never treats a file it cannot read as empty.

    ``durable=False`` sets ``synchronous=NORMAL``: faster commits, but the last ones may be lost
    on power failure or an OS crash (never on a crash of the process itself).

    ``create=False`` opens only a store that exists: a missing file, or a SQLite database that
    holds no planrail store (another program's, or an empty one), is a
    :class:`~planrail.errors.StoreNotFoundError`, and nothing is created or changed in it —
    neither planrail's tables nor the database's journal mode.
    """

    _sql = _SQL

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout: float = 30.0,
        durable: bool = True,
        create: bool = True,
    ) -> None:
        self.path = os.fspath(path)
        self._busy_timeout = busy_timeout
        self._lock = threading.Lock()
        file = _file_of(self.path)
        if file is not None:
            if not os.path.lexists(file):
                if not create:
                    raise StoreNotFoundError(
                        f"no store at {self.path}: no run has used it yet (a run creates it;"
                        " --store or PLANRAIL_STORE names another)"
                    )
                _create(file)
            _check_file(file)
        with self._translate("opening the store"):
            self._conn = sqlite3.connect(
                self.path,
                timeout=busy_timeout,
                isolation_level=None,
                check_same_thread=False,
                cached_statements=64,
                uri=self.path.startswith("file:"),
            )
        try:
            with self._translate("opening the store"):
                self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
                if not create:
                    self._check_is_a_store()
                elif self._schema_version() == 0:
                    self._refuse_foreign_tables()  # before the journal mode is changed
                self._conn.execute("PRAGMA journal_mode = WAL").fetchall()
                self._conn.execute(f"PRAGMA synchronous = {'FULL' if durable else 'NORMAL'}")
                self._conn.execute(f"PRAGMA wal_autocheckpoint = {_WAL_PAGES}").fetchall()
                self._conn.execute("PRAGMA foreign_keys = ON")
                self._migrate()
        except BaseException:
            self._conn.close()
            raise

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r})"

    def _record_intents(self, cur: Any, intents: Sequence[Intent]) -> None:
        """The keys already recorded are looked up first, then every intent is inserted in one
        ``executemany`` (a group commit carries a whole wave of them). Atomic: the commit holds
        the database's write lock (``BEGIN IMMEDIATE``) from before the lookup."""
        known: dict[tuple[str, str], str] = {}
        by_run: dict[str, list[str]] = {}
        for i in intents:
            by_run.setdefault(i.run_id, []).append(i.idempotency_key)
        for run_id, keys in by_run.items():
            for at in range(0, len(keys), _KEYS_PER_QUERY):
                chunk = keys[at : at + _KEYS_PER_QUERY]
                sql = _KNOWN_KEYS.format(", ".join("?" * len(chunk)))
                for key, recorded in cur.execute(sql, (run_id, *chunk)).fetchall():
                    known[run_id, key] = recorded
        for i in intents:
            recorded = known.get((i.run_id, i.idempotency_key))
            if recorded is not None and recorded != i.args_hash:
                raise conflict(i, recorded)
            known.setdefault((i.run_id, i.idempotency_key), i.args_hash)
        cur.executemany(_INSERT_INTENT, [encode_intent(i) for i in intents])

    def _migrate(self) -> None:
        if self._schema_version() == SCHEMA_VERSION:
            return
        with self._write("migrating the schema") as conn:
            self._migrate_in(conn, self.path, MIGRATIONS)

    def _refuse_foreign_tables(self) -> None:
        """Refuse a database without planrail's schema that holds tables named as planrail's
        (another program's ``runs``, say): creating the schema would fail half-way or share them."""
        found = self._tables_like_ours(self._conn)
        if found:
            raise foreign_tables(self.path, found)

    def _tables_like_ours(self, conn: Any) -> list[str]:
        marks = ", ".join("?" * len(TABLES))
        sql = f"SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ({marks})"
        return [row[0] for row in conn.execute(sql, TABLES)]

    def _check_is_a_store(self) -> None:
        """Refuse a database without planrail's ``schema_version`` table, before anything of it
        is changed (what only reads runs must not write a schema into someone's database)."""
        names = [
            row[0]
            for row in self._conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
            )
        ]
        if "schema_version" in names:
            return
        held = (
            f"its tables: {', '.join(names[:5])}{', ...' if len(names) > 5 else ''}"
            if names
            else "it has no tables"
        )
        raise StoreNotFoundError(
            f"no store at {self.path}: it is a SQLite database but not a planrail store ({held});"
            " nothing was changed in it (a run creates a store; --store or PLANRAIL_STORE"
            " names another)"
        )

    def _schema_version(self) -> int:
        try:
            row = self._conn.execute("SELECT max(version) FROM schema_version").fetchone()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return 0
            raise
        return int(row[0] or 0)

    def _query(self, sql: str, params: Sequence[Any]) -> list[Any]:
        with self._lock, self._translate("reading"):
            rows: list[Any] = self._conn.execute(sql, params).fetchall()
        return rows

    @contextmanager
    def _write(self, doing: str) -> Iterator[sqlite3.Connection]:
        with self._lock, self._translate(doing):
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    @contextmanager
    def _translate(self, doing: str) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            code = getattr(exc, "sqlite_errorcode", -1) & 0xFF
            if code in _CORRUPT_CODES:
                raise StoreCorruptError(
                    f"{self.path}: the SQLite file is damaged ({exc}); planrail will not guess "
                    "at its contents: restore it from a backup or move it aside"
                ) from None
            if code == sqlite3.SQLITE_READONLY:
                raise StoreError(
                    f"{self.path}: the store is read-only to this process ({exc}) while {doing}:"
                    " planrail writes to the store file, and SQLite makes its -wal and -shm"
                    " files beside it, so it needs write permission on the file and its folder"
                ) from exc
            if code in _BUSY_CODES:
                raise StoreError(
                    f"{self.path}: another process held the database for more than "
                    f"{self._busy_timeout:g}s while {doing}"
                ) from exc
            raise StoreError(f"{self.path}: SQLite failed while {doing}: {exc}") from exc


def _file_of(path: str) -> str | None:
    """The file a store ``path`` names — itself, or the file of a ``file:`` URI — or None for
    an in-memory database (``:memory:``, ``file::memory:``, ``mode=memory``). A URI's file is
    checked and created like a path's (a 0-byte file is damaged, ``create=False`` makes none)."""
    if path == ":memory:":
        return None
    if not path.startswith("file:"):
        return path
    parts = urlsplit(path)
    if parts.path in ("", ":memory:") or "memory" in parse_qs(parts.query).get("mode", []):
        return None
    return unquote(parts.path)


def _create(path: str) -> None:
    """Create a store file atomically, so no process ever sees it half made.

    SQLite creates an empty file at once and writes its header later; another process opening
    it in between would find a 0-byte file, which ``_check_file`` rightly calls damaged. So the
    file is built under a temporary name and linked into place (``os.link`` never replaces a file
    another process created first).
    """
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"{path}: cannot create the store's folder: {exc}") from None
    tmp = f"{path}.{os.getpid()}-{secrets.token_hex(4)}.new"
    try:
        conn = sqlite3.connect(tmp, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode = WAL").fetchall()
        finally:
            conn.close()
        SQLiteStore(tmp).close()
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        except OSError:
            # A filesystem without hard links: a rename is the best we can do.
            if not os.path.lexists(path):
                os.replace(tmp, path)
    except (OSError, sqlite3.Error) as exc:
        raise StoreError(f"{path}: cannot create the store: {exc}") from None
    finally:
        for leftover in (tmp, tmp + "-wal", tmp + "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(leftover)


def _check_file(path: str) -> None:
    """Refuse a file that is not, or no longer, a whole SQLite database, before SQLite opens it.

    SQLite would treat an empty file as a new database and may read a truncated one until it hits
    the missing pages; a run store must say so at once instead.
    """
    try:
        size = os.path.getsize(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StoreError(f"{path}: cannot open the store: {exc}") from None

    def corrupt(why: str) -> StoreCorruptError:
        return StoreCorruptError(
            f"{path} {why}; planrail will not treat it as an empty store: restore it from a "
            "backup, or move it aside to start a new one"
        )

    if os.path.isdir(path):
        raise StoreError(f"{path} is a directory, not a SQLite store file")
    if size == 0:
        raise corrupt("is empty (0 bytes) where a SQLite database was expected")
    try:
        with open(path, "rb") as f:
            header = f.read(100)
    except OSError as exc:
        raise StoreError(f"{path}: cannot read the store: {exc}") from None
    if not _HEADER.startswith(header[: len(_HEADER)]):
        raise corrupt("is not a SQLite database (its first bytes are not a SQLite header)")
    if len(header) < 100:
        raise corrupt(f"is truncated ({size} bytes, shorter than a SQLite header)")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    # The page count is only trustworthy when the two change counters agree; with a WAL file
    # present another process may be checkpointing, so the file may legitimately lag behind.
    count_valid = header[24:28] == header[92:96]
    if count_valid and not os.path.exists(path + "-wal") and size < pages * page_size:
        raise corrupt(f"is truncated ({size} bytes of the {pages * page_size} its header declares)")
