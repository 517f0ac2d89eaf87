"""One runner at a time, by :class:`planrail.engine.lease.RunLease` alone (no run), on the
in-memory store and a fake clock advanced by hand; ``test_leases.py`` and ``test_takeover.py``
pin the same through whole runs and processes."""

from __future__ import annotations

import pytest

from planrail.engine.lease import LeaseLostError, RunBusyError, RunLease
from planrail.store import MemoryStore
from planrail.testing import FakeClock

TTL = 30.0


def test_a_second_runner_is_refused_until_the_first_releases() -> None:
    store, clock = MemoryStore(), FakeClock()
    first = RunLease(store, "r", clock, TTL, owner="one")
    second = RunLease(store, "r", clock, TTL, owner="two")
    first.acquire()
    with pytest.raises(RunBusyError, match=r"run 'r' is being run by .* 30s more"):
        second.acquire()
    first.release()
    first.release()  # once: a second release gives back nothing it does not hold
    second.acquire()
    lease = store.get_lease("r")
    assert lease is not None
    assert lease.owner == "two"


async def test_a_write_after_the_lease_may_have_expired_is_refused() -> None:
    """The check before each write compares the runner's own clock with when its lease ends:
    past it, another runner may own the run."""
    store, clock = MemoryStore(), FakeClock()
    lease = RunLease(store, "r", clock, TTL, owner="one")
    with pytest.raises(LeaseLostError):
        lease.check()  # never acquired
    lease.acquire()
    await clock.advance(TTL - 1)
    lease.check()
    lease.renew()
    await clock.advance(TTL - 1)
    lease.check()  # renewed: it ends TTL after the renewal
    await clock.advance(1)
    with pytest.raises(LeaseLostError, match="expired before it could be renewed"):
        lease.check()


async def test_a_lease_another_runner_took_cannot_be_renewed() -> None:
    store, clock = MemoryStore(), FakeClock()
    first = RunLease(store, "r", clock, TTL, owner="one")
    first.acquire()
    await clock.advance(TTL + 1)  # expired: another runner may take it
    RunLease(store, "r", clock, TTL, owner="two").acquire()
    with pytest.raises(LeaseLostError, match="lost the lease on run 'r'"):
        first.renew()
    first.release()  # no longer held: the other runner's row stays
    lease = store.get_lease("r")
    assert lease is not None
    assert lease.owner == "two"
