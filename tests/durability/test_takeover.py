"""Instant takeover of a dead runner's lease on the same host, with real processes.

A lease records its owner's host, pid, process start time and PID namespace
(:mod:`planrail.engine.owners`). A runner on the same host that finds the owner process gone
takes the run over at once instead of waiting out the lease; a live owner, or one on another
host, still holds it (and ``RunBusyError`` names it)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from planrail.engine.executor import Execution
from planrail.engine.lease import RunBusyError
from planrail.engine.owners import Owner, owner_gone, this_owner
from planrail.store import SQLiteStore
from planrail.testing import FakeClock

from .helpers import WALL, Ledger, make_plan, make_tools


def _dead_owner() -> str:
    """The owner string a process on this host had, after that process exited (a real one)."""
    code = "from planrail.engine.owners import this_owner; print(this_owner())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_an_exited_process_on_this_host_is_gone_a_live_one_is_not() -> None:
    """The owner of a process that exited is gone; this process, a live child, an owner on
    another host and an old-style owner without a start time are not judged gone."""
    assert owner_gone(_dead_owner())
    assert not owner_gone(this_owner())
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:
        start = Owner.parse(this_owner())
        live = f"{socket.gethostname()}:{child.pid}:abcd:start=0:pidns={start.pidns}"
        # pid alive but a different start time: the pid was reused, the owner is gone
        assert owner_gone(live)
        assert child.pid != 0
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait()
    other = _dead_owner().replace(socket.gethostname(), "another-host", 1)
    assert not owner_gone(other)
    assert not owner_gone(f"{socket.gethostname()}:999999:abcd")


def _execution(store: SQLiteStore, tools: list, plan: object) -> Execution:
    return Execution(
        plan,  # type: ignore[arg-type]
        tools,
        store=store,
        run_id="take",
        clock=FakeClock(wall=WALL),
        lease_ttl=30.0,
        approve=True,
    )


async def test_a_dead_runners_unexpired_lease_is_taken_over_at_once(tmp_path: Path) -> None:
    """The run's lease is held for 30 more seconds by a runner process that has exited: a new
    runner takes it over at once (no lease wait) and completes the run."""
    store = SQLiteStore(tmp_path / "runs.db")
    ledger = Ledger()
    tools = make_tools(ledger)
    plan = make_plan(tools)
    assert store.acquire_lease("take", _dead_owner(), 30.0, WALL)

    result = await _execution(store, tools, plan).run()

    assert result.status == "succeeded"
    store.close()


async def test_a_live_owners_lease_is_refused_naming_it(tmp_path: Path) -> None:
    """A lease whose owner is alive (this very process, another execution) is not taken: the
    runner is refused at once, and the error names the holder's pid and host."""
    store = SQLiteStore(tmp_path / "runs.db")
    ledger = Ledger()
    tools = make_tools(ledger)
    plan = make_plan(tools)
    owner = this_owner()
    assert store.acquire_lease("take", owner, 30.0, WALL)

    with pytest.raises(RunBusyError) as caught:
        await _execution(store, tools, plan).run()

    assert f"pid {Owner.parse(owner).pid}" in caught.value.message
    assert ledger.calls == []
    store.close()
