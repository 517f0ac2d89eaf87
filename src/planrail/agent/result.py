"""What an agent run returns: its status, the plan, every planning attempt, the run, the trace."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from planrail.engine.events import Event
from planrail.engine.result import RunResult
from planrail.plan.model import Plan
from planrail.planner.planner import Attempt

__all__ = ["AGENT_STATUSES", "AgentResult", "Trace", "TraceEvent"]

AGENT_STATUSES = (
    "succeeded",
    "failed",
    "cancelled",
    "refused",
    "invalid",
    "budget_exceeded",
    "error",
)
"""``refused``: approval said no, nothing with side effects ran; ``invalid``: no valid plan
within the repairs allowed; ``error``: the model could not be used (unreachable, refused the
request, package missing); the others are a run's own statuses."""


@dataclass(frozen=True, slots=True)
class TraceEvent:
    """One thing that happened, in order: planning, approval and execution events alike."""

    type: str
    step_id: str | None = None
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "step_id": self.step_id, "data": self.data}


class Trace:
    """Collects agent notes and (as an observer) the executor's events, in one ordered list."""

    def __init__(self) -> None:
        self.events: list[TraceEvent] = []

    def on_event(self, event: Event) -> None:
        self.events.append(TraceEvent(str(event.type), event.step_id, dict(event.data)))

    def note(self, type_: str, step_id: str | None = None, **data: Any) -> None:
        self.events.append(TraceEvent(type_, step_id, data))


@dataclass
class AgentResult:
    """The outcome of :meth:`planrail.agent.Agent.run`."""

    goal: str
    status: str = "pending"
    """One of :data:`AGENT_STATUSES`."""
    plan: Plan | None = None
    """The last valid plan (after a replan: finished steps plus the new ones)."""
    run: RunResult | None = None
    """The last execution's result; a replan's includes the reused steps."""
    runs: list[RunResult] = field(default_factory=list)
    """Every execution, the first plan's and each replan's."""
    attempts: list[Attempt] = field(default_factory=list)
    """Every request to the planner model: prompts, raw answers, issues, fixes."""
    replans: int = 0
    usage: dict[str, Any] = field(default_factory=dict)
    """``{input_tokens, output_tokens, calls, cost}`` over the whole run."""
    reason: str | None = None
    """Why the run did not succeed, in one sentence."""
    trace: list[TraceEvent] = field(default_factory=list)

    @property
    def succeeded(self) -> bool:
        return self.status == "succeeded"

    @property
    def output(self) -> Any:
        return self.run.output if self.run is not None else None

    def to_dict(self) -> dict[str, Any]:
        """``run --json``'s object (``run_id``, ``status``, ``output``, ``steps``) and more."""
        data: dict[str, Any] = (
            self.run.to_dict()
            if self.run is not None
            else {"run_id": None, "status": self.status, "output": None, "steps": []}
        )
        data["status"] = self.status
        data.update(
            goal=self.goal,
            reason=self.reason,
            plan=self.plan.to_json_data() if self.plan is not None else None,
            replans=self.replans,
            usage=self.usage,
            planning=[  # each attempt but what was sent (the whole prompt, every time)
                {k: v for k, v in a.to_dict().items() if k != "messages"} for a in self.attempts
            ],
        )
        return data
