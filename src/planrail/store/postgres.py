"""``PostgresStore``: run state in PostgreSQL, for runners on several machines.

Needs the ``postgres`` extra (psycopg 3). psycopg is imported when a store is created, never
when this module is imported, so planrail works without it until you ask for PostgreSQL.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from planrail.errors import StoreError
from planrail.store._sql import SQLStoreBase, Statements, schema_v1, schema_v2
from planrail.store.base import check_lease_args

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

    The store holds one connection; a lost connection surfaces as ``StoreError`` and the store
    must be reopened.
    """

    _sql = _SQL

    def __init__(self, url: str, *, connect_timeout: float = 10.0) -> None:
        self._psycopg = _import_psycopg()
        from psycopg.types.string import TextLoader

        self._where = _describe(url)
        self._lock = threading.Lock()
        with self._translate("connecting"):
            self._conn: psycopg.Connection[tuple[Any, ...]] = self._psycopg.connect(
                url, autocommit=True, connect_timeout=max(1, round(connect_timeout))
            )
        # JSON columns come back as their text; the shared codec decodes them.
        self._conn.adapters.register_loader("json", TextLoader)
        try:
            self._migrate()
        except BaseException:
            self._conn.close()
            raise

    def acquire_lease(self, run_id: str, owner: str, ttl: float, now: float) -> bool:
        check_lease_args(ttl)
        rows = self._read(_SQL.acquire_lease, (run_id, owner, now + ttl, now))
        return bool(rows)

    def __repr__(self) -> str:
        return f"PostgresStore({self._where!r})"

    def _migrate(self) -> None:
        if self._schema_version() == SCHEMA_VERSION:
            return
        with self._write("migrating the schema") as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            current = self._schema_version()
            if current > SCHEMA_VERSION:
                raise StoreError(
                    f"{self._where} uses store schema version {current}, but this planrail only "
                    f"knows versions up to {SCHEMA_VERSION}: upgrade planrail to open it"
                )
            for version, statements in MIGRATIONS:
                if version > current:
                    for statement in statements:
                        conn.execute(statement)
            conn.execute("DELETE FROM schema_version")
            conn.execute("INSERT INTO schema_version (version) VALUES (%s)", (SCHEMA_VERSION,))

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
            detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise StoreError(f"{self._where}: PostgreSQL failed while {doing}: {detail}") from exc


def _describe(url: str) -> str:
    """Where the store lives, for messages, without the password."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        info = conninfo_to_dict(url)
    except Exception:
        return "PostgreSQL"
    user = f"{info['user']}@" if info.get("user") else ""
    host = info.get("host") or "localhost"
    return f"postgresql://{user}{host}:{info.get('port') or 5432}/{info.get('dbname') or ''}"
