"""Trace files: a run's events as JSON Lines, replayable into ``planrail show``.

One JSON object per line, each with a ``kind``:

``run``
    written when the run starts: ``run_id``, ``version``, ``at``, ``resumed``, and, when the
    writer is attached to an :class:`~planrail.engine.executor.Execution`, the ``plan`` and its
    ``plan_hash``.
``event``
    every :class:`~planrail.engine.events.Event`, as ``Event.to_dict()``.
``step``
    a step's full record (``StepResult`` fields, ``args`` with secrets redacted,
    ``idempotency_key``) each time it finishes, and once more at the end if it changed.
``result``
    at the end: the run's ``status``, ``output`` and ``error``.

A file may hold several runs, or several executions of one run (``run`` then ``resume`` with
the same ``--trace``): lines are appended, and the reader keeps the last record of each step.
A trace written without an execution holds events only; the reader rebuilds what it can from
them (everything but outputs and inputs).

Secrets never reach the file in clear: with an execution, its plan's
:class:`~planrail.plan.secrets.Redactor` (the executor's own when it has one) redacts secret
parameters in the plan and in step inputs, secret outputs, and scrubs known secret values from
everything else; parameters named like secrets (``api_key``, ``password``…) are redacted too.
"""

from __future__ import annotations

import contextlib
import json
import logging
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from planrail.engine.events import Event, EventType
from planrail.engine.result import RunResult, StepResult
from planrail.errors import PlanLoadError, PlanrailError, error_message
from planrail.observe.view import RunView, redact, step_result_from
from planrail.plan.loader import read_bounded
from planrail.plan.secrets import Redactor
from planrail.plan.tools import step_key
from planrail.types import StepStatus

if TYPE_CHECKING:
    from planrail.engine.executor import Execution

__all__ = ["TRACE_VERSION", "TraceError", "TraceWriter", "read_trace"]

log = logging.getLogger("planrail")

TRACE_VERSION = 1
E = EventType
S = StepStatus

_RUN_BEGIN = frozenset({E.RUN_CREATED, E.RUN_APPROVED, E.RUN_STARTED})
"""The first of these in a run writes the trace's header line."""

_STEP_END = {
    E.STEP_RESTORED: S.SUCCEEDED,
    E.STEP_SUCCEEDED: S.SUCCEEDED,
    E.STEP_DEGRADED: S.SUCCEEDED,
    E.STEP_FAILED: S.FAILED,
    E.STEP_SKIPPED: S.SKIPPED,
    E.STEP_CANCELLED: S.CANCELLED,
    E.STEP_IN_DOUBT: S.IN_DOUBT,
}


class TraceError(PlanrailError):
    """A trace file cannot be read (missing, not JSON Lines, or without the run asked for)."""

    code = "trace_error"


