"""SQL text shared by the SQLite and PostgreSQL backends (they differ only in placeholders)."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from planrail.errors import StoreError
from planrail.store._codec import (
    EVENT_COLUMNS,
    INTENT_COLUMNS,
    LEASE_COLUMNS,
    RUN_COLUMNS,
    STEP_COLUMNS,
    check_lease_text,
    conflict,
    decode_event,
    decode_intent,
    decode_lease,
    decode_run,
    decode_step,
    encode_event,
    encode_intent,
    encode_run,
    encode_step,
    missing_run,
    storable,
)
from planrail.store.base import (
    MAX_SQL_INT,
    Event,
    Intent,
    Lease,
    RunExistsError,
    RunRecord,
    StepRecord,
    StoreBase,
    check_events,
    check_lease_args,
    check_list_args,
    with_seqs,
)


def _upsert(table: str, columns: tuple[str, ...], key: tuple[str, ...], p: str) -> str:
    updates = ", ".join(f"{c} = excluded.{c}" for c in columns if c not in key)
    return (
        f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join([p] * len(columns))}) "
        f"ON CONFLICT ({', '.join(key)}) DO UPDATE SET {updates}"
    )


class Statements:
    """Every statement the backends run, for the placeholder ``p`` (``?`` or ``%s``)."""

    def __init__(self, p: str) -> None:
        runs = ", ".join(RUN_COLUMNS)
        self.insert_run = (
            f"INSERT INTO runs ({runs}) VALUES ({', '.join([p] * len(RUN_COLUMNS))}) "
            "ON CONFLICT (run_id) DO NOTHING"
        )
        self.upsert_run = _upsert("runs", RUN_COLUMNS, ("run_id",), p)
        self.get_run = f"SELECT {runs} FROM runs WHERE run_id = {p}"
        self.run_exists = f"SELECT 1 FROM runs WHERE run_id = {p}"
        self.set_schema_version = f"INSERT INTO schema_version (version) VALUES ({p})"
        self.list_runs = f"SELECT {runs} FROM runs"
        self.list_runs_by_status = f"SELECT {runs} FROM runs WHERE status = {p}"
        self.list_order = " ORDER BY created_at DESC, run_id DESC"
        self.limit = f" LIMIT {p}"
        self.upsert_step = _upsert("steps", STEP_COLUMNS, ("run_id", "step_id"), p)
        self.get_steps = (
            f"SELECT {', '.join(STEP_COLUMNS)} FROM steps WHERE run_id = {p} ORDER BY step_id"
        )
        self.add_run_seqs = (
            f"INSERT INTO run_seqs (run_id) VALUES ({p}) ON CONFLICT (run_id) DO NOTHING"
        )
        self.take_seqs = (
            f"UPDATE run_seqs SET last_seq = last_seq + {p} WHERE run_id = {p} RETURNING last_seq"
        )
        self.insert_event = (
            f"INSERT INTO events ({', '.join(EVENT_COLUMNS)}) "
            f"VALUES ({', '.join([p] * len(EVENT_COLUMNS))})"
        )
        self.get_events = (
            f"SELECT {', '.join(EVENT_COLUMNS)} FROM events "
            f"WHERE run_id = {p} AND seq > {p} ORDER BY seq"
        )
        # The no-op update makes RETURNING hand back the hash already recorded, if any.
        self.record_intent = (
            f"INSERT INTO intents ({', '.join(INTENT_COLUMNS)}) "
            f"VALUES ({', '.join([p] * len(INTENT_COLUMNS))}) "
            "ON CONFLICT (run_id, idempotency_key) DO UPDATE SET args_hash = intents.args_hash "
            "RETURNING args_hash"
        )
        self.get_intents = (
            f"SELECT {', '.join(INTENT_COLUMNS)} FROM intents "
            f"WHERE run_id = {p} ORDER BY idempotency_key"
        )
        self.acquire_lease = (
            f"INSERT INTO leases ({', '.join(LEASE_COLUMNS)}) VALUES ({p}, {p}, {p}) "
            "ON CONFLICT (run_id) DO UPDATE "
            "SET owner = excluded.owner, expires_at = excluded.expires_at "
            f"WHERE leases.owner = excluded.owner OR leases.expires_at <= {p} "
            "RETURNING owner"
        )
        self.renew_lease = (
            f"UPDATE leases SET expires_at = {p} "
            f"WHERE run_id = {p} AND owner = {p} AND expires_at > {p}"
        )
        self.release_lease = f"DELETE FROM leases WHERE run_id = {p} AND owner = {p}"
        self.get_lease = f"SELECT {', '.join(LEASE_COLUMNS)} FROM leases WHERE run_id = {p}"


def schema_v1(json_type: str, float_type: str, bool_type: str) -> tuple[str, ...]:
    """The first schema, written once for both backends' column types."""
    j, f = json_type, float_type
    return (
        f"""CREATE TABLE runs (
            run_id TEXT PRIMARY KEY,
            plan {j} NOT NULL,
            plan_hash TEXT NOT NULL,
            status TEXT NOT NULL,
            created_at {f} NOT NULL,
            updated_at {f} NOT NULL,
            output {j} NOT NULL,
            approval {j} NOT NULL,
            error {j} NOT NULL,
            metadata {j} NOT NULL,
            last_seq BIGINT NOT NULL DEFAULT 0
        )""",
        "CREATE INDEX runs_by_created ON runs (created_at, run_id)",
        "CREATE INDEX runs_by_status ON runs (status, created_at, run_id)",
        f"""CREATE TABLE steps (
            run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
            step_id TEXT NOT NULL,
            status TEXT NOT NULL,
            attempts INTEGER NOT NULL,
            idempotency_key TEXT NOT NULL,
            args {j} NOT NULL,
            args_hash TEXT,
            output {j} NOT NULL,
            error {j} NOT NULL,
            reason TEXT,
            started_at {f},
            finished_at {f},
            degraded {bool_type} NOT NULL,
            attempt_history {j} NOT NULL,
            metadata {j} NOT NULL,
            PRIMARY KEY (run_id, step_id)
        )""",
        f"""CREATE TABLE events (
            run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
            seq BIGINT NOT NULL,
            type TEXT NOT NULL,
            at {f} NOT NULL,
            step_id TEXT,
            attempt INTEGER,
            data {j} NOT NULL,
            PRIMARY KEY (run_id, seq)
        )""",
        """CREATE TABLE intents (
            run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
            step_key TEXT NOT NULL,
            idempotency_key TEXT NOT NULL,
            args_hash TEXT NOT NULL,
            PRIMARY KEY (run_id, idempotency_key)
        )""",
        f"""CREATE TABLE leases (
            run_id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            expires_at {f} NOT NULL
        )""",
    )


