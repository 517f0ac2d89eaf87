"""``open_store`` URLs, the public API of ``planrail.store``, and its records' own checks."""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import planrail.store
from planrail.errors import StoreError, StoreNotFoundError
from planrail.store import MemoryStore, RunRecord, SQLiteStore, StepRecord, open_store
from planrail.types import StepStatus


@pytest.mark.parametrize("url", ["sqlite:///sub/runs.db", "sub/runs.db", "runs.db"])
def test_create_false_refuses_a_missing_sqlite_file_and_makes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    """``create=False`` (what reads runs already made) says there is no store and creates
    neither the file nor its folder; an existing file opens as usual."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreNotFoundError, match="no store at") as caught:
        open_store(url, create=False)
    assert caught.value.code == "store_not_found"
    assert list(tmp_path.iterdir()) == []
    open_store(url).close()  # a run creates it
    with open_store(url, create=False) as store:
        assert isinstance(store, SQLiteStore)


def _tables(path: Path) -> list[str]:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return sorted(r[0] for r in conn.execute("SELECT name FROM sqlite_master"))


def _journal_mode(path: Path) -> str:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return str(conn.execute("PRAGMA journal_mode").fetchone()[0])


@pytest.mark.parametrize("tables", [["CREATE TABLE contacts (name TEXT)"], []])
def test_create_false_refuses_another_programs_database_and_changes_nothing(
    tmp_path: Path, tables: list[str]
) -> None:
    """A SQLite database without planrail's tables (another program's, or an empty one) is no
    store to read runs from: ``create=False`` says so, naming its tables, and neither writes
    planrail's schema into it nor switches it to WAL. A run (``create=True``) may use it."""
    path = tmp_path / "app.db"
    with contextlib.closing(sqlite3.connect(path)) as conn:
        for sql in tables:
            conn.execute(sql)
        conn.execute("PRAGMA user_version = 7")  # a header that is written, even with no table
        conn.commit()
    before = path.read_bytes()
    for opening in (
        lambda: open_store(str(path), create=False),
        lambda: SQLiteStore(path, create=False),
    ):
        with pytest.raises(StoreNotFoundError, match="not a planrail store") as caught:
            opening()
        assert ("contacts" in str(caught.value)) == bool(tables)
    assert path.read_bytes() == before
    assert _journal_mode(path) == "delete"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]
    open_store(str(path)).close()  # a run may share the file
    assert "schema_version" in _tables(path)
    with open_store(str(path), create=False) as store:
        assert store.list_runs() == []


def test_memory_url_opens_a_memory_store() -> None:
    """``memory://`` gives a fresh MemoryStore."""
    with open_store("memory://") as store:
        assert isinstance(store, MemoryStore)


@pytest.mark.parametrize(
    ("url", "relative_path"),
    [
        ("sqlite:///runs.db", "runs.db"),
        ("sqlite:///sub/dir/runs.db", "sub/dir/runs.db"),
        ("runs.db", "runs.db"),
        ("sub/runs.db", "sub/runs.db"),
    ],
)
def test_sqlite_urls_and_bare_paths_are_relative_to_the_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str, relative_path: str
) -> None:
    """``sqlite:///x`` and a bare path ``x`` open the SQLite file x in the working folder."""
    monkeypatch.chdir(tmp_path)
    with open_store(url) as store:
        assert isinstance(store, SQLiteStore)
    assert (tmp_path / relative_path).is_file()


def test_four_slashes_make_an_absolute_sqlite_path(tmp_path: Path) -> None:
    """``sqlite:////abs/path.db`` (as SQLAlchemy spells it) opens an absolute path."""
    with open_store(f"sqlite:///{tmp_path}/abs.db") as store:
        assert isinstance(store, SQLiteStore)
    assert (tmp_path / "abs.db").is_file()


