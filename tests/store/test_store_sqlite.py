"""SQLite-only behaviour: several processes, damaged files, schema versions and migrations."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

import planrail
from planrail.errors import StoreCorruptError, StoreError, StoreNotFoundError
from planrail.store import Event, RunRecord, SQLiteStore
from planrail.store import sqlite as sqlite_module

MakeRun = Callable[..., RunRecord]
MakeEvent = Callable[..., Event]

_SRC = str(Path(planrail.__file__).resolve().parents[1])


def run_processes(code: str, args: list[list[str]]) -> list[str]:
    """Run ``code`` in one process per ``args`` entry, released together; return their outputs.

    Each process prints ``ready`` once set up and waits for a line on stdin, so all of them do
    their real work at the same moment.
    """
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([_SRC, os.environ.get("PYTHONPATH", "")])}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, *a],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for a in args
    ]
    try:
        for p in procs:
            assert p.stdout is not None
            line = p.stdout.readline()
            assert line == "ready\n", p.stderr.read() if p.stderr else line
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        outputs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    for p, (_, err) in zip(procs, outputs, strict=True):
        assert p.returncode == 0, err
    return [out for out, _ in outputs]


LEASE_WORKER = """
import sys
from planrail.store.sqlite import SQLiteStore
store = SQLiteStore(sys.argv[1])
print("ready", flush=True)
sys.stdin.readline()
print(store.acquire_lease("run-1", sys.argv[2], 30.0, 100.0), flush=True)
store.close()
"""


def test_of_processes_racing_for_one_lease_exactly_one_wins(tmp_path: Path) -> None:
    """Several processes acquiring the same lease at once (on a fresh file): exactly one gets it."""
    path = str(tmp_path / "race.db")
    outputs = run_processes(LEASE_WORKER, [[path, f"runner-{i}"] for i in range(6)])
    assert sorted(o.strip() for o in outputs) == ["False"] * 5 + ["True"]
    with SQLiteStore(path) as store:
        lease = store.get_lease("run-1")
    assert lease is not None
    winner = [o.strip() for o in outputs].index("True")
    assert lease.owner == f"runner-{winner}"


EVENT_WORKER = """
import sys
from planrail.store import Event
from planrail.store.sqlite import SQLiteStore
store = SQLiteStore(sys.argv[1])
print("ready", flush=True)
sys.stdin.readline()
for i in range(40):
    store.commit(events=[Event(run_id="run-1", type=sys.argv[2], at=float(i), data={"i": i})])