class TraceWriter:
    """An :class:`~planrail.types.Observer` that appends a run's trace to a JSON Lines file.

    ``TraceWriter("run.jsonl").attach(execution)`` before running: the file is closed when the
    run finishes. Without an execution (``observers=[TraceWriter(path)]``) it records events
    only, of any number of runs, and is flushed at each run's end: close it yourself. A write
    error is logged once and stops the trace, never the run.
    """

    def __init__(self, target: str | Path | IO[str], execution: Execution | None = None) -> None:
        self._owns = isinstance(target, str | Path)
        self._file: IO[str] | None
        if isinstance(target, str | Path):
            self._file = open(target, "a", encoding="utf-8")  # noqa: SIM115 (closed at the end)
        else:
            self._file = target
        self.execution = execution
        self._written: dict[str, tuple[Any, ...]] = {}
        self._redactor: Redactor | None = None
        self._headed = False
        """Whether the current run's header line is written (reset when the run finishes)."""

    def attach(self, execution: Execution) -> TraceWriter:
        """Record ``execution``'s plan, step records and output too; observe it."""
        self.execution = execution
        execution.observers.append(self)
        return self

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._file is not None:
            try:
                self._file.flush()
            finally:
                if self._owns:
                    self._file.close()
                self._file = None

    def on_event(self, event: Event) -> None:
        if self._file is None:
            return
        try:
            if event.type in _RUN_BEGIN and not self._headed:
                self._headed = True
                self._redactor = self._find_redactor()
                self._write(self._header(event))
            line = {"kind": "event", **event.to_dict()}
            if self._redactor is not None and event.data:
                line["data"] = self._redactor.scrub(event.data)
            self._write(line)
            if event.step_id is not None and event.type in _STEP_END:
                self._step(event.step_id)
            if event.type == E.RUN_FINISHED:
                self._headed = False
                self._finish(event)
        except (OSError, TypeError, ValueError) as exc:
            log.warning("trace file: writing failed (%s); the trace stops, the run goes on", exc)
            broken, self._file = self._file, None
            if self._owns and broken is not None:
                with contextlib.suppress(OSError):
                    broken.close()

    # ------------------------------------------------------------------ lines

    def _write(self, obj: dict[str, Any]) -> None:
        assert self._file is not None
        self._file.write(json.dumps(obj, ensure_ascii=False, default=str) + "\n")

    def _find_redactor(self) -> Redactor | None:
        ex = self.execution
        if ex is None:
            return None
        if hasattr(ex, "redactor"):  # an Execution: it decided (None: no secrets to hide)
            own = ex.redactor
            return own if isinstance(own, Redactor) else None
        return Redactor.for_plan(ex.plan, ex.registry)

    def _header(self, event: Event) -> dict[str, Any]:
        head: dict[str, Any] = {
            "kind": "run",
            "version": TRACE_VERSION,
            "run_id": event.run_id,
            "at": event.at,
            "resumed": bool(event.data.get("resumed", False)),
        }
        if self.execution is not None:
            plan = self.execution.plan.to_json_data()
            head["plan"] = plan if self._redactor is None else self._redactor.plan_data(plan)
            head["plan_hash"] = self.execution.plan.hash
        return head

    def _step(self, sid: str) -> None:
        ex = self.execution
        if ex is None or sid not in ex.results:
            return
        r = ex.results[sid]
        state = (r.status, r.attempts, r.finished_at, r.reason, r.degraded)
        if self._written.get(sid) == state:
            return
        self._written[sid] = state
        record = _record(r)
        red = self._redactor
        if sid in ex.args:
            args = ex.args[sid]
            record["args"] = redact(args if red is None else red.args(sid, args))
        if red is not None:
            record["output"] = red.output(sid, record["output"])
            for key in ("error", "reason", "attempt_history"):
                record[key] = red.scrub(record[key])
        record["run_id"] = ex.run_id
        record["idempotency_key"] = step_key(ex.run_id, sid)
        self._write(record)

    def _finish(self, event: Event) -> None:
        ex = self.execution
        if ex is not None:
            for sid, r in ex.results.items():
                if r.status != S.PENDING:
                    self._step(sid)
        self._write(
            {
                "kind": "result",
                "run_id": event.run_id,
                "status": event.data.get("status"),
                "output": self._scrub(ex.run_output if ex is not None else None),
                "error": event.data.get("error"),
            }
        )
        if ex is not None:  # one execution, one run: done
            self.close()
        elif self._file is not None:
            self._file.flush()

    def _scrub(self, value: Any) -> Any:
        return value if self._redactor is None else self._redactor.scrub(value)


def _record(r: StepResult) -> dict[str, Any]:
    return {
        "kind": "step",
        **r.to_dict(),
        "degraded": r.degraded,
        "usage": r.usage,
        "attempt_history": r.attempt_history,
    }


# ---------------------------------------------------------------------- reading


def read_trace(path: str | Path, run_id: str | None = None) -> RunView:
    """The :class:`RunView` of run ``run_id`` in a trace file (default: the last run in it)."""
    lines = _lines(Path(path))
    try:
        runs = [obj["run_id"] for obj in lines if obj.get("kind") == "run"]
        if run_id is None:
            if not runs:
                raise TraceError(f"{path}: no run in this trace file")
            run_id = runs[-1]
        elif run_id not in runs:
            raise TraceError(f"{path}: no run '{run_id}' in this trace file")
        mine = [obj for obj in lines if obj.get("run_id", run_id) == run_id]
        return _replay(run_id, mine)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:  # JSON, not a trace's
        raise TraceError(
            f"{path}: not a planrail trace: a line lacks a field or holds the wrong kind of"
            f" value ({type(exc).__name__}: {error_message(exc)})"
        ) from None