def test_no_url_means_the_environment_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no argument, ``PLANRAIL_STORE`` names the store."""
    monkeypatch.setenv("PLANRAIL_STORE", f"sqlite:///{tmp_path}/env.db")
    with open_store() as store:
        assert isinstance(store, SQLiteStore)
    assert (tmp_path / "env.db").is_file()


@pytest.mark.parametrize("env", [None, ""])
def test_no_url_and_no_variable_means_a_file_under_dot_planrail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: str | None
) -> None:
    """The default store is ``.planrail/planrail.db`` in the working folder, folder created."""
    monkeypatch.chdir(tmp_path)
    if env is None:
        monkeypatch.delenv("PLANRAIL_STORE", raising=False)
    else:
        monkeypatch.setenv("PLANRAIL_STORE", env)
    with open_store(None) as store:
        assert isinstance(store, SQLiteStore)
    assert (tmp_path / ".planrail" / "planrail.db").is_file()


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("mysql://db/runs", "unknown store URL scheme 'mysql'"),
        ("redis://localhost", "postgresql://"),
        ("sqlite://", "needs a path"),
        ("sqlite:///", "needs a path"),
        ("memory://somewhere", "takes no path"),
        ("  ", "empty"),
    ],
)
def test_bad_urls_are_store_errors_that_list_the_accepted_forms(url: str, message: str) -> None:
    """A URL planrail cannot open is a StoreError that says what it accepts."""
    with pytest.raises(StoreError, match=message):
        open_store(url)


@pytest.mark.postgres
@pytest.mark.parametrize("scheme", ["postgresql", "postgres"])
def test_postgres_urls_open_a_postgres_store(pg_url: str, scheme: str) -> None:
    """``postgresql://`` and ``postgres://`` URLs open a PostgresStore."""
    from planrail.store.postgres import PostgresStore

    url = scheme + pg_url[pg_url.index("://") :]
    with open_store(url) as store:
        assert isinstance(store, PostgresStore)


@pytest.mark.parametrize(
    "url",
    ["postgres:/alice@db.internal/runs", "postgresql:db/runs", "sqlite:/runs.db", "SQLite:x.db"],
)
def test_a_store_url_missing_its_slashes_is_refused_not_made_a_local_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    """``postgres:/host/db`` (one slash) is a typo of a URL, not a bare path: it is refused,
    saying so, and nothing is created; before, a run went to a new SQLite file in a folder
    named ``postgres:`` while its user thought it was in PostgreSQL. ``./NAME`` is the path."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreError, match="store URL without its '//'") as caught:
        open_store(url)
    assert f"./{url}" in str(caught.value)
    assert list(tmp_path.iterdir()) == []


def test_a_sqlite_url_with_query_parameters_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``sqlite:///runs.db?mode=ro`` reads no option: refused, rather than a store in a file
    named ``runs.db?mode=ro``. A bare path may still hold a '?'."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreError, match="takes no query parameters"):
        open_store("sqlite:///runs.db?mode=ro")
    assert list(tmp_path.iterdir()) == []
    open_store("odd?name.db").close()
    assert (tmp_path / "odd?name.db").is_file()


def test_importing_the_store_never_imports_psycopg() -> None:
    """``import planrail.store`` works without psycopg: it is loaded only for PostgreSQL."""
    code = "import sys, planrail.store; sys.exit('psycopg' in sys.modules)"
    src = str(Path(planrail.store.__file__).resolve().parents[2])
    result = subprocess.run(
        [sys.executable, "-c", code], env={"PYTHONPATH": src}, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_the_public_api_is_pinned() -> None:
    """``planrail.store.__all__`` is the curated public API; changing it is a decision."""
    assert sorted(planrail.store.__all__) == [
        "DEFAULT_STORE_URL",
        "Event",
        "IdempotencyConflictError",
        "Intent",
        "Lease",
        "MemoryStore",
        "PostgresStore",
        "RUN_STATUSES",
        "RunExistsError",
        "RunNotFoundError",
        "RunRecord",
        "SQLiteStore",
        "StepRecord",
        "Store",
        "open_store",
    ]
    for name in planrail.store.__all__:
        assert getattr(planrail.store, name) is not None


def test_a_run_status_outside_the_known_set_is_refused() -> None:
    """RunRecord accepts only the run statuses planrail defines."""
    with pytest.raises(ValueError, match="run status 'done'"):
        RunRecord(run_id="r", plan={}, plan_hash="h", status="done", created_at=0, updated_at=0)


def test_a_step_status_outside_step_status_is_refused() -> None:
    """StepRecord converts its status to StepStatus and refuses unknown values."""
    step = StepRecord(run_id="r", step_id="s", status="skipped", idempotency_key="r:s")  # type: ignore[arg-type]
    assert step.status is StepStatus.SKIPPED
    with pytest.raises(ValueError, match="'done'"):
        StepRecord(run_id="r", step_id="s", status="done", idempotency_key="r:s")  # type: ignore[arg-type]


def test_every_store_satisfies_the_protocol() -> None:
    """The backends are structurally ``Store``s (checked at runtime too)."""
    assert isinstance(MemoryStore(), planrail.store.Store)
    with SQLiteStore(":memory:") as store:
        assert isinstance(store, planrail.store.Store)
