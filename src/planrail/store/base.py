"""The records a store keeps and the ``Store`` protocol every backend implements.

Records are frozen dataclasses built with keyword arguments only; change one with
``dataclasses.replace``. Their JSON fields (``plan``, ``output``, ``args``, ``data``, …) must hold
plain JSON data: every backend, the in-memory one included, stores them as JSON text, so a tuple
comes back as a list and a value JSON cannot hold (a set, NaN, a datetime) is refused with a
``StoreError`` when it is written, not when it is read.

Errors (all ``StoreError``, so ``planrail.errors`` stays the one rooted tree)::

    StoreError
    ├── StoreCorruptError              (planrail.errors) the store's files are damaged
    ├── StoreNotFoundError             (planrail.errors) open_store(create=False): no store there
    ├── RunExistsError                 create_run() with an id that is taken
    ├── RunNotFoundError               a step, event or intent names a run that does not exist
    └── IdempotencyConflictError       an idempotency key reused with different arguments
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Protocol, Self, runtime_checkable

from planrail.errors import StoreError
from planrail.types import StepStatus

__all__ = [
    "RUN_STATUSES",
    "Event",
    "IdempotencyConflictError",
    "Intent",
    "Lease",
    "RunExistsError",
    "RunNotFoundError",
    "RunRecord",
    "StepRecord",
    "Store",
]

RUN_STATUSES: frozenset[str] = frozenset(
    {"pending", "running", "succeeded", "failed", "cancelled", "awaiting_approval"}
)
"""Every value ``RunRecord.status`` may take."""


class RunExistsError(StoreError):
    """``create_run`` was given a run id the store already holds."""

    code = "run_exists"


class RunNotFoundError(StoreError):
    """A commit wrote a step, event or intent for a run the store does not hold."""

    code = "run_not_found"


class IdempotencyConflictError(StoreError):
    """An idempotency key was recorded before with different arguments (another ``args_hash``).

    Sending the same key with other arguments would make the tool's upstream either replay the
    old result for the new request or reject it, so planrail stops instead.
    """

    code = "idempotency_conflict"


@dataclass(frozen=True, kw_only=True, slots=True)
class RunRecord:
    """One run of one approved plan."""

    run_id: str
    plan: dict[str, Any]
    """The plan document as approved (plain JSON)."""
    plan_hash: str
    """The plan's canonical hash, recorded with the approval."""
    status: str
    """One of ``RUN_STATUSES``."""
    created_at: float
    """Seconds since the epoch, from the executor's clock; the store never reads the time."""
    updated_at: float
    output: Any = None
    approval: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    """``{type, message, retryable}`` when the run failed."""
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in RUN_STATUSES:
            raise ValueError(
                f"run status {self.status!r} is not one of {', '.join(sorted(RUN_STATUSES))}"
            )


@dataclass(frozen=True, kw_only=True, slots=True)
class StepRecord:
    """The latest state of one step of a run (one row per ``run_id`` + ``step_id``)."""

    run_id: str
    step_id: str
    status: StepStatus
    """A ``StepStatus``; a plain string such as ``"running"`` is converted."""
    idempotency_key: str
    attempts: int = 0
    args: Any = None
    """The step's resolved inputs, as handed to the tool."""
    args_hash: str | None = None
    output: Any = None
    error: dict[str, Any] | None = None
    """``{type, message, retryable}`` of the last failure, or None."""
    reason: str | None = None
    """Why the step was skipped or degraded."""
    started_at: float | None = None
    finished_at: float | None = None
    degraded: bool = False
    attempt_history: list[dict[str, Any]] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if type(self.status) is not StepStatus:  # the executor's records hold one already
            object.__setattr__(self, "status", StepStatus(self.status))


@dataclass(frozen=True, kw_only=True, slots=True)
class Event:
    """One entry of a run's append-only event log.

    ``seq`` is assigned by the store: pass events to ``Store.commit`` with ``seq=0`` and read the
    numbers back from its return value. Within a run, seqs start at 1 and increase by one per event
    in commit order, with no gaps and no reuse.
    """

    run_id: str
    type: str
    at: float
    seq: int = 0
    step_id: str | None = None
    attempt: int | None = None
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True, slots=True)
class Intent:
    """A promise, recorded before a side-effecting call, to use ``idempotency_key`` for it.

    ``step_key`` names the call inside the run (the step id, plus an item index in a fan-out).
    The pair ``(run_id, idempotency_key)`` is unique; recording it again with the same
    ``args_hash`` is a no-op, with another one an ``IdempotencyConflictError``.
    """

    run_id: str
    step_key: str
    idempotency_key: str
    args_hash: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Lease:
    """Who runs a run, and until when (seconds since the epoch) unless renewed."""

    run_id: str
    owner: str
    expires_at: float


