"""Typed ids and the Protocols the layers talk through (Clock, Observer).

Only standard-library imports here: every other module may import this one.
"""

from __future__ import annotations

import enum
from typing import Any, NewType, Protocol, runtime_checkable

__all__ = ["JSON", "Clock", "Observer", "RunId", "StepId", "StepStatus"]

StepId = NewType("StepId", str)
"""A step's id inside its plan (``^[A-Za-z_][A-Za-z0-9_]{0,63}$``)."""

RunId = NewType("RunId", str)
"""A run's id, unique inside its store."""

JSON = Any
"""Plain JSON data: dict (str keys), list, str, int, float, bool or None."""


class StepStatus(enum.StrEnum):
    """The states a step moves through; legal moves are in ``planrail.engine.scheduler``."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"
    IN_DOUBT = "in_doubt"

    @property
    def terminal(self) -> bool:
        return self in _TERMINAL


_TERMINAL = frozenset(
    {StepStatus.SUCCEEDED, StepStatus.FAILED, StepStatus.SKIPPED, StepStatus.CANCELLED}
)


@runtime_checkable
class Clock(Protocol):
    """Where all time comes from. The executor never calls ``time`` or ``asyncio.sleep`` itself."""

    def now(self) -> float:
        """Wall-clock time in seconds since the epoch (for records people read)."""
        ...

    def monotonic(self) -> float:
        """A monotonic reading in seconds (for durations, deadlines and backoff)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` of this clock's time."""
        ...


@runtime_checkable
class Observer(Protocol):
    """Receives every event of a run. An observer that raises is logged and never breaks a run."""

    def on_event(self, event: Any) -> None: ...
