"""PostgreSQL-only behaviour: concurrent runners, schema versions, missing extra, bad servers."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable

import pytest

from planrail.errors import StoreError
from planrail.store import Event, RunRecord

MakeRun = Callable[..., RunRecord]


@pytest.mark.postgres
def test_of_connections_racing_for_one_lease_exactly_one_wins(pg_url: str) -> None:
    """Several stores (one connection each) acquiring the same lease at once: exactly one wins."""
    from planrail.store.postgres import PostgresStore

    stores = [PostgresStore(pg_url) for _ in range(6)]
    barrier = threading.Barrier(len(stores))
    results: dict[int, bool] = {}

    def race(i: int) -> None:
        barrier.wait()
        results[i] = stores[i].acquire_lease("run-1", f"runner-{i}", 30.0, 100.0)

    threads = [threading.Thread(target=race, args=(i,)) for i in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert sorted(results.values()) == [False] * 5 + [True]
        winner = next(i for i, won in results.items() if won)
        lease = stores[0].get_lease("run-1")
        assert lease is not None
        assert lease.owner == f"runner-{winner}"
    finally:
        for s in stores:
            s.close()


@pytest.mark.postgres
def test_a_schema_newer_than_this_planrail_is_refused(pg_url: str) -> None:
    """A database written by a newer planrail is a clear StoreError asking for an upgrade."""
    import psycopg

    from planrail.store.postgres import PostgresStore

    PostgresStore(pg_url).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE schema_version SET version = 999")
    with pytest.raises(StoreError, match=r"schema version 999.*upgrade planrail"):
        PostgresStore(pg_url)


@pytest.mark.postgres
def test_reopening_keeps_data_and_migrates_nothing_twice(pg_url: str, make_run: MakeRun) -> None:
    """Opening an up-to-date schema again applies no migration and keeps every run."""
    import psycopg

    from planrail.store.postgres import SCHEMA_VERSION, PostgresStore

    with PostgresStore(pg_url) as store:
        store.create_run(make_run())
    for _ in range(3):
        with PostgresStore(pg_url) as store:
            assert store.get_run("run-1") == make_run()
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute("SELECT version FROM schema_version").fetchall()
    assert rows == [(SCHEMA_VERSION,)]


@pytest.mark.postgres
def test_json_columns_keep_the_text_as_written(pg_url: str, make_run: MakeRun) -> None:
    """JSON is stored in ``json`` columns, so key order survives (jsonb would sort the keys)."""
    import psycopg

    from planrail.store.postgres import PostgresStore

    with PostgresStore(pg_url) as store:
        store.create_run(make_run(output={"zeta": 1, "alpha": 2}))
    with psycopg.connect(pg_url) as conn:
        row = conn.execute("SELECT output::text, pg_typeof(output)::text FROM runs").fetchone()
    assert row == ('{"zeta":1,"alpha":2}', "json")


def test_an_unreachable_server_is_a_store_error_without_the_password() -> None:
    """A server that does not answer is a one-line StoreError that never shows the password."""
    pytest.importorskip("psycopg")
    from planrail.store.postgres import PostgresStore

    with pytest.raises(StoreError, match="PostgreSQL failed while connecting") as info:
        PostgresStore("postgresql://alice:s3cret@127.0.0.1:1/db", connect_timeout=1)
    assert "s3cret" not in str(info.value)
    assert "postgresql://alice@127.0.0.1:1/db" in str(info.value)


def test_without_psycopg_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """Opening PostgreSQL without psycopg is a one-line StoreError naming the extra to install."""
    from planrail.store import open_store

    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(StoreError, match=r"pip install 'planrail\[postgres\]'"):
        open_store("postgresql://postgres@127.0.0.1/test")


@pytest.mark.postgres
def test_a_version_1_schema_keeps_its_event_numbers(
    pg_url: str, make_run: MakeRun, make_event: Callable[..., Event]
) -> None:
    """A schema written before the event counter left the ``runs`` row (version 1, written
    by its own statements) migrates: each run's next seq follows its last, the column goes."""
    import psycopg

    from planrail.store import postgres as pg_module

    (version, statements), *_ = pg_module.MIGRATIONS
    assert version == 1
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)
        conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        conn.execute("INSERT INTO schema_version VALUES (1)")
        conn.execute(
            "INSERT INTO runs VALUES ('run-1', '{}', 'sha256:abc', 'running', 1000.0, 1000.0,"
            " 'null', 'null', 'null', '{}', 3)"
        )
        for seq in (1, 2, 3):
            conn.execute(
                "INSERT INTO events VALUES ('run-1', %s, 'step_started', 1.0, NULL, NULL, '{}')",
                (seq,),
            )
    store = pg_module.PostgresStore(pg_url)
    try:
        event = make_event(run_id="run-1")
        assert [e.seq for e in store.commit(events=[event, event])] == [4, 5]
        store.create_run(make_run("run-2"))
        assert [e.seq for e in store.commit(events=[make_event(run_id="run-2")])] == [1]
    finally:
        store.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert conn.execute("SELECT max(version) FROM schema_version").fetchone() == (
            pg_module.SCHEMA_VERSION,
        )
        columns = conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'runs'"
            " AND table_schema = current_schema()"
        ).fetchall()
        assert ("last_seq",) not in columns