@runtime_checkable
class Store(Protocol):
    """Durable run state: runs, step records, events, idempotency intents and leases.

    Every method is synchronous and safe to call from one thread at a time per store object
    (implementations hold a lock, so sharing one across threads is safe but serialised).
    """

    def create_run(self, run: RunRecord) -> None:
        """Store a new run; raise ``RunExistsError`` if its id is taken."""
        ...

    def get_run(self, run_id: str) -> RunRecord | None:
        """The run, or None when the store does not hold it."""
        ...

    def list_runs(self, status: str | None = None, limit: int | None = None) -> list[RunRecord]:
        """Runs newest first (``created_at`` descending, then ``run_id`` descending)."""
        ...

    def commit(
        self,
        *,
        run: RunRecord | None = None,
        steps: Sequence[StepRecord] = (),
        events: Sequence[Event] = (),
        intents: Sequence[Intent] = (),
    ) -> list[Event]:
        """Write everything given in one atomic transaction, or nothing at all.

        In order: upsert ``run``; upsert each step (keyed by ``run_id`` + ``step_id``, the whole
        row replaced); record each intent (see ``record_intent``); append each event. Returns the
        events as stored, with their ``seq`` filled in. Every step, event and intent must belong
        to a run the store holds (or to ``run``): otherwise ``RunNotFoundError``.
        """
        ...

    def get_steps(self, run_id: str) -> dict[str, StepRecord]:
        """The run's step records by step id (empty for an unknown run)."""
        ...

    def events(self, run_id: str, after_seq: int = 0) -> list[Event]:
        """The run's events with ``seq > after_seq``, in seq order."""
        ...

    def record_intent(
        self, run_id: str, step_key: str, idempotency_key: str, args_hash: str
    ) -> None:
        """Record an intent on its own; the same as ``commit(intents=[Intent(...)])``."""
        ...

    def intents(self, run_id: str) -> list[Intent]:
        """The run's recorded intents, ordered by idempotency key."""
        ...

    def acquire_lease(self, run_id: str, owner: str, ttl: float, now: float) -> bool:
        """Take the run's lease until ``now + ttl``; True if ``owner`` holds it afterwards.

        Succeeds when nobody holds the lease, when it expired (``expires_at <= now``), or when
        ``owner`` already holds it (then it is renewed). Atomic across processes.
        """
        ...

    def renew_lease(self, run_id: str, owner: str, ttl: float, now: float) -> bool:
        """Extend ``owner``'s lease to ``now + ttl``; False if ``owner`` no longer holds it.

        An expired lease is never renewed, even if nobody took it over: its owner must assume
        another runner may have started, and call ``acquire_lease`` again if it wants to go on.
        """
        ...

    def release_lease(self, run_id: str, owner: str) -> None:
        """Give up ``owner``'s lease; does nothing if someone else holds it."""
        ...

    def get_lease(self, run_id: str) -> Lease | None:
        """The run's current lease row (possibly expired), or None."""
        ...

    def close(self) -> None:
        """Release the store's connections; the store cannot be used afterwards."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


class StoreBase:
    """Shared plumbing for the backends: the context manager, ``record_intent``, checks."""

    def commit(
        self,
        *,
        run: RunRecord | None = None,
        steps: Sequence[StepRecord] = (),
        events: Sequence[Event] = (),
        intents: Sequence[Intent] = (),
    ) -> list[Event]:
        raise NotImplementedError

    def record_intent(
        self, run_id: str, step_key: str, idempotency_key: str, args_hash: str
    ) -> None:
        intent = Intent(
            run_id=run_id, step_key=step_key, idempotency_key=idempotency_key, args_hash=args_hash
        )
        self.commit(intents=[intent])

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def check_store(store: object) -> None:
    """Refuse a URL or path where a :class:`Store` goes (``store="runs.db"``), before anything
    is read or made: the message says how to open one."""
    if isinstance(store, str | bytes | os.PathLike):
        raise TypeError(
            f"store must be a Store, not the URL or path {store!r}: open one with"
            " planrail.store.open_store(url) (and close it when the run is over)"
        )


def check_events(events: Sequence[Event]) -> None:
    """Refuse events that carry a seq: the store assigns them."""
    for event in events:
        if event.seq != 0:
            raise ValueError(
                f"event {event.type!r} of run {event.run_id!r} has seq={event.seq}; "
                "pass seq=0, the store assigns seqs"
            )


def check_list_args(status: str | None, limit: int | None) -> int | None:
    """The ``list_runs`` limit to apply: ``None`` for none, and for one no store could reach
    (past 2**63 - 1, what SQL integers hold); a limit that is not a whole number >= 0 is a
    ValueError, as is an unknown status."""
    if status is not None and status not in RUN_STATUSES:
        raise ValueError(f"unknown run status {status!r}: use one of {sorted(RUN_STATUSES)}")
    if limit is None:
        return None
    if not isinstance(limit, int) or isinstance(limit, bool):
        raise ValueError(f"limit must be a whole number, not {type(limit).__name__}")
    if limit < 0:
        raise ValueError("limit must be >= 0")
    return None if limit > MAX_SQL_INT else limit


MAX_SQL_INT = 2**63 - 1
"""The largest integer a SQL store's columns and parameters hold."""


def check_lease_args(ttl: float) -> None:
    if ttl <= 0:
        raise ValueError("lease ttl must be > 0 seconds")


def with_seqs(events: Sequence[Event], seqs: Sequence[int]) -> list[Event]:
    """``events`` as stored, numbered ``seqs``: new records, the given ones are left as they are.

    Built field by field rather than with ``dataclasses.replace`` (which looks the fields up for
    every record): a group commit returns a whole wave's events.
    """
    return [
        Event(
            run_id=e.run_id,
            type=e.type,
            at=e.at,
            seq=s,
            step_id=e.step_id,
            attempt=e.attempt,
            data=e.data,
        )
        for e, s in zip(events, seqs, strict=True)
    ]