def schema_v2() -> tuple[str, ...]:
    """Each run's event counter in a table of its own (``run_seqs``), out of the ``runs`` row.

    Every commit with events takes seqs by updating the counter, and SQLite rewrites a whole
    row to update one column: in ``runs`` that is the plan too, so a commit cost CPU time in
    proportion to the plan's size (~50 µs of each commit's ~140 on a 1,000-step chain, in
    cProfile; more as the plan grows). The same statements for both backends."""
    return (
        """CREATE TABLE run_seqs (
            run_id TEXT PRIMARY KEY REFERENCES runs (run_id) ON DELETE CASCADE,
            last_seq BIGINT NOT NULL DEFAULT 0
        )""",
        "INSERT INTO run_seqs (run_id, last_seq) SELECT run_id, last_seq FROM runs",
        "ALTER TABLE runs DROP COLUMN last_seq",
    )


MigrationList = Sequence[tuple[int, Sequence[str]]]
"""``(version, statements)`` in order: what brings a schema to each version."""

TABLES = ("runs", "steps", "events", "intents", "leases", "run_seqs")
"""planrail's tables, besides ``schema_version``."""


def foreign_tables(where: str, found: Sequence[str]) -> StoreError:
    """The error for a database without planrail's schema whose tables ``found`` have the names
    of planrail's: another program's, which creating the schema would fail on (or, worse,
    share)."""
    return StoreError(
        f"{where} is not a planrail store: it holds tables of another program with the names"
        f" planrail uses ({', '.join(sorted(found))}) and no planrail schema version; nothing"
        " was changed in it (--store or PLANRAIL_STORE names another store)"
    )


