"""What a run returns: its status, one record per step, and the plan's resolved output."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from planrail.types import StepStatus

__all__ = ["RunResult", "StepResult"]


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
    attempt_history: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    """LLM token usage, when the step called a model."""

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

    def __repr__(self) -> str:  # short: results of big plans end up in task reprs
        return f"<RunResult {self.run_id} {self.status} steps={len(self.steps)}>"

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
