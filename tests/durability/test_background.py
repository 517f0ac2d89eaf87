"""A durable run's two loops beside its steps (:mod:`planrail.engine.background`), on a fake
clock, with stand-ins for the lease and the checkpointer that record what they were asked: the
lease is renewed every third of its time to live until it cannot be, and the store is watched
until an operator asks to cancel.
``test_leases.py`` and ``seams/test_operator_actions.py`` pin the same through whole runs."""

from __future__ import annotations

from typing import Any

from planrail.engine.background import keep_lease, watch_requests
from planrail.engine.lease import LeaseLostError
from planrail.errors import StoreError
from planrail.testing import FakeClock


class Lease:
    """What :func:`keep_lease` reads of a run's lease: its ``ttl`` and ``renew``, scripted."""

    def __init__(self, clock: FakeClock, ttl: float, renewals: int) -> None:
        self.clock, self.ttl, self.renewals_left = clock, ttl, renewals
        self.asked: list[float] = []

    def renew(self) -> None:
        self.asked.append(self.clock.monotonic())
        if self.renewals_left == 0:
            raise LeaseLostError("lost the lease on run 'R'", run_id="R")
        self.renewals_left -= 1


class Ckpt:
    """What :func:`watch_requests` reads of a checkpointer: ``cancel_request``, scripted."""

    run_id = "R"

    def __init__(self, requests: list[Any] | None = None) -> None:
        self.requests = list(requests or [])
        self.asked: list[float] = []
        self.clock: FakeClock | None = None

    def cancel_request(self) -> Any:
        assert self.clock is not None
        self.asked.append(self.clock.monotonic())
        found = self.requests.pop(0) if self.requests else None
        if isinstance(found, Exception):
            raise found
        return found


async def test_the_lease_is_renewed_every_third_until_it_is_lost() -> None:
    clock = FakeClock()
    lease = Lease(clock, ttl=30.0, renewals=2)
    lost: list[str] = []
    await clock.run(keep_lease(lease, clock, lost.append))  # type: ignore[arg-type]
    assert lease.asked == [10.0, 20.0, 30.0]
    assert lost == ["lost the lease on run 'R'"]


async def test_a_cancel_request_is_found_after_a_store_that_could_not_be_read() -> None:
    """A store that could not be read is logged and looked at again; the request names who
    asked, or an operator did."""
    clock = FakeClock()
    for request, by in (({"by": "ops@host"}, "ops@host"), ({}, "an operator")):
        ckpt = Ckpt(requests=[None, StoreError("disk busy"), request])
        ckpt.clock = clock
        start = clock.monotonic()
        asked: list[str] = []
        await clock.run(watch_requests(ckpt, clock, 0.5, asked.append))  # type: ignore[arg-type]
        assert [t - start for t in ckpt.asked] == [0.5, 1.0, 1.5]
        assert asked == [by]
