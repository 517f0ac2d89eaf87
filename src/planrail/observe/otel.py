"""OpenTelemetry: a span per run, per step and per attempt, and metrics, from the event stream.

Needs the ``otel`` extra (``pip install 'planrail[otel]'``); nothing here imports OpenTelemetry
until an :class:`OtelObserver` is made.

Spans (every one carries ``planrail.run_id``; step and attempt spans also ``planrail.step_id``,
``planrail.attempt`` and ``planrail.idempotency_key``)::

    planrail.run                       the whole execution
    └── planrail.step {step_id}        first start to final outcome, retries and backoff included
        └── planrail.attempt           one per attempt when the step was retried; a failed
                                       attempt has status ERROR and an ``exception`` event
            or chat {model}            each attempt of an ``llm_call`` step, following the GenAI
                                       semantic conventions (gen_ai.operation.name,
                                       gen_ai.request.model, gen_ai.usage.input_tokens, ...)

A tool step that ran once has no attempt child: its step span is the attempt (that halves the
spans of a big plan; the overhead benchmark measures the rest). A step that never ran (skipped,
restored from a checkpoint, in doubt) gets a zero-length step span saying why. Step and attempt
spans are made when the step ends, with their real (recorded) start and end times and all their
attributes at once — one SDK call per span instead of one per attribute — so a retry's backoff
shows as the gap between two attempts. When the run span is not sampled and the sampler follows
the parent (the SDK's default ``ParentBased``), drops everything (``ALWAYS_OFF``), or there is no
SDK at all, no step span is built: no per-step tracer call. When it is sampled, a plain step span
(one attempt, no error, no LLM call: no events, no children) is handed to the SDK's span
processors already finished, where that is exactly what ``start_span`` + ``end`` would export
(:mod:`planrail.observe.otel_spans` says when); the others go through ``start_span``.

Ids, for the dashboard and ``planrail show``: the observer adds ``data["otel"] =
{"trace_id", "span_id"}`` (lowercase hex, as OTLP backends show them) to the ``run_started``
event of a sampled run span, and to each step's final event when its step span is sampled. The
executor queues an event for the store before it calls the observers, and commits it after, so
the ids are stored with the event itself (:func:`planrail.observe.view.trace_ids` reads them
back): no extra write, and nothing at all when nothing samples.

Metrics (attributes are low-cardinality: no run or step ids): ``planrail.runs`` and
``planrail.steps`` (counters by status), ``planrail.retries``, ``planrail.run.duration`` and
``planrail.step.duration`` (histograms, seconds), and ``gen_ai.client.token.usage`` (histogram,
by ``gen_ai.token.type``).

Batches: step counts, step durations and plain step spans (made directly, see
:mod:`planrail.observe.otel_spans`) are handed to the SDK in bursts — when ``STEP_COUNT_BATCH``
steps have ended, ``FLUSH_AFTER_S`` seconds after the first of a batch ended (on the run's event
loop), and when the run ends. The values, times and ids are the same, one ``record`` and one
span per step; a burst keeps the SDK's own code hot, where a call between two steps cost about
twice as much (``docs/benchmarks.md``, section 19). A span's ids are known (and stored with the
step's event) when the step ends.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from planrail.engine.events import Event, EventType
from planrail.errors import MissingExtraError
from planrail.observe.otel_spans import DirectSpans, children_sampled
from planrail.plan.tools import step_key

if TYPE_CHECKING:
    from planrail.plan.model import Plan

__all__ = ["INSTALL_HINT", "OTEL_DATA_KEY", "MissingExtraError", "OtelObserver", "require_otel"]

log = logging.getLogger("planrail")

E = EventType
INSTALL_HINT = "pip install 'planrail[otel]'"
OTEL_DATA_KEY = "otel"
"""The key of an event's ``data`` under which the observer records its span's ids."""
_TOKEN_BUCKETS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304]
_END_STATUS = {
    E.STEP_SUCCEEDED: "succeeded",
    E.STEP_DEGRADED: "degraded",
    E.STEP_FAILED: "failed",
    E.STEP_SKIPPED: "skipped",
    E.STEP_CANCELLED: "cancelled",
    E.STEP_IN_DOUBT: "in_doubt",
    E.STEP_RESTORED: "restored",
}
_STATUS_TAGS = {s: {"planrail.step.status": s} for s in _END_STATUS.values()}
"""One attribute set per step status, made once (the metric calls only read them)."""


def require_otel() -> Any:
    """The ``opentelemetry`` API modules, or :class:`MissingExtraError` with the one-line fix."""
    try:
        from opentelemetry import metrics, trace
    except ImportError:
        raise MissingExtraError(f"OpenTelemetry is not installed: {INSTALL_HINT}") from None
    return trace, metrics


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


STEP_COUNT_BATCH = 256
"""Step counts, durations and plain spans are handed to the SDK in batches of this many steps."""
FLUSH_AFTER_S = 0.1
"""...or this long after the first step of a batch ended, whichever comes first (and when the
run ends): a slow run's metrics and spans are never held back longer."""


