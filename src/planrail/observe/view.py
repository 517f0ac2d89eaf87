"""What ``planrail show`` shows about a run, built from a store or from a trace file.

A :class:`RunView` holds the run's :class:`~planrail.engine.result.RunResult` (exactly what the
run returned), the plan it ran, its events and each step's resolved inputs. Both sources give the
same view for the same run, so a trace file is a portable, replayable record of a run.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from planrail.engine.checkpoint import load_result
from planrail.engine.events import EventType
from planrail.engine.result import RunResult, StepResult
from planrail.observe.otel import OTEL_DATA_KEY
from planrail.plan.secrets import REDACTED
from planrail.store.base import Store
from planrail.types import StepStatus

__all__ = ["REDACTED", "RunView", "looks_secret", "redact", "trace_ids"]


_SECRET_WORDS = frozenset(
    {"password", "passwd", "secret", "token", "apikey", "credential", "credentials", "auth"}
)
_SECRET_NAMES = frozenset(
    {"api_key", "authorization", "private_key", "access_key", "client_secret"}
)
_WORD = re.compile(r"[a-z0-9]+")


def looks_secret(name: str) -> bool:
    """Whether a parameter name says it holds a secret (``api_key``, ``access_token``, …).

    A second line of defence behind ``ToolSpec.secret_params``: a tool that forgets to declare
    its secrets still does not get them printed. ``max_tokens`` is not a secret; ``token`` is.
    """
    low = name.lower()
    return low in _SECRET_NAMES or any(w in _SECRET_WORDS for w in _WORD.findall(low))


def redact(value: Any, secret_names: Iterable[str] = ()) -> Any:
    """``value`` with every dict entry named in ``secret_names`` (or looking secret) replaced by
    ``"***"``, at any depth. Returns a new value; ``value`` is not changed."""
    names = frozenset(secret_names)

    def walk(v: Any) -> Any:
        if isinstance(v, dict):
            return {
                k: REDACTED if (k in names or looks_secret(str(k))) else walk(x)
                for k, x in v.items()
            }
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    return walk(value)


_OUTCOMES = frozenset(
    {
        EventType.STEP_SUCCEEDED,
        EventType.STEP_DEGRADED,
        EventType.STEP_FAILED,
        EventType.STEP_SKIPPED,
        EventType.STEP_CANCELLED,
        EventType.STEP_IN_DOUBT,
    }
)


def trace_ids(
    events: Iterable[tuple[str, str | None, Mapping[str, Any]]], step_id: str | None = None
) -> dict[str, str] | None:
    """The OpenTelemetry ids a traced run stored in its events (``(type, step_id, data)``, in
    order; see :mod:`planrail.observe.otel`): ``{trace_id, span_id}`` of the span of
    ``step_id``'s last outcome — a step restored on resume keeps the span of the execution that
    ran it — else ``{trace_id}`` of the run's latest execution (the span id of the run span
    when ``step_id`` is None). None when nothing was recorded (not traced, or not sampled)."""
    run: dict[str, str] | None = None
    step: dict[str, str] | None = None
    restored: dict[str, str] | None = None
    for kind, sid, data in events:
        ids = data.get(OTEL_DATA_KEY)
        if not isinstance(ids, dict):
            continue
        if kind == EventType.RUN_STARTED:
            run = ids
        elif step_id is not None and sid == step_id:
            if kind in _OUTCOMES:
                step = ids
            elif kind == EventType.STEP_RESTORED:
                restored = ids
    found = step or restored
    if found is not None:
        return {"trace_id": str(found.get("trace_id")), "span_id": str(found.get("span_id"))}
    if run is None:
        return None
    if step_id is None:
        return {"trace_id": str(run.get("trace_id")), "span_id": str(run.get("span_id"))}
    return {"trace_id": str(run.get("trace_id"))}


SecretsOf = Callable[[str], Iterable[str]]
"""Given a step id, the names of its tool's secret parameters."""


def _no_secrets(step_id: str) -> Iterable[str]:
    return ()


