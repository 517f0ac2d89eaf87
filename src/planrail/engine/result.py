"""What a run returns: its status, one record per step, and the plan's resolved output."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from planrail.types import StepStatus

if TYPE_CHECKING:
    from planrail.plan.secrets import Redactor

__all__ = [
    "OneAttempt",
    "RunResult",
    "StepResult",
    "history_of",
    "keep_history",
    "keep_usage",
    "usage_of",
]

_UNSET: Any = None
"""The default of a field made on first read (see :func:`_made_on_read`)."""


@dataclass(slots=True)
class StepResult:
    """One step's outcome (the ``steps[]`` objects of ``run --json``)."""

    id: str
    status: StepStatus = StepStatus.PENDING
    attempts: int = 0
    started_at: float | None = None
    finished_at: float | None = None
    output: Any = None
    error: dict[str, Any] | None = None
    """``{type, message, retryable}`` of the last failure, or None."""
    reason: str | None = None
    """Why the step was skipped, cancelled, in doubt or degraded."""
    degraded: bool = False
    """Succeeded through its fallback."""
    attempt_history: list[dict[str, Any]] = _UNSET
    """One record per attempt (``docs/policies.md``); a new list unless one is given."""
    usage: dict[str, int] = _UNSET
    """LLM token usage, when the step called a model; a new dict unless one is given."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "status": str(self.status),
            "attempts": self.attempts,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "output": self.output,
            "error": self.error,
            "reason": self.reason,
        }


class OneAttempt:
    """The one attempt of a step that succeeded at its first call with nothing around it
    (most steps), until someone reads ``attempt_history``: two floats instead of a list
    holding a dict of four keys."""

    __slots__ = ("duration", "started_at")

    def __init__(self, started_at: float, duration: float) -> None:
        self.started_at = started_at
        self.duration = duration

    def record(self) -> dict[str, Any]:
        """The attempt's record, as the attempt loop writes it."""
        return {
            "attempt": 1,
            "started_at": self.started_at,
            "duration": self.duration,
            "error": None,
        }


def _made_on_read(name: str, make: Callable[[Any], Any]) -> Any:
    """``StepResult.<name>`` reads as always, but its value is made on first read.

    A big run keeps one record per step, and nearly every step has no token usage and one
    plain attempt: an empty dict and a list holding a dict of four keys, per step, for nobody
    to read (over 300 bytes). Here the slot holds None or a :class:`OneAttempt` until it is
    read; the first read makes the value (``make`` of what the slot holds) and keeps it, so
    changes to it stay, and no two records share one. Assigning works as for any field."""
    slot = StepResult.__dict__[name]  # the slot's own descriptor, from dataclass(slots=True)

    def get(self: StepResult) -> Any:
        value = slot.__get__(self, StepResult)
        if value is None or type(value) is OneAttempt:
            value = make(value)
            slot.__set__(self, value)
        return value

    setattr(StepResult, name, property(get, slot.__set__))
    return slot


_HISTORY = _made_on_read("attempt_history", lambda kept: [] if kept is None else [kept.record()])
_USAGE = _made_on_read("usage", lambda _: {})


def history_of(res: StepResult) -> list[dict[str, Any]]:
    """``res.attempt_history`` without keeping a list made for the reading (a checkpoint writes
    every step's history once; the step's record stays compact)."""
    kept = _HISTORY.__get__(res, StepResult)
    if kept is None:
        return []
    return [kept.record()] if type(kept) is OneAttempt else kept


def usage_of(res: StepResult) -> dict[str, int] | None:
    """``res.usage`` when the step used a model, else None (no empty dict made and kept)."""
    return _USAGE.__get__(res, StepResult) or None


def keep_history(res: StepResult, history: list[dict[str, Any]] | OneAttempt | None) -> None:
    """Record a step's attempts (a list, or the compact form of its one plain attempt)."""
    _HISTORY.__set__(res, history)


def keep_usage(res: StepResult, usage: dict[str, int] | None) -> None:
    """Record a step's token usage (None: none, an empty dict made if someone reads it)."""
    _USAGE.__set__(res, usage)


@dataclass
class RunResult:
    """A run's outcome. ``steps`` is keyed by step id, in plan order."""

    run_id: str
    status: str
    """``succeeded``, ``failed``, ``cancelled`` or ``awaiting_approval``."""
    steps: dict[str, StepResult]
    output: Any = None
    error: str | None = None
    plan_hash: str | None = None
    rejected_stages: dict[str, str] = field(default_factory=dict)
    """Stages whose confirmation said no (``confirm: true``), with the reason."""

    @property
    def succeeded(self) -> bool:
        return self.status == "succeeded"

    @property
    def why(self) -> str | None:
        """Why the run did not succeed, in one line: its own error (a cancel, the store, a
        stage not confirmed, its output), else its first failed step's; None if neither."""
        if self.error:
            return self.error
        for sid, r in self.steps.items():
            if r.status == StepStatus.FAILED:
                return f"step '{sid}' failed: {(r.error or {}).get('message') or r.reason}"
        return None

    def __repr__(self) -> str:  # short: results of big plans end up in task reprs
        return f"<RunResult {self.run_id} {self.status} steps={len(self.steps)}>"

    def redacted(self, redactor: Redactor | None) -> RunResult:
        """A copy as the store records it: each step's output through ``redactor`` (secret
        parts replaced by ``***``), every known secret scrubbed from the rest — what a door
        that hands the result to someone else (the CLI's output, an MCP client) gives out.
        ``None`` (nothing in the plan can be secret): this result itself."""
        if redactor is None:
            return self
        steps = {
            sid: dataclasses.replace(
                r,
                output=redactor.output(sid, r.output),
                error=redactor.scrub(r.error),
                reason=None if r.reason is None else redactor.text(r.reason),
            )
            for sid, r in self.steps.items()
        }
        return dataclasses.replace(
            self,
            steps=steps,
            output=redactor.scrub(self.output),
            error=None if self.error is None else redactor.text(self.error),
        )

    def to_dict(self) -> dict[str, Any]:
        """The ``run --json`` / ``show --json`` object of the contract."""
        data: dict[str, Any] = {
            "run_id": self.run_id,
            "status": self.status,
            "output": self.output,
            "steps": [s.to_dict() for s in self.steps.values()],
        }
        if self.error:
            data["error"] = self.error
        return data