@dataclass(slots=True)
class _Step:
    started: float | None
    """When it started here (None: it never ran — skipped, restored, in doubt)."""
    attempt: int = 1
    attempt_start: float | None = None
    """When the current attempt began; None while waiting out a retry's backoff."""
    done: list[tuple[int, float, float, Any]] = field(default_factory=list)
    """Attempts that ended: (number, start, end, error or None)."""
    retries: list[tuple[int, float, float]] = field(default_factory=list)
    """Retries scheduled: (next attempt, delay, when), events of the step span."""


@dataclass(slots=True)
class _Run:
    span: Any
    ctx: Any
    started: float
    sampled: bool
    """Whether step spans are built (see the module docstring)."""
    trace_id: str
    """The run's trace id in hex (recorded with each sampled step span's ids)."""
    direct: DirectSpans | None
    """The cheap way to emit a plain step span, where it is the SDK's own result."""
    parent: Any
    """The run span's span context (the parent of every step span)."""
    steps: dict[str, _Step] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    """Step counts by status not yet added to the ``planrail.steps`` counter."""
    counted: int = 0
    durations: list[tuple[float, str]] = field(default_factory=list)
    """Step durations (seconds, status) not yet recorded in ``planrail.step.duration``."""
    timer: Any = None
    """The loop's timer that flushes a batch begun ``FLUSH_AFTER_S`` ago (None: none)."""


