"""What happens during a run, as typed events. Stores, traces, progress displays and
OpenTelemetry all consume the same stream."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Event", "EventType"]


class EventType(enum.StrEnum):
    RUN_CREATED = "run_created"
    RUN_APPROVED = "run_approved"
    APPROVAL_REQUESTED = "approval_requested"
    """The plan needs approval and holds none: the approver is asked (``steps``, ``plan_hash``)."""
    APPROVAL_REFUSED = "approval_refused"
    APPROVAL_DEFERRED = "approval_deferred"
    """The approver left the decision for later: the run waits, ``awaiting_approval``."""
    POLICY_OVERRIDDEN = "policy_overridden"
    """A resume ran under other policies than the run started with (``policy``, ``stored``,
    ``now``), because the caller asked for it explicitly."""
    CANCEL_REQUESTED = "cancel_requested"
    """An operator asked for the run to be cancelled (``by``, ``reason``), from any process."""
    OPERATOR_ACTION = "operator_action"
    """An operator approved, refused, resolved or retried something (``action``, ``by``, ...)."""
    RUN_STARTED = "run_started"
    STEP_READY = "step_ready"
    STEP_STARTED = "step_started"
    STEP_RESTORED = "step_restored"
    """A step that succeeded in an earlier run of a resumed run: its stored output is reused."""
    ATTEMPT_FAILED = "attempt_failed"
    RETRY_SCHEDULED = "retry_scheduled"
    STEP_SUCCEEDED = "step_succeeded"
    STEP_DEGRADED = "step_degraded"
    STEP_FAILED = "step_failed"
    STEP_SKIPPED = "step_skipped"
    STEP_CANCELLED = "step_cancelled"
    STEP_IN_DOUBT = "step_in_doubt"
    POLICY_DECISION = "policy_decision"
    """A security policy vetted a tool call: ``action``, ``reason``, ``rule``, ``sources``,
    ``tool``, and for approvals ``args_hash`` and ``approved``."""
    STAGE_CHECKED = "stage_checked"
    """A ``confirm: true`` stage's check answered: ``stage``, ``ok``, ``reason``, ``usage``."""
    RUN_FINISHED = "run_finished"


@dataclass(slots=True)
class Event:
    """One transition. ``at`` is wall-clock seconds; ``data`` holds type-specific details
    (``duration``, ``error``, ``reason``, ``delay``, ``usage``, ``status``...).

    Every consumer (store, trace, observers, the caller of ``iter()``) sees the same object:
    treat it as read-only. One exception: while handling an event, an observer may add a key of
    its own to ``data`` (the OpenTelemetry observer adds ``otel``, its span's ids); the executor
    commits the event after its observers ran, so the store keeps what was added. (Not a frozen
    dataclass: a run makes two or more per step, and a frozen dataclass sets every field through
    ``object.__setattr__``.)
    """

    type: EventType
    run_id: str
    at: float
    step_id: str | None = None
    attempt: int | None = None
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": str(self.type),
            "run_id": self.run_id,
            "at": self.at,
            "step_id": self.step_id,
            "attempt": self.attempt,
            "data": self.data,
        }
