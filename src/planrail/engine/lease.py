"""A run's lease: what lets one runner at a time drive a stored run.

A runner acquires the run's lease before it writes anything, renews it (every third of its
time to live: :func:`planrail.engine.background.keep_lease`) and refuses to write once it may
have expired; another runner waits for it, or is refused (:class:`RunBusyError`). The lease of a
runner that died on this host is taken over at once (:mod:`planrail.engine.owners`), not when it
expires: fenced as ever — the release removes only that owner's row, and the acquire succeeds for
one runner only.
"""

from __future__ import annotations

from planrail.engine.owners import Owner, owner_gone, this_owner
from planrail.errors import ExecutionError
from planrail.store.base import Store
from planrail.types import Clock

__all__ = ["LeaseLostError", "RunBusyError", "RunLease"]


class RunBusyError(ExecutionError):
    """Another runner holds the run's lease."""

    code = "run_busy"


class LeaseLostError(ExecutionError):
    """This runner's lease expired or was taken: it stops so two runners never overlap."""

    code = "lease_lost"


class RunLease:
    """This runner's lease on run ``run_id`` in ``store``, ``ttl`` seconds at a time."""

    def __init__(
        self, store: Store, run_id: str, clock: Clock, ttl: float, owner: str | None = None
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.clock = clock
        self.ttl = ttl
        self.owner = owner or this_owner()
        self._holding = False
        self._until = float("-inf")
        """When the lease expires unless renewed, by our clock."""

    def acquire(self) -> None:
        """Take the lease, or :class:`RunBusyError` naming who holds it and for how long."""
        store, run_id, now = self.store, self.run_id, self.clock.now()
        if not store.acquire_lease(run_id, self.owner, self.ttl, now):
            lease = store.get_lease(run_id)
            if lease is not None and owner_gone(lease.owner):
                # Its runner died on this host: take over now, not when the lease expires.
                store.release_lease(run_id, lease.owner)
                if store.acquire_lease(run_id, self.owner, self.ttl, now):
                    self._held(now)
                    return
                lease = store.get_lease(run_id)
            holder = (
                f" by {Owner.parse(lease.owner).describe()} ({lease.owner}), whose lease runs"
                f" {lease.expires_at - now:.0f}s more unless renewed"
                if lease
                else ""
            )
            raise RunBusyError(
                f"run '{run_id}' is being run{holder}; wait for it to finish (or for its"
                " lease to expire if that runner died on another host) and resume again",
                run_id=run_id,
            )
        self._held(now)

    def _held(self, now: float) -> None:
        self._holding = True
        self._until = now + self.ttl

    def renew(self) -> None:
        """Extend the lease; :class:`LeaseLostError` if it is no longer ours."""
        now = self.clock.now()
        if not self.store.renew_lease(self.run_id, self.owner, self.ttl, now):
            self._holding = False
            raise LeaseLostError(
                f"lost the lease on run '{self.run_id}' (it expired); stopping so that two "
                "runners never drive one run",
                run_id=self.run_id,
            )
        self._until = now + self.ttl

    def check(self) -> None:
        """Refuse to write once the lease may have expired: another runner may own the run."""
        if self.clock.now() >= self._until:
            raise LeaseLostError(
                f"the lease on run '{self.run_id}' expired before it could be renewed (was the "
                "event loop blocked?); stopping so that two runners never drive one run",
                run_id=self.run_id,
            )

    def release(self) -> None:
        """Give the lease back, if held (once)."""
        if self._holding:
            self._holding = False
            self.store.release_lease(self.run_id, self.owner)
