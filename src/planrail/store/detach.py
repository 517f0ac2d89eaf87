"""A store seen through a switch (:meth:`Detachable.detach`): once it is off, nothing reaches
the store, as if the process using it had died at that moment.

The dashboard resumes each run in a thread of its own process, through one of these, and waits
only so long for it to record its cancel when it stops (``Dashboard.stop_grace``). A run still
busy then (a tool slow to stop) is given up: from that moment nothing it does reaches the
store, which ``planrail ui`` closes as its command ends. The run winds down in memory and ends
quietly; the store keeps it as a crash would leave it (``running``, its lease no longer
renewed), for a later resume to take over once the lease has expired. The durability tests
kill a runner the same way (``tests/durability/helpers.DyingStore``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

from planrail.store.base import Event, Intent, Lease, RunRecord, StepRecord, Store, StoreBase

__all__ = ["Detachable"]

T = TypeVar("T")


class Detachable(StoreBase):
    """``store`` for one run: every call goes through (one at a time) until :meth:`detach`;
    after it none does — writes are dropped, reads find nothing new, a lease "renews" (so the
    run never stops on a lost lease: it stops on its cancel, as it was going to). The run can
    neither write a half of its end nor log a store failure. Closing it detaches it; the
    store itself stays open (it is the dashboard's)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._attached = True

    def detach(self) -> bool:
        """Let nothing more through; whether it was still attached. Waits for a call under way
        to end: once it returns, the store may close."""
        with self._lock:
            attached, self._attached = self._attached, False
            return attached

    def _through(self, call: Callable[[Store], T], dropped: T) -> T:
        with self._lock:
            return call(self._store) if self._attached else dropped

    def create_run(self, run: RunRecord) -> None:
        self._through(lambda s: s.create_run(run), None)

    def get_run(self, run_id: str) -> RunRecord | None:
        return self._through(lambda s: s.get_run(run_id), None)

    def list_runs(self, status: str | None = None, limit: int | None = None) -> list[RunRecord]:
        return self._through(lambda s: s.list_runs(status, limit), [])

    def commit(
        self,
        *,
        run: RunRecord | None = None,
        steps: Sequence[StepRecord] = (),
        events: Sequence[Event] = (),
        intents: Sequence[Intent] = (),
    ) -> list[Event]:
        return self._through(
            lambda s: s.commit(run=run, steps=steps, events=events, intents=intents), []
        )

    def get_steps(self, run_id: str) -> dict[str, StepRecord]:
        return self._through(lambda s: s.get_steps(run_id), {})

    def events(self, run_id: str, after_seq: int = 0) -> list[Event]:
        return self._through(lambda s: s.events(run_id, after_seq), [])

    def intents(self, run_id: str) -> list[Intent]:
        return self._through(lambda s: s.intents(run_id), [])

    def acquire_lease(self, run_id: str, owner: str, ttl: float, now: float) -> bool:
        return self._through(lambda s: s.acquire_lease(run_id, owner, ttl, now), True)

    def renew_lease(self, run_id: str, owner: str, ttl: float, now: float) -> bool:
        return self._through(lambda s: s.renew_lease(run_id, owner, ttl, now), True)

    def release_lease(self, run_id: str, owner: str) -> None:
        self._through(lambda s: s.release_lease(run_id, owner), None)

    def get_lease(self, run_id: str) -> Lease | None:
        return self._through(lambda s: s.get_lease(run_id), None)

    def close(self) -> None:
        self.detach()