@dataclass
class RunView:
    """One run as ``planrail show`` sees it."""

    run_id: str
    plan: dict[str, Any]
    """The plan document as it ran (plain JSON)."""
    result: RunResult
    """What the run returned (``show --json`` prints ``result.to_dict()``)."""
    events: list[dict[str, Any]] = field(default_factory=list)
    """``{type, at, step_id, attempt, data}`` in the order they happened."""
    args: dict[str, Any] = field(default_factory=dict)
    """Each step's resolved inputs, secrets already redacted."""
    keys: dict[str, str] = field(default_factory=dict)
    """Each started step's idempotency key."""

    @classmethod
    def from_store(
        cls, store: Store, run_id: str, secrets: SecretsOf = _no_secrets
    ) -> RunView | None:
        """The view of a stored run, or None if the store does not hold ``run_id``."""
        run = store.get_run(run_id)
        result = load_result(store, run_id)
        if run is None or result is None:
            return None
        records = store.get_steps(run_id)
        events = [
            {"type": e.type, "at": e.at, "step_id": e.step_id, "attempt": e.attempt, "data": e.data}
            for e in store.events(run_id)
        ]
        return cls(
            run_id=run_id,
            plan=run.plan,
            result=result,
            events=events,
            args={
                sid: redact(r.args, secrets(sid))
                for sid, r in records.items()
                if r.args is not None
            },
            keys={sid: r.idempotency_key for sid, r in records.items()},
        )

    # ------------------------------------------------------------------ derived facts

    @property
    def goal(self) -> str:
        return str(self.plan.get("goal", ""))

    def step_plan(self, step_id: str) -> dict[str, Any]:
        """The step as written in the plan (``{}`` for an unknown id)."""
        return next((s for s in self.plan.get("steps", []) if s.get("id") == step_id), {})

    def deps(self) -> dict[str, list[str]]:
        """``{step: [dependencies]}`` in plan order."""
        return {s["id"]: list(s.get("depends_on", ())) for s in self.plan.get("steps", [])}

    def span(self) -> tuple[float | None, float | None]:
        """When the run started and finished (from its events; None when unknown)."""
        started = [e["at"] for e in self.events if e["type"] == EventType.RUN_STARTED]
        finished = [e["at"] for e in self.events if e["type"] == EventType.RUN_FINISHED]
        return (started[0] if started else None, finished[-1] if finished else None)

    def counts(self) -> dict[str, int]:
        """How many steps ended in each status (statuses in their usual order, zeros left out)."""
        found: dict[str, int] = {}
        for r in self.result.steps.values():
            found[str(r.status)] = found.get(str(r.status), 0) + 1
        return {str(s): found[str(s)] for s in StepStatus if str(s) in found}

    def tokens(self) -> dict[str, int]:
        """LLM token usage summed over the steps."""
        total: dict[str, int] = {}
        for r in self.result.steps.values():
            for k, v in r.usage.items():
                total[k] = total.get(k, 0) + int(v)
        return total

    def retries(self) -> int:
        return sum(1 for e in self.events if e["type"] == EventType.RETRY_SCHEDULED)

    def summary(self) -> dict[str, Any]:
        """The header of ``show``: status, times, counts, tokens, retries."""
        started, finished = self.span()
        return {
            "run_id": self.run_id,
            "status": self.result.status,
            "goal": self.goal,
            "plan_hash": self.result.plan_hash,
            "started_at": started,
            "finished_at": finished,
            "elapsed": finished - started if started is not None and finished else None,
            "steps": len(self.result.steps),
            "counts": self.counts(),
            "retries": self.retries(),
            "tokens": self.tokens(),
            "error": self.result.error,
        }

    def step_detail(self, step_id: str) -> dict[str, Any] | None:
        """``show --step``: one step's plan entry, resolved inputs, output, attempts, events."""
        res = self.result.steps.get(step_id)
        if res is None:
            return None
        return {
            **res.to_dict(),
            "degraded": res.degraded,
            "usage": res.usage,
            "idempotency_key": self.keys.get(step_id),
            "depends_on": list(self.step_plan(step_id).get("depends_on", ())),
            "calls": _calls(self.step_plan(step_id)),
            "inputs": self.args.get(step_id),
            "attempt_history": res.attempt_history,
            "trace": trace_ids(
                ((e["type"], e["step_id"], e["data"]) for e in self.events), step_id
            ),
            "events": [
                {k: e[k] for k in ("type", "at", "attempt", "data")}
                for e in self.events
                if e["step_id"] == step_id
            ],
        }


def _calls(step: Mapping[str, Any]) -> str:
    action = str(step.get("action", "tool_call"))
    if action == "tool_call":
        return str(step.get("tool", "?"))
    return f"{action} ({step['model']})" if step.get("model") else action


def step_result_from(data: Mapping[str, Any]) -> StepResult:
    """A :class:`StepResult` from a trace's step record."""
    return StepResult(
        id=data["id"],
        status=StepStatus(data.get("status", "pending")),
        attempts=int(data.get("attempts", 0)),
        started_at=data.get("started_at"),
        finished_at=data.get("finished_at"),
        output=data.get("output"),
        error=data.get("error"),
        reason=data.get("reason"),
        degraded=bool(data.get("degraded", False)),
        attempt_history=list(data.get("attempt_history", [])),
        usage=dict(data.get("usage", {})),
    )