class OtelObserver:
    """An :class:`~planrail.types.Observer` that turns a run's events into spans and metrics.

    Uses the global tracer and meter providers unless given others. Pass ``plan`` (or use
    :meth:`attach`) so that ``llm_call`` attempts are named after their model and tool attempts
    carry the tool's name; ``model`` is the run's default model for LLM steps that name none.
    One observer can watch several runs at once.
    """

    def __init__(
        self,
        *,
        tracer_provider: Any = None,
        meter_provider: Any = None,
        plan: Plan | None = None,
        model: str | None = None,
    ) -> None:
        trace, metrics = require_otel()
        from opentelemetry.trace import SpanKind, Status, StatusCode

        from planrail import __version__

        self._trace = trace
        self._kinds = SpanKind
        self._status = (Status, StatusCode.ERROR)
        self.tracer = trace.get_tracer("planrail", __version__, tracer_provider)
        meter = metrics.get_meter("planrail", __version__, meter_provider)
        self.plan = plan
        self.model = model
        self._runs: dict[str, _Run] = {}
        self._planner_span: Any = None
        self._m_runs = meter.create_counter("planrail.runs", "{run}", "Runs finished, by status")
        self._m_steps = meter.create_counter(
            "planrail.steps", "{step}", "Steps finished, by status"
        )
        self._m_retries = meter.create_counter(
            "planrail.retries", "{retry}", "Retries scheduled after a failed attempt"
        )
        self._m_run_s = meter.create_histogram("planrail.run.duration", "s", "Run wall time")
        self._m_step_s = meter.create_histogram(
            "planrail.step.duration", "s", "Step wall time, retries included"
        )
        self._m_tokens = meter.create_histogram(
            "gen_ai.client.token.usage",
            "{token}",
            "Tokens used by LLM steps",
            explicit_bucket_boundaries_advisory=_TOKEN_BUCKETS,
        )

    def _err(self, message: str) -> Any:
        status, error = self._status
        return status(error, message)

    def attach(self, execution: Any) -> OtelObserver:
        """Observe ``execution`` (and learn its plan)."""
        self.plan = execution.plan
        execution.observers.append(self)
        return self

    # ------------------------------------------------------------------ planner calls

    def on_planner_event(self, kind: str, data: dict[str, Any]) -> None:
        """A planner call (first plan, repair, replan) as a GenAI ``chat`` span: opened on
        ``plan_requested``, closed with its token usage on ``plan_answered`` (or with an error
        status on ``plan_invalid``/``llm_retry`` closing paths). The agent forwards these."""
        if kind == "plan_requested":
            self._planner_end(None)
            model = data.get("model") or self.model
            attrs: dict[str, Any] = {
                "gen_ai.operation.name": "chat",
                "planrail.planner.kind": str(data.get("kind", "plan")),
                "planrail.planner.attempt": int(data.get("attempt", 1)),
            }
            if model:
                attrs["gen_ai.request.model"] = str(model)
            name = f"chat {model}" if model else "chat"
            start = data.get("at")
            self._planner_span = self.tracer.start_span(
                name,
                kind=self._kinds.CLIENT,
                attributes=attrs,
                start_time=_ns(start) if isinstance(start, int | float) else None,
            )
        elif kind == "plan_answered" and self._planner_span is not None:
            usage = data.get("usage") or {}
            for key in ("input_tokens", "output_tokens"):
                if isinstance(usage.get(key), int):
                    self._planner_span.set_attribute(f"gen_ai.usage.{key}", usage[key])
            self._planner_end(data.get("at"))

    def _planner_end(self, at: Any) -> None:
        span, self._planner_span = self._planner_span, None
        if span is not None:
            span.end(end_time=_ns(at) if isinstance(at, int | float) else None)

    # ------------------------------------------------------------------ events

    def on_event(self, event: Event) -> None:
        kind = event.type
        if kind == E.RUN_STARTED:
            self._run_started(event)
            return
        run = self._runs.get(event.run_id)
        if run is None:
            return
        if kind == E.RUN_FINISHED:
            self._run_finished(run, event)
        elif event.step_id is None:
            return
        elif kind == E.STEP_STARTED:
            self._step_started(run, event)
        elif kind == E.ATTEMPT_FAILED:
            step = run.steps.get(event.step_id)
            if step is not None:
                step.attempt = event.attempt or step.attempt
                took = event.data.get("duration")
                if isinstance(took, int | float) and step.attempt_start is not None:
                    step.attempt_start = max(step.attempt_start, event.at - took)
                self._end_attempt(step, event.at, event.data.get("error"), None)
        elif kind == E.RETRY_SCHEDULED:
            self._retry(run, event)
        elif kind in _END_STATUS:
            self._step_ended(run, event, _END_STATUS[kind])

    def _run_started(self, event: Event) -> None:
        attrs: dict[str, Any] = {
            "planrail.run_id": event.run_id,
            "planrail.steps": int(event.data.get("steps", 0)),
            "planrail.resumed": bool(event.data.get("resumed", False)),
        }
        if event.data.get("plan_hash"):
            attrs["planrail.plan_hash"] = event.data["plan_hash"]
        span = self.tracer.start_span("planrail.run", attributes=attrs, start_time=_ns(event.at))
        ctx = self._trace.set_span_in_context(span)
        ids = span.get_span_context()
        trace_id = format(ids.trace_id, "032x")
        if ids.trace_flags.sampled:
            event.data[OTEL_DATA_KEY] = {
                "trace_id": trace_id,
                "span_id": format(ids.span_id, "016x"),
            }
        sampled = children_sampled(self.tracer, span)
        direct = DirectSpans.under(self.tracer, span) if sampled else None
        self._runs[event.run_id] = _Run(span, ctx, event.at, sampled, trace_id, direct, ids)

    def _count(self, run: _Run, status: str) -> None:
        run.counts[status] = run.counts.get(status, 0) + 1
        run.counted += 1
        if run.counted >= STEP_COUNT_BATCH:
            self._flush(run)
        elif run.timer is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # events fed from outside a loop: batches, and the run's end
                return
            run.timer = loop.call_later(FLUSH_AFTER_S, self._flush, run)

    def _flush(self, run: _Run) -> None:
        """Hand the batched spans, step counts and durations to the SDK."""
        if run.timer is not None:
            run.timer.cancel()
            run.timer = None
        if run.direct is not None:
            run.direct.flush()
        for status, n in run.counts.items():
            self._m_steps.add(n, _tags(status))
        run.counts.clear()
        run.counted = 0
        record = self._m_step_s.record
        for took, status in run.durations:
            record(took, _tags(status))
        run.durations.clear()

    def _run_finished(self, run: _Run, event: Event) -> None:
        status = str(event.data.get("status") or "unknown")
        for sid, step in list(run.steps.items()):  # still running: the run was cancelled
            self._close_step(run, sid, step, event, "cancelled", {})
        self._flush(run)
        run.span.set_attribute("planrail.run.status", status)
        if event.data.get("error"):
            run.span.set_attribute("planrail.run.error", str(event.data["error"]))
        if status != "succeeded":
            run.span.set_status(self._err(str(event.data.get("error") or status)))
        run.span.end(end_time=_ns(event.at))
        self._m_runs.add(1, {"planrail.run.status": status})
        self._m_run_s.record(max(event.at - run.started, 0.0), {"planrail.run.status": status})
        del self._runs[event.run_id]

    def _attrs(self, event: Event, sid: str, attempt: int | None = None) -> dict[str, Any]:
        attrs: dict[str, Any] = {
            "planrail.run_id": event.run_id,
            "planrail.step_id": sid,
            "planrail.idempotency_key": step_key(event.run_id, sid),
        }
        if attempt is not None:
            attrs["planrail.attempt"] = attempt
        step = self.plan.by_id.get(sid) if self.plan is not None else None
        if step is not None:
            attrs["planrail.action"] = step.action
            if step.tool:
                attrs["planrail.tool"] = step.tool
        return attrs

    def _step_started(self, run: _Run, event: Event) -> None:
        # Nothing for the SDK yet: the span is made when the step ends, with this start time.
        run.steps[event.step_id or ""] = _Step(event.at, event.attempt or 1, event.at)

    def _retry(self, run: _Run, event: Event) -> None:
        step = run.steps.get(event.step_id or "")
        if step is None:
            return
        delay = float(event.data.get("delay") or 0.0)
        step.attempt += 1
        step.attempt_start = event.at + delay
        step.retries.append((step.attempt, delay, event.at))
        self._m_retries.add(1)

    def _end_attempt(self, step: _Step, at: float, error: Any, status: str | None) -> None:
        """Note the attempt that just ended (if one was under way); spans are made at the end."""
        start, step.attempt_start = step.attempt_start, None
        if start is None or (status == "cancelled" and start > at):
            return  # no attempt under way (cancelled while waiting out a backoff)
        step.done.append((step.attempt, min(start, at), at, error))

    def _attempt_spans(
        self, event: Event, sid: str, step: _Step, span: Any, usage: dict[str, Any], status: str
    ) -> None:
        """A child span per attempt — when there were retries, or for an LLM call (a GenAI
        span). A lone tool attempt is the step span itself: half the spans on big plans."""
        model = self._model(sid, event)
        llm = model is not None or bool(usage)
        if not llm and len(step.done) <= 1:
            for _, _, at, error in step.done:
                if isinstance(error, dict):
                    span.add_event("exception", _exception(error), timestamp=_ns(at))
            return
        parent = self._trace.set_span_in_context(span)
        for i, (n, start, end, error) in enumerate(step.done):
            last = i == len(step.done) - 1
            attrs = self._attrs(event, sid, n)
            if llm:
                attrs["gen_ai.operation.name"] = "chat"
                if model:
                    attrs["gen_ai.request.model"] = model
                if event.data.get("provider"):
                    attrs["gen_ai.provider.name"] = event.data["provider"]
                for key in ("input_tokens", "output_tokens"):
                    if last and key in usage:
                        attrs[f"gen_ai.usage.{key}"] = int(usage[key])
            if last:
                attrs["planrail.attempt.status"] = status
            if isinstance(error, dict):
                attrs["error.type"] = str(error.get("type", "Error"))
            child = self.tracer.start_span(
                (f"chat {model}" if model else "chat") if llm else "planrail.attempt",
                context=parent,
                kind=self._kinds.CLIENT if llm else self._kinds.INTERNAL,
                attributes=attrs,
                start_time=_ns(start),
            )
            if isinstance(error, dict):
                child.add_event("exception", _exception(error), timestamp=_ns(end))
                child.set_status(self._err(str(error.get("message", ""))))
            child.end(end_time=_ns(end))

    def _model(self, sid: str, event: Event) -> str | None:
        if event.data.get("model"):
            return str(event.data["model"])
        step = self.plan.by_id.get(sid) if self.plan is not None else None
        if step is None or step.action != "llm_call":
            return None
        return step.model or self.model or ""

    def _step_ended(self, run: _Run, event: Event, status: str) -> None:
        sid = event.step_id or ""
        step = run.steps.pop(sid, None)
        if step is None:  # never started here: skipped, restored or in doubt
            step = _Step(None, event.attempt or 0, None)
        self._close_step(run, sid, step, event, status, event.data)

    def _close_step(
        self, run: _Run, sid: str, step: _Step, event: Event, status: str, data: dict[str, Any]
    ) -> None:
        run.steps.pop(sid, None)
        error, usage = data.get("error"), data.get("usage") or {}
        self._end_attempt(step, event.at, error, status)
        if run.sampled:
            self._step_span(run, sid, step, event, status, data, error, usage)
        if step.started is not None:
            run.durations.append((max(event.at - step.started, 0.0), status))
        self._count(run, status)
        if usage:
            model = self._model(sid, event)
            for key, kind in (("input_tokens", "input"), ("output_tokens", "output")):
                if key in usage:
                    tags = {"gen_ai.token.type": kind, "gen_ai.operation.name": "chat"}
                    if model:
                        tags["gen_ai.request.model"] = model
                    self._m_tokens.record(int(usage[key]), tags)

    def _step_span(
        self,
        run: _Run,
        sid: str,
        step: _Step,
        event: Event,
        status: str,
        data: dict[str, Any],
        error: Any,
        usage: dict[str, Any],
    ) -> None:
        """The step's span, made at its end with its recorded start and every attribute."""
        attempts = event.attempt or step.attempt
        started = _ns(event.at if step.started is None else step.started)
        attrs = self._attrs(event, sid, attempts if attempts else None)
        attrs["planrail.step.status"] = status
        if data.get("reason"):
            attrs["planrail.reason"] = str(data["reason"])
        if isinstance(error, dict):
            attrs["error.type"] = str(error.get("type", "Error"))
        failed = None
        if status in ("failed", "in_doubt"):
            message = error.get("message") if isinstance(error, dict) else data.get("reason")
            failed = self._err(str(message or status))
        name = f"planrail.step {sid}"
        if run.direct is not None and self._plain(sid, step, event, usage):
            ids = run.direct.span(name, run.parent, attrs, started, _ns(event.at), failed)
        else:
            span = self.tracer.start_span(
                name, context=run.ctx, attributes=attrs, start_time=started
            )
            self._fill(span, sid, step, event, usage, status, failed)
            ids = span.get_span_context()
        if event.step_id == sid and ids.trace_flags.sampled:  # the step's own final event
            event.data[OTEL_DATA_KEY] = {
                "trace_id": run.trace_id,
                "span_id": format(ids.span_id, "016x"),
            }

    def _plain(self, sid: str, step: _Step, event: Event, usage: dict[str, Any]) -> bool:
        """Whether the step span has no events and no children: one attempt, no error, no LLM."""
        if step.retries or len(step.done) > 1 or usage:
            return False
        if step.done and isinstance(step.done[0][3], dict):
            return False
        return self._model(sid, event) is None

    def _fill(
        self,
        span: Any,
        sid: str,
        step: _Step,
        event: Event,
        usage: dict[str, Any],
        status: str,
        failed: Any,
    ) -> None:
        """A step span made by the SDK: its retry events, attempts and status, then its end."""
        for attempt, delay, at in step.retries:
            span.add_event(
                "planrail.retry_scheduled",
                {"planrail.attempt": attempt, "planrail.retry.delay": delay},
                timestamp=_ns(at),
            )
        self._attempt_spans(event, sid, step, span, usage, status)
        if failed is not None:
            span.set_status(failed)
        span.end(end_time=_ns(event.at))


def _tags(status: str) -> dict[str, str]:
    """The metric attributes of a step status (made once per status)."""
    tags = _STATUS_TAGS.get(status)
    return tags if tags is not None else {"planrail.step.status": status}


def _exception(error: dict[str, Any]) -> dict[str, Any]:
    return {
        "exception.type": str(error.get("type", "Error")),
        "exception.message": str(error.get("message", "")),
        "planrail.retryable": bool(error.get("retryable", False)),
    }