@pytest.mark.postgres
def test_a_lock_held_by_an_open_transaction_is_waited_for_a_bounded_time(pg_url: str) -> None:
    """A session left open in a transaction holding a lease's row lock makes the store's next
    write fail, after ``lock_timeout``, with a StoreError saying what it waited for, as the
    SQLite store's busy timeout does; before, it waited for ever (PostgreSQL's default)."""
    import psycopg

    from planrail.store.postgres import PostgresStore

    with PostgresStore(pg_url) as first:
        assert first.acquire_lease("run-1", "a", ttl=10, now=0)
    with (
        psycopg.connect(pg_url) as other,  # not autocommit: its transaction stays open
        PostgresStore(pg_url, lock_timeout=0.2) as store,
    ):
        other.execute("UPDATE leases SET expires_at = 1 WHERE run_id = 'run-1'")
        with pytest.raises(StoreError, match=r"held a lock .* more than 0\.2s while acquiring"):
            store.acquire_lease("run-1", "b", ttl=10, now=100)
        other.rollback()
        assert store.acquire_lease("run-1", "b", ttl=10, now=100)  # the store goes on


@pytest.mark.postgres
def test_a_lock_timeout_given_in_the_url_is_kept(pg_url: str) -> None:
    """``options=-clock_timeout=...`` in the URL wins over the store's default bound."""
    from planrail.store.postgres import PostgresStore

    with PostgresStore(pg_url) as store:
        assert store._conn.execute("SHOW lock_timeout").fetchone() == ("30s",)
    url = pg_url.replace("options=", "options=-clock_timeout%3D7s%20", 1)
    assert url != pg_url  # the fixture's URL carries options
    with PostgresStore(url) as store:
        assert store._conn.execute("SHOW lock_timeout").fetchone() == ("7s",)


def test_a_url_libpq_refuses_is_named_without_its_password() -> None:
    """A URL libpq cannot parse (an unknown query parameter) is a StoreError naming where it
    points, without the password — not "PostgreSQL: PostgreSQL failed"."""
    pytest.importorskip("psycopg")
    from planrail.store.postgres import PostgresStore

    url = "postgresql://alice:s3cret@127.0.0.1:5432/runs?foo=bar"
    with pytest.raises(StoreError, match='invalid URI query parameter: "foo"') as caught:
        PostgresStore(url)
    assert str(caught.value).startswith("postgresql://alice@127.0.0.1:5432/runs: PostgreSQL")
    assert "s3cret" not in str(caught.value)


@pytest.mark.postgres
def test_another_programs_tables_named_as_planrails_are_refused_and_left_alone(
    pg_url: str,
) -> None:
    """A schema holding another program's ``runs`` table (and no planrail schema version) is
    not a store: a StoreError naming the table, nothing created; before, the migration failed
    with PostgreSQL's 'relation "runs" already exists'."""
    import psycopg

    from planrail.store.postgres import PostgresStore

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE runs (x INTEGER)")
    with pytest.raises(StoreError, match=r"not a planrail store.*\(runs\)"):
        PostgresStore(pg_url)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        tables = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
        ).fetchall()
    assert tables == [("runs",)]


@pytest.mark.postgres
def test_create_false_refuses_a_schema_without_a_store_and_creates_nothing(pg_url: str) -> None:
    """``open_store(url, create=False)`` — what ``planrail runs``/``show``/``resolve`` use —
    on a schema without planrail's tables is a StoreNotFoundError naming the schema, and no
    table is created; before, a read wrote planrail's tables into whatever database the URL
    named. Once a run created the store, it opens."""
    import psycopg

    from planrail.errors import StoreNotFoundError
    from planrail.store import open_store
    from planrail.store.postgres import PostgresStore

    with pytest.raises(StoreNotFoundError, match=r"no store at .* in schema 'planrail_test_"):
        open_store(pg_url, create=False)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        tables = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
        ).fetchall()
    assert tables == []
    open_store(pg_url).close()  # a run creates it
    with open_store(pg_url, create=False) as store:
        assert isinstance(store, PostgresStore)
        assert store.list_runs() == []