def reserve_seqs(run_ids: Sequence[str], take: Callable[[str, int], Any]) -> list[int]:
    """The seqs of events for ``run_ids`` (in order), given ``take(run_id, n)``.

    ``take`` reserves the run's next ``n`` seqs and returns the row holding the last one, or None
    when the run does not exist.
    """
    next_seq: dict[str, int] = {}
    for run_id, count in Counter(run_ids).items():
        row = take(run_id, count)
        if row is None:
            raise missing_run(run_id)
        next_seq[run_id] = int(row[0]) - count + 1
    seqs = []
    for run_id in run_ids:
        seqs.append(next_seq[run_id])
        next_seq[run_id] += 1
    return seqs


class SQLStoreBase(StoreBase):
    """What the SQL backends share: queries whose text differs only in parameter style.

    A backend sets ``_sql`` (its :class:`Statements`), ``_conn`` and ``_lock``, and provides
    ``_write(what)`` (a context manager yielding a connection inside one transaction),
    ``_query(sql, params)`` (the rows of one read; :meth:`_read` calls it) and, where the
    connection cannot ``executemany``, ``_cursor(conn)``.
    """

    _sql: Statements
    _conn: Any
    _lock: Any

    def _write(self, what: str) -> Any:
        raise NotImplementedError

    def _cursor(self, conn: Any) -> Any:
        """Something with ``execute``/``executemany`` inside the transaction, as a context."""
        return contextlib.nullcontext(conn)

    def _query(self, sql: str, params: Sequence[Any]) -> list[Any]:
        raise NotImplementedError

    def _schema_version(self) -> int:
        """The store's schema version (0: none yet)."""
        raise NotImplementedError

    def _tables_like_ours(self, conn: Any) -> list[str]:
        """The tables of the database (or schema) named as one of planrail's :data:`TABLES`."""
        raise NotImplementedError

    def _migrate_in(self, conn: Any, where: str, migrations: MigrationList) -> None:
        """Bring the schema to the last of ``migrations``, inside the migration's transaction
        ``conn``: a newer schema than this planrail knows, or another program's tables with
        planrail's names and no schema version, are refused with nothing changed."""
        latest = migrations[-1][0]
        conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        current = self._schema_version()
        if current > latest:
            raise StoreError(
                f"{where} uses store schema version {current}, but this planrail only "
                f"knows versions up to {latest}: upgrade planrail to open it"
            )
        if current == 0:
            found = self._tables_like_ours(conn)
            if found:
                raise foreign_tables(where, found)
        for version, statements in migrations:
            if version > current:
                for statement in statements:
                    conn.execute(statement)
        conn.execute("DELETE FROM schema_version")
        conn.execute(self._sql.set_schema_version, (latest,))

    def _read(self, sql: str, params: Sequence[Any]) -> list[Any]:
        """The rows of a read. A key no text column can hold — one that is not Unicode text
        (a run id from undecodable command-line bytes), or holds NUL — matches nothing:
        nothing holding one can have been written, and the driver would raise on encoding it."""
        if not storable(params):
            return []
        return self._query(sql, params)

    def create_run(self, run: RunRecord) -> None:
        row = encode_run(run)
        with self._write("creating a run") as conn:
            if conn.execute(self._sql.insert_run, row).rowcount == 0:
                raise RunExistsError(f"run {run.run_id!r} already exists", run_id=run.run_id)
            conn.execute(self._sql.add_run_seqs, (run.run_id,))

    def get_run(self, run_id: str) -> RunRecord | None:
        rows = self._read(self._sql.get_run, (run_id,))
        return decode_run(rows[0]) if rows else None

    def list_runs(self, status: str | None = None, limit: int | None = None) -> list[RunRecord]:
        limit = check_list_args(status, limit)
        q = self._sql
        sql, params = (q.list_runs, ()) if status is None else (q.list_runs_by_status, (status,))
        sql += q.list_order
        if limit is not None:
            sql, params = sql + q.limit, (*params, limit)
        return [decode_run(r) for r in self._read(sql, params)]

    def commit(
        self,
        *,
        run: RunRecord | None = None,
        steps: Sequence[StepRecord] = (),
        events: Sequence[Event] = (),
        intents: Sequence[Intent] = (),
    ) -> list[Event]:
        check_events(events)
        q = self._sql
        run_row = None if run is None else encode_run(run)
        step_rows = [encode_step(s) for s in steps]
        event_rows = [encode_event(e) for e in events]
        for intent in intents:  # refused here, before the transaction, as every row is
            encode_intent(intent)
        with self._write("committing") as conn:
            if run_row is not None:
                conn.execute(q.upsert_run, run_row)
                conn.execute(q.add_run_seqs, (run_row[0],))  # a run new to the store
            for run_id in {r[0] for r in step_rows} | {i.run_id for i in intents}:
                known = run_row is not None and run_id == run_row[0]
                if not known and conn.execute(q.run_exists, (run_id,)).fetchone() is None:
                    raise missing_run(run_id)
            with self._cursor(conn) as cur:
                if step_rows:
                    cur.executemany(q.upsert_step, step_rows)
                if intents:
                    self._record_intents(cur, intents)
                seqs = reserve_seqs(
                    [r[0] for r in event_rows],
                    lambda run_id, n: cur.execute(q.take_seqs, (n, run_id)).fetchone(),
                )
                if event_rows:
                    cur.executemany(
                        q.insert_event,
                        [(r[0], s, *r[2:]) for r, s in zip(event_rows, seqs, strict=True)],
                    )
        return with_seqs(events, seqs)

    def _record_intents(self, cur: Any, intents: Sequence[Intent]) -> None:
        """Record ``intents`` inside the commit's transaction; a known key with another hash is
        a conflict (raised: the whole commit rolls back). One atomic statement per intent."""
        for intent in intents:
            row = cur.execute(self._sql.record_intent, encode_intent(intent)).fetchone()
            if row is not None and row[0] != intent.args_hash:
                raise conflict(intent, row[0])

    def get_steps(self, run_id: str) -> dict[str, StepRecord]:
        return {r[1]: decode_step(r) for r in self._read(self._sql.get_steps, (run_id,))}

    def events(self, run_id: str, after_seq: int = 0) -> list[Event]:
        after = min(after_seq, MAX_SQL_INT)  # past it there is nothing, not a driver error
        return [decode_event(r) for r in self._read(self._sql.get_events, (run_id, after))]

    def intents(self, run_id: str) -> list[Intent]:
        return [decode_intent(r) for r in self._read(self._sql.get_intents, (run_id,))]

    def acquire_lease(self, run_id: str, owner: str, ttl: float, now: float) -> bool:
        check_lease_args(ttl)
        check_lease_text(run_id, owner)
        with self._write("acquiring a lease") as conn:
            params = (run_id, owner, now + ttl, now)
            return conn.execute(self._sql.acquire_lease, params).fetchone() is not None

    def renew_lease(self, run_id: str, owner: str, ttl: float, now: float) -> bool:
        check_lease_args(ttl)
        if not storable((run_id, owner)):
            return False  # no such lease can have been taken
        with self._write("renewing a lease") as conn:
            params = (now + ttl, run_id, owner, now)
            return bool(conn.execute(self._sql.renew_lease, params).rowcount == 1)

    def release_lease(self, run_id: str, owner: str) -> None:
        if not storable((run_id, owner)):
            return
        with self._write("releasing a lease") as conn:
            conn.execute(self._sql.release_lease, (run_id, owner))

    def get_lease(self, run_id: str) -> Lease | None:
        rows = self._read(self._sql.get_lease, (run_id,))
        return decode_lease(rows[0]) if rows else None

    def close(self) -> None:
        with self._lock:
            self._conn.close()
