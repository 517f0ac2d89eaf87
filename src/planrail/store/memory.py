"""``MemoryStore``: the store for tests and one-off runs; nothing survives the process."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from planrail.store import _codec as codec
from planrail.store.base import (
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

__all__ = ["MemoryStore"]


class MemoryStore(StoreBase):
    """A ``Store`` held in this process's memory.

    It keeps the same JSON rows the database backends keep, so it copies data in and out (a caller
    can never mutate stored state through a record it passed in or got back), refuses the same
    non-JSON values, and returns the same types (a tuple comes back as a list). That makes it a
    faithful stand-in for SQLite and PostgreSQL in tests.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: dict[str, codec.Row] = {}
        self._last_seq: dict[str, int] = {}
        self._steps: dict[str, dict[str, codec.Row]] = {}
        self._events: dict[str, list[codec.Row]] = {}
        self._intents: dict[str, dict[str, codec.Row]] = {}
        self._leases: dict[str, Lease] = {}

    def create_run(self, run: RunRecord) -> None:
        row = codec.encode_run(run)
        with self._lock:
            if run.run_id in self._runs:
                raise RunExistsError(f"run {run.run_id!r} already exists", run_id=run.run_id)
            self._put_run(row)

    def get_run(self, run_id: str) -> RunRecord | None:
        with self._lock:
            row = self._runs.get(run_id)
        return None if row is None else codec.decode_run(row)

    def list_runs(self, status: str | None = None, limit: int | None = None) -> list[RunRecord]:
        limit = check_list_args(status, limit)
        with self._lock:
            rows = [r for r in self._runs.values() if status is None or r[3] == status]
        rows.sort(key=lambda r: (r[4], r[0]), reverse=True)
        return [codec.decode_run(r) for r in rows[:limit]]

    def commit(
        self,
        *,
        run: RunRecord | None = None,
        steps: Sequence[StepRecord] = (),
        events: Sequence[Event] = (),
        intents: Sequence[Intent] = (),
    ) -> list[Event]:
        check_events(events)
        run_row = None if run is None else codec.encode_run(run)
        step_rows = [codec.encode_step(s) for s in steps]
        event_rows = [codec.encode_event(e) for e in events]
        for intent in intents:  # refused before anything is written, as every row is
            codec.encode_intent(intent)
        with self._lock:
            # Check everything first: once the writes below start, nothing can fail.
            for run_id in {r[0] for r in (*step_rows, *event_rows)} | {i.run_id for i in intents}:
                if run_id not in self._runs and (run is None or run.run_id != run_id):
                    raise codec.missing_run(run_id)
            new_intents: dict[tuple[str, str], codec.Row] = {}
            for intent in intents:
                key = (intent.run_id, intent.idempotency_key)
                old = new_intents.get(key) or self._intents.get(intent.run_id, {}).get(key[1])
                if old is None:
                    new_intents[key] = codec.encode_intent(intent)
                elif old[3] != intent.args_hash:
                    raise codec.conflict(intent, old[3])

            if run_row is not None:
                self._put_run(run_row)
            for row in step_rows:
                self._steps[row[0]][row[1]] = row
            for (run_id, idempotency_key), row in new_intents.items():
                self._intents[run_id][idempotency_key] = row
            seqs = []
            for row in event_rows:
                seq = self._last_seq[row[0]] + 1
                self._last_seq[row[0]] = seq
                self._events[row[0]].append((row[0], seq, *row[2:]))
                seqs.append(seq)
        return with_seqs(events, seqs)

    def get_steps(self, run_id: str) -> dict[str, StepRecord]:
        with self._lock:
            rows = sorted(self._steps.get(run_id, {}).values(), key=lambda r: r[1])
        return {r[1]: codec.decode_step(r) for r in rows}

    def events(self, run_id: str, after_seq: int = 0) -> list[Event]:
        with self._lock:
            # seq n sits at index n - 1: the log has no gaps.
            rows = self._events.get(run_id, [])[max(after_seq, 0) :]
        return [codec.decode_event(r) for r in rows]

    def intents(self, run_id: str) -> list[Intent]:
        with self._lock:
            rows = sorted(self._intents.get(run_id, {}).values(), key=lambda r: r[2])
        return [codec.decode_intent(r) for r in rows]

    def acquire_lease(self, run_id: str, owner: str, ttl: float, now: float) -> bool:
        check_lease_args(ttl)
        codec.check_lease_text(run_id, owner)
        with self._lock:
            held = self._leases.get(run_id)
            if held is not None and held.owner != owner and held.expires_at > now:
                return False
            self._leases[run_id] = Lease(run_id=run_id, owner=owner, expires_at=float(now + ttl))
            return True

    def renew_lease(self, run_id: str, owner: str, ttl: float, now: float) -> bool:
        check_lease_args(ttl)
        with self._lock:
            held = self._leases.get(run_id)
            if held is None or held.owner != owner or held.expires_at <= now:
                return False
            self._leases[run_id] = Lease(run_id=run_id, owner=owner, expires_at=float(now + ttl))
            return True

    def release_lease(self, run_id: str, owner: str) -> None:
        with self._lock:
            held = self._leases.get(run_id)
            if held is not None and held.owner == owner:
                del self._leases[run_id]

    def get_lease(self, run_id: str) -> Lease | None:
        with self._lock:
            return self._leases.get(run_id)

    def close(self) -> None:
        """Nothing to release; the data stays readable until the object is dropped."""

    def _put_run(self, row: codec.Row) -> None:
        run_id = row[0]
        self._runs[run_id] = row
        self._last_seq.setdefault(run_id, 0)
        self._steps.setdefault(run_id, {})
        self._events.setdefault(run_id, [])
        self._intents.setdefault(run_id, {})