store.close()
"""


def test_processes_appending_events_concurrently_get_distinct_gapless_seqs(
    tmp_path: Path, make_run: MakeRun
) -> None:
    """Concurrent commits from several processes never reuse or skip an event seq."""
    path = str(tmp_path / "events.db")
    with SQLiteStore(path) as store:
        store.create_run(make_run())
    run_processes(EVENT_WORKER, [[path, f"w{i}"] for i in range(4)])
    with SQLiteStore(path) as store:
        events = store.events("run-1")
    assert [e.seq for e in events] == list(range(1, 161))
    for writer in ("w0", "w1", "w2", "w3"):
        assert [e.data["i"] for e in events if e.type == writer] == list(range(40))


def make_store_file(path: Path, make_run: MakeRun, runs: int = 50) -> int:
    with SQLiteStore(path) as store:
        for i in range(runs):
            store.create_run(make_run(f"run-{i}", output={"blob": "x" * 2000}))
    return path.stat().st_size


def test_a_truncated_file_is_reported_as_corrupt(tmp_path: Path, make_run: MakeRun) -> None:
    """A file cut short is a StoreCorruptError naming the file, never an empty store."""
    path = tmp_path / "runs.db"
    size = make_store_file(path, make_run)
    with open(path, "r+b") as f:
        f.truncate(size // 2)
    with pytest.raises(StoreCorruptError, match=r"runs\.db is truncated") as info:
        SQLiteStore(path)
    assert str(path) in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"", "is empty"),
        (b"SQLite format 3\x00\x10\x00", "is truncated"),
        (b"\x8f\x00garbage" * 1000, "is not a SQLite database"),
        (b'{"runs": []}\n', "is not a SQLite database"),
    ],
    ids=["empty", "short-header", "garbage", "json"],
)
def test_a_file_that_is_not_a_whole_database_is_corrupt(
    tmp_path: Path, content: bytes, why: str
) -> None:
    """Empty, header-only, garbage or foreign files are refused with a one-line explanation."""
    path = tmp_path / "runs.db"
    path.write_bytes(content)
    with pytest.raises(StoreCorruptError, match=why):
        SQLiteStore(path)
    assert path.read_bytes() == content


def test_damaged_pages_inside_a_whole_file_are_reported_as_corrupt(
    tmp_path: Path, make_run: MakeRun
) -> None:
    """Garbage over the file's inner pages is a StoreCorruptError when the store reads them."""
    path = tmp_path / "runs.db"
    size = make_store_file(path, make_run)
    with open(path, "r+b") as f:
        f.seek(4096)
        f.write(b"\xde\xad\xbe\xef" * ((size - 4096) // 4))
    with pytest.raises(StoreCorruptError, match="damaged"), SQLiteStore(path) as store:
        store.list_runs()


def test_a_schema_newer_than_this_planrail_is_refused(tmp_path: Path) -> None:
    """A file written by a newer planrail is a clear StoreError asking for an upgrade."""
    path = tmp_path / "runs.db"
    SQLiteStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE schema_version SET version = 999")
    conn.close()
    with pytest.raises(StoreError, match=r"schema version 999.*upgrade planrail") as info:
        SQLiteStore(path)
    assert not isinstance(info.value, StoreCorruptError)


def schema_versions(path: Path) -> list[int]:
    conn = sqlite3.connect(path)
    try:
        return [row[0] for row in conn.execute("SELECT version FROM schema_version")]
    finally:
        conn.close()


def test_reopening_keeps_data_and_migrates_nothing_twice(tmp_path: Path, make_run: MakeRun) -> None:
    """Opening an up-to-date file again applies no migration and keeps every run."""
    path = tmp_path / "runs.db"
    with SQLiteStore(path) as store:
        store.create_run(make_run())
    for _ in range(3):
        with SQLiteStore(path) as store:
            assert store.get_run("run-1") == make_run()
    assert schema_versions(path) == [sqlite_module.SCHEMA_VERSION]


def test_pending_migrations_are_applied_in_order_on_open(
    tmp_path: Path, make_run: MakeRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An older file gets exactly the later migrations, in order, and keeps its data."""
    path = tmp_path / "runs.db"
    with SQLiteStore(path) as store:
        store.create_run(make_run())
    now = sqlite_module.SCHEMA_VERSION
    migrations = (
        *sqlite_module.MIGRATIONS,
        (now + 1, ("CREATE TABLE extra (n INTEGER)", f"INSERT INTO extra VALUES ({now + 1})")),
        (now + 2, (f"INSERT INTO extra VALUES ({now + 2})",)),
    )
    monkeypatch.setattr(sqlite_module, "MIGRATIONS", migrations)
    monkeypatch.setattr(sqlite_module, "SCHEMA_VERSION", now + 2)
    for _ in range(2):
        with SQLiteStore(path) as store:
            assert store.get_run("run-1") == make_run()
    assert schema_versions(path) == [now + 2]
    conn = sqlite3.connect(path)
    try:
        assert [row[0] for row in conn.execute("SELECT n FROM extra")] == [now + 1, now + 2]
    finally:
        conn.close()


def test_the_file_uses_wal_and_its_folder_is_created(tmp_path: Path) -> None:
    """A new store file appears in a new folder, in WAL mode, and leaves no temporary files."""
    path = tmp_path / "a" / "b" / "runs.db"
    SQLiteStore(path).close()
    assert sorted(p.name for p in path.parent.iterdir()) == ["runs.db"]
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        conn.close()


def test_an_in_memory_database_works(make_run: MakeRun) -> None:
    """``:memory:`` gives a private SQLite database, useful for fast tests of SQL behaviour."""
    with SQLiteStore(":memory:", durable=False) as store:
        store.create_run(make_run())
        assert store.get_run("run-1") == make_run()


def test_a_directory_is_not_a_store(tmp_path: Path) -> None:
    """Pointing the store at a folder is a StoreError that says so."""
    with pytest.raises(StoreError, match="is a directory"):
        SQLiteStore(tmp_path)


def test_commits_of_a_run_are_not_checkpointed_until_the_wal_is_large(
    tmp_path: Path, make_run: MakeRun
) -> None:
    """A run's commits stay in the WAL well past SQLite's default 1,000 pages (no checkpoint
    lands inside a run of a thousand steps), and closing the store checkpoints them all."""
    path = tmp_path / "runs.db"
    store = SQLiteStore(path)
    store.create_run(make_run())
    conn = store._conn
    assert conn.execute("PRAGMA wal_autocheckpoint").fetchone() == (sqlite_module._WAL_PAGES,)
    checkpointed = os.stat(path).st_mtime_ns, os.path.getsize(path)
    page = conn.execute("PRAGMA page_size").fetchone()[0]
    n = 800  # each commit writes the run's row, two pages or more: beyond 1,000 pages
    for i in range(n):
        store.commit(run=make_run(output={"n": i, "pad": "x" * page}))
    assert os.path.getsize(f"{path}-wal") > 1_500 * page
    assert (os.stat(path).st_mtime_ns, os.path.getsize(path)) == checkpointed
    store.close()
    assert not os.path.exists(f"{path}-wal")  # the last connection checkpointed everything
    with SQLiteStore(path) as again:
        run = again.get_run("run-1")
        assert run is not None
        assert run.output["n"] == n - 1


def test_a_version_1_file_keeps_its_event_numbers(
    tmp_path: Path, make_run: MakeRun, make_event: MakeEvent
) -> None:
    """A file written before the event counter left the ``runs`` row (version 1, written here
    by its own statements, as that planrail wrote it) migrates: its runs and events are kept,
    each run's next seq follows its last (none reused), and the old column is gone."""
    path = tmp_path / "runs.db"
    (version, statements), *_ = sqlite_module.MIGRATIONS
    assert version == 1
    conn = sqlite3.connect(path)
    try:
        for statement in statements:
            conn.execute(statement)
        conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        conn.execute("INSERT INTO schema_version VALUES (1)")
        for run_id, last in (("run-1", 3), ("run-2", 0)):
            conn.execute(
                "INSERT INTO runs VALUES (?, ?, 'sha256:abc', 'running', 1000.0, 1000.0,"
                " 'null', 'null', 'null', '{}', ?)",
                (run_id, json.dumps(make_run().plan), last),
            )
        conn.executemany(
            "INSERT INTO events VALUES ('run-1', ?, 'step_started', 1.0, NULL, NULL, '{}')",
            [(1,), (2,), (3,)],
        )
        conn.commit()
    finally:
        conn.close()
    assert schema_versions(path) == [1]
    with SQLiteStore(path) as store:
        assert store.get_run("run-1") == make_run()
        assert [e.seq for e in store.commit(events=[make_event(run_id="run-1")] * 2)] == [4, 5]
        assert [e.seq for e in store.commit(events=[make_event(run_id="run-2")])] == [1]
        store.create_run(make_run("run-3"))
        assert [e.seq for e in store.commit(events=[make_event(run_id="run-3")])] == [1]
        assert [e.seq for e in store.events("run-1")] == [1, 2, 3, 4, 5]
    assert schema_versions(path) == [sqlite_module.SCHEMA_VERSION]
    conn = sqlite3.connect(path)
    try:
        assert "last_seq" not in {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
    finally:
        conn.close()


def test_committing_events_does_not_write_the_run_row(
    tmp_path: Path, make_run: MakeRun, make_event: MakeEvent
) -> None:
    """Numbering a commit's events writes a counter of its own, not the ``runs`` row that
    holds the plan: SQLite rewrites a whole row to change one column, so a commit would cost
    in proportion to the plan's size. A trigger counts the writes of ``runs``."""
    path = tmp_path / "runs.db"
    big = make_run(plan={"goal": "big", "steps": [{"id": f"s{i}"} for i in range(5000)]})
    with SQLiteStore(path) as store:
        store.create_run(big)
        conn = sqlite3.connect(path)
        try:
            conn.execute("CREATE TABLE run_writes (n INTEGER)")
            conn.execute(
                "CREATE TRIGGER count_run_writes AFTER UPDATE ON runs"
                " BEGIN INSERT INTO run_writes VALUES (1); END"
            )
            conn.commit()
        finally:
            conn.close()
        for _ in range(3):
            store.commit(events=[make_event(run_id="run-1")] * 2)
        assert [e.seq for e in store.events("run-1")] == [1, 2, 3, 4, 5, 6]
        store.commit(
            run=dataclasses.replace(big, status="succeeded"),
            events=[make_event(run_id="run-1")],
        )
        run = store.get_run("run-1")
        assert run is not None
        assert run.status == "succeeded"
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("SELECT count(*) FROM run_writes").fetchone() == (1,)
    finally:
        conn.close()


def test_three_slashes_are_a_relative_path_and_four_an_absolute_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``sqlite:///tmp/x.db`` is ``./tmp/x.db`` (docs/durability.md), ``sqlite:////abs`` is
    ``/abs``: the URL convention, which surprises a reader expecting ``/tmp``."""
    from planrail.store import open_store

    monkeypatch.chdir(tmp_path)
    open_store("sqlite:///tmp/x.db").close()
    assert (tmp_path / "tmp" / "x.db").is_file()
    absolute = tmp_path / "abs" / "y.db"
    open_store(f"sqlite:///{absolute}").close()  # the path's own "/" makes the fourth
    assert absolute.is_file()


def test_another_programs_tables_named_as_planrails_are_refused_and_left_alone(
    tmp_path: Path,
) -> None:
    """A database of another program holding a ``runs`` table (and no planrail schema version)
    is not a store: a clear StoreError naming the tables, and the file is left byte for byte as
    it was (no ``schema_version``, journal mode unchanged); before, the migration failed with
    SQLite's "table runs already exists"."""
    path = tmp_path / "app.db"
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE runs (x INTEGER)")
        conn.execute("CREATE TABLE leases (y TEXT)")
        conn.commit()
    before = path.read_bytes()
    with pytest.raises(StoreError, match=r"not a planrail store.*\(leases, runs\)") as caught:
        SQLiteStore(path)
    assert caught.value.code == "store_error"
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]


def test_a_read_only_store_says_so(make_run: MakeRun) -> None:
    """A store this process may not write (a read-only file, or a folder where SQLite cannot
    make the ``-wal`` and ``-shm`` files) is a StoreError saying what needs write access, not
    SQLite's bare "attempt to write a readonly database"."""
    if os.getuid() != 0:
        pytest.skip("needs root, to drop to another user (a file's mode does not stop root)")
    code = """if True:
        import os, sys
        from planrail.store import SQLiteStore, RunRecord
        os.setgid(65534)
        os.setuid(65534)
        try:
            SQLiteStore(sys.argv[1]).create_run(RunRecord(
                run_id="r", plan={}, plan_hash="h", status="running", created_at=0, updated_at=0
            ))
        except Exception as exc:
            print(type(exc).__name__, exc)
    """
    with tempfile.TemporaryDirectory(prefix="planrail-store-ro-") as where:
        folder = Path(where) / "ro"
        folder.mkdir()
        path = folder / "runs.db"
        SQLiteStore(path).close()
        os.chmod(where, 0o755)
        said = []
        for file_mode, folder_mode in ((0o444, 0o777), (0o666, 0o555), (0o444, 0o555)):
            os.chmod(path, file_mode)
            os.chmod(folder, folder_mode)
            run = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True)
            said.append(run.stdout.decode() + run.stderr.decode())
        os.chmod(folder, 0o755)
    for out in said:
        assert out.startswith("StoreError "), out
        assert "read-only to this process" in out, out
        assert "write permission on the file and its folder" in out, out


def test_a_file_uri_is_checked_and_created_as_a_path_is(tmp_path: Path) -> None:
    """A ``file:`` URI names a file like a path does: a 0-byte file is damaged (not an empty
    store that planrail's schema is written into), ``create=False`` creates nothing; before,
    a URI skipped both checks. In-memory URIs still open."""
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    with pytest.raises(StoreCorruptError, match="is empty"):
        SQLiteStore(f"file:{empty}")
    assert empty.read_bytes() == b""
    with pytest.raises(StoreNotFoundError, match="no store at file:"):
        SQLiteStore(f"file:{tmp_path / 'missing.db'}?mode=rw", create=False)
    assert not (tmp_path / "missing.db").exists()
    with SQLiteStore(f"file://{tmp_path / 'made.db'}") as store:
        assert store.list_runs() == []
    with SQLiteStore(f"file:{tmp_path / 'made.db'}?mode=ro", create=False) as store:
        assert store.list_runs() == []
    for memory in ("file::memory:", "file:x?mode=memory&cache=shared"):
        with SQLiteStore(memory) as store:
            assert store.list_runs() == []
    assert {p.name for p in tmp_path.iterdir()} <= {
        "empty.db",
        "made.db",
        "made.db-wal",
        "made.db-shm",
    }
