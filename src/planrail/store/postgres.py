"""``PostgresStore``: run state in PostgreSQL, for runners on several machines.

Needs the ``postgres`` extra (psycopg 3). psycopg is imported when a store is created, never
when this module is imported, so planrail works without it until you ask for PostgreSQL.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from planrail.errors import StoreError, StoreNotFoundError
from planrail.store._sql import (
    TABLES,
    SQLStoreBase,
    Statements,
    schema_v1,
    schema_v2,
)

if TYPE_CHECKING:
    import psycopg

__all__ = ["SCHEMA_VERSION", "PostgresStore"]

MIGRATIONS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (1, schema_v1(json_type="JSON", float_type="DOUBLE PRECISION", bool_type="BOOLEAN")),
    (2, schema_v2()),
)
"""``(version, statements)`` pairs, applied in order to bring a schema up to ``SCHEMA_VERSION``."""

SCHEMA_VERSION = MIGRATIONS[-1][0]

_SQL = Statements("%s")
_MIGRATION_LOCK = 0x706C616E7261696C  # "planrail": serialises concurrent first opens
_LOCK_NOT_AVAILABLE = "55P03"
_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0, "d": 86400.0}


def _seconds(setting: str, default: float) -> float:
    """A PostgreSQL time setting (``'5s'``, ``'1500ms'``, ``'2min'``) in seconds, for messages."""
    number = setting.rstrip("abcdefghijklmnopqrstuvwxyz")
    try:
        return float(number) * _UNITS.get(setting[len(number) :], 1e-3)
    except ValueError:
        return default


def _import_psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise StoreError(
            "a PostgreSQL store needs psycopg: pip install 'planrail[postgres]'"
        ) from None
    return psycopg


class PostgresStore(SQLStoreBase):
    """A ``Store`` in a PostgreSQL database (psycopg 3), in the connection's current schema.

    ``url`` is a ``postgresql://`` URL or a libpq connection string; pick a schema other than
    ``public`` with ``?options=-csearch_path%3Dmyschema``. The tables are created, and migrated
    forward, on open. JSON fields use the ``json`` column type, which keeps the text as written
    (key order included, so a resumed run reads exactly what an uninterrupted one would have).

    ``create=False`` opens only a store that exists: a schema without planrail's tables is a
    :class:`~planrail.errors.StoreNotFoundError`, and nothing is created in it (what only reads
    runs must not write planrail's tables into whatever database a URL names).

    The store holds one connection; a lost connection surfaces as ``StoreError`` and the store
    must be reopened.

    A statement waits at most ``lock_timeout`` seconds for a lock another session holds (a
    runner elsewhere mid-commit, or a session left open in a transaction), then fails with a
    ``StoreError`` saying so, as the SQLite store's ``busy_timeout`` does; a ``lock_timeout``
    set in the URL (``options=-clock_timeout%3D5s``) or on the server is kept.
    """

    _sql = _SQL

    def __init__(
        self,
        url: str,
        *,
        connect_timeout: float = 10.0,
        lock_timeout: float = 30.0,
        create: bool = True,
    ) -> None:
        self._psycopg = _import_psycopg()
        from psycopg.types.string import TextLoader

        self._where = _describe(url)
        self._lock = threading.Lock()
        self._lock_timeout = lock_timeout
        self._create = create
        with self._translate("connecting"):
            self._conn: psycopg.Connection[tuple[Any, ...]] = self._psycopg.connect(
                url, autocommit=True, connect_timeout=max(1, round(connect_timeout))
            )
        # JSON columns come back as their text; the shared codec decodes them.
        self._conn.adapters.register_loader("json", TextLoader)
        try:
            with self._translate("connecting"):
                self._set_lock_timeout()
            self._migrate()
        except BaseException:
            self._conn.close()
            raise

    def __repr__(self) -> str:
        return f"PostgresStore({self._where!r})"

    def _migrate(self) -> None:
        version = self._schema_version()
        if version == SCHEMA_VERSION:
            return
        if version == 0 and not self._create:
            with self._translate("reading the schema"):
                row = self._conn.execute("SELECT current_schema()").fetchone()
            schema = row[0] if row else None
            raise StoreNotFoundError(
                f"no store at {self._where}"
                + (f" in schema {schema!r}" if schema else " (no schema is selected)")
                + ": it holds no planrail tables, and nothing was created (a run creates them;"
                " --store or PLANRAIL_STORE names another)"
            )
        with self._write("migrating the schema") as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            self._migrate_in(conn, self._where, MIGRATIONS)

    def _tables_like_ours(self, conn: Any) -> list[str]:
        sql = (
            "SELECT tablename FROM pg_tables"
            " WHERE schemaname = current_schema() AND tablename = ANY(%s)"
        )
        return [row[0] for row in conn.execute(sql, (list(TABLES),))]

    def _set_lock_timeout(self) -> None:
        """Bound lock waits (PostgreSQL's default is to wait for ever), unless the URL or the
        server already set a bound."""
        row = self._conn.execute("SELECT current_setting('lock_timeout')").fetchone()
        if row is None or row[0] in ("0", "0ms"):
            ms = max(1, round(self._lock_timeout * 1000))
            self._conn.execute(f"SET lock_timeout = {ms}")
        else:
            self._lock_timeout = _seconds(str(row[0]), self._lock_timeout)

    def _schema_version(self) -> int:
        with self._translate("reading the schema version"):
            found = self._conn.execute("SELECT to_regclass('schema_version')").fetchone()
            if found is None or found[0] is None:
                return 0
            row = self._conn.execute("SELECT max(version) FROM schema_version").fetchone()
        return int(row[0] or 0) if row else 0

    def _query(self, sql: str, params: Sequence[Any]) -> list[Any]:
        with self._lock, self._translate("reading"):
            return self._conn.execute(sql, params).fetchall()

    def _cursor(self, conn: Any) -> Any:
        return conn.cursor()  # psycopg connections have no executemany

    @contextmanager
    def _write(self, doing: str) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
        with self._lock, self._translate(doing), self._conn.transaction():
            yield self._conn

    @contextmanager
    def _translate(self, doing: str) -> Iterator[None]:
        try:
            yield
        except self._psycopg.Error as exc:
            if getattr(exc, "sqlstate", None) == _LOCK_NOT_AVAILABLE:
                raise StoreError(
                    f"{self._where}: another session held a lock the store needed for more than"
                    f" {self._lock_timeout:g}s while {doing} (a transaction left open?)"
                ) from exc
            detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise StoreError(f"{self._where}: PostgreSQL failed while {doing}: {detail}") from exc


def _describe(url: str) -> str:
    """Where the store lives, for messages, without the password."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        info = conninfo_to_dict(url)
    except Exception:
        return _describe_url(url)
    user = f"{info['user']}@" if info.get("user") else ""
    host = info.get("host") or "localhost"
    return f"postgresql://{user}{host}:{info.get('port') or 5432}/{info.get('dbname') or ''}"


def _describe_url(url: str) -> str:
    """Where a URL libpq refuses points, for its error: the URL without password or query."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "PostgreSQL"
    if not parts.scheme or "://" not in url:
        return "PostgreSQL"  # a libpq connection string: it may hold a password anywhere
    user = f"{parts.username}@" if parts.username else ""
    return f"{parts.scheme}://{user}{host}{f':{port}' if port else ''}{parts.path}"
