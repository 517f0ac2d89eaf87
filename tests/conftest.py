"""Shared fixtures. PostgreSQL fixtures come from ``conftest_pg`` (see scripts/test-services.sh)."""

from __future__ import annotations

import asyncio
import inspect
import signal
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

pytest_plugins = ["conftest_pg"]

# Property tests judge behaviour, never speed: no per-example deadline (a loaded 2-core CI host
# made the default 200 ms fail examples that pass), and a failure prints the blob that replays
# it (`@reproduce_failure`), so a rare example is reproduced, not called a flake.
settings.register_profile(
    "planrail", deadline=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("planrail")


@pytest.fixture(scope="session", autouse=True)
def _sigint_handled() -> Iterator[None]:
    """A non-interactive shell starts its background jobs with SIGINT ignored, and every child
    inherits that: the runners the tests start could then never be interrupted, and Ray's
    raylet and workers (started from this process) could not be cancelled gracefully — Ray
    cancels a task with a KeyboardInterrupt. For the whole session SIGINT is back to Python's
    default handler, as in a terminal."""
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.fixture(autouse=True)
def _owned_event_loop(request: pytest.FixtureRequest) -> Iterator[None]:
    """Give each sync test an event loop that the test closes itself.

    looptime's pytest hook calls ``policy.get_event_loop()`` before every test, which creates a
    loop when none is set; a sync test that then calls ``asyncio.run`` (directly, or through the
    CLI) replaces that loop without closing it, and the garbage collector's ResourceWarning later
    fails an unrelated test under ``filterwarnings = error``. Async tests are left to
    pytest-asyncio.
    """
    if inspect.iscoroutinefunction(getattr(request.node, "function", None)):
        yield
        return
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    yield
    asyncio.set_event_loop(None)
    loop.close()


@pytest.fixture
def ipv6_loopback() -> None:
    """Skip the test where this machine cannot listen on ``::1`` (IPv6 disabled)."""
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
            sock.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback here")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of a new, empty durable store: a SQLite file, then a PostgreSQL schema of the
    test's own (skipped when no server answers). Each ``open_store(store_url)`` is a new store
    object over the same database, as a new runner process would open. A test module that
    defines its own ``store_url`` keeps it."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'runs.db'}"
    url: str = request.getfixturevalue("pg_url")
    return url