MAX_TRACE_BYTES = 1 << 30
"""The largest trace file read (1 GiB: a few million events)."""


def _lines(path: Path) -> list[dict[str, Any]]:
    try:  # bounded: a file that never ends (/dev/zero) is refused, not read until memory runs out
        text = read_bounded(path, MAX_TRACE_BYTES, "the trace file", "1 GiB")
    except PlanLoadError as exc:  # cannot be read, too big, not UTF-8
        raise TraceError(exc.message) from None
    out: list[dict[str, Any]] = []
    rows = text.splitlines()
    for n, line in enumerate(rows, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            if n == len(rows):  # a run that died mid-write: keep what is whole
                break
            raise TraceError(f"{path}:{n}: not a JSON line ({exc.msg})") from None
        except RecursionError:  # no trace writer nests this deep (json.dumps could not)
            raise TraceError(f"{path}:{n}: a JSON line nested too deeply to read") from None
        except ValueError as exc:  # an integer of more than 4,300 digits
            reason = str(exc).split(";")[0]
            raise TraceError(f"{path}:{n}: a JSON line that cannot be read ({reason})") from None
        if not isinstance(obj, dict) or "kind" not in obj:
            raise TraceError(f"{path}:{n}: not a planrail trace line (no 'kind')")
        out.append(obj)
    return out


def _replay(run_id: str, lines: list[dict[str, Any]]) -> RunView:
    heads = [o for o in lines if o["kind"] == "run"]
    plan: dict[str, Any] = next((h["plan"] for h in reversed(heads) if "plan" in h), {})
    plan_hash = next((h["plan_hash"] for h in reversed(heads) if "plan_hash" in h), None)
    events: list[dict[str, Any]] = []
    steps: dict[str, StepResult] = {s["id"]: StepResult(s["id"]) for s in plan.get("steps", [])}
    args: dict[str, Any] = {}
    keys: dict[str, str] = {}
    status, output, error = "running", None, None
    for obj in lines:
        kind = obj["kind"]
        if kind == "event":
            event: dict[str, Any] = {k: obj.get(k) for k in ("type", "at", "step_id", "attempt")}
            event["data"] = obj.get("data") or {}
            events.append(event)
            _apply_event(steps, event)
            if event["type"] == E.RUN_FINISHED:
                status = event["data"].get("status") or status
                error = event["data"].get("error")
        elif kind == "step":
            steps[obj["id"]] = step_result_from(obj)
            if "args" in obj:
                args[obj["id"]] = obj["args"]
            if obj.get("idempotency_key"):
                keys[obj["id"]] = obj["idempotency_key"]
        elif kind == "result":
            status, output, error = obj.get("status") or status, obj.get("output"), obj.get("error")
    for sid, r in steps.items():
        if r.status != S.PENDING and sid not in keys:
            keys[sid] = step_key(run_id, sid)
    result = RunResult(run_id, status, steps, output, error, plan_hash)
    return RunView(run_id, plan, result, events, args, keys)


def _apply_event(steps: dict[str, StepResult], e: dict[str, Any]) -> None:
    """Rebuild a step's state from one event (the step records, when present, override it)."""
    sid, kind, data = e["step_id"], e["type"], e["data"]
    if sid is None:
        return
    r = steps.setdefault(sid, StepResult(sid))
    if kind == E.STEP_STARTED:
        r.status, r.started_at, r.attempts = S.RUNNING, e["at"], e["attempt"] or 1
        return
    end = _STEP_END.get(kind)
    if end is None:
        return
    r.status = end
    if e["attempt"] is not None:
        r.attempts = e["attempt"]
    if kind != E.STEP_RESTORED and (kind != E.STEP_SKIPPED or e["attempt"] is not None):
        r.finished_at = e["at"]
    r.error = data.get("error", r.error)
    r.reason = data.get("reason", r.reason)
    r.degraded = kind == E.STEP_DEGRADED
    r.usage = dict(data.get("usage") or r.usage)
