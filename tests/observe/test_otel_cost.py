"""What tracing costs: no per-step tracer call when nothing can sample a step span, and plain step
spans handed to the span processors finished — exactly the spans the SDK's own ``start_span`` +
``end`` would have exported (names, attributes, parents, times, status, scope)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from planrail.engine.events import EventType
from planrail.observe.otel import OtelObserver

from .helpers import RUN, Otel, ev, make_plan, make_tools, otel_setup
from .test_otel import retry_failure_skip_llm

E = EventType
SpanProcessor = pytest.importorskip("opentelemetry.sdk.trace", reason="needs [otel]").SpanProcessor


def plain_run(n: int = 3) -> list[Any]:
    """``n`` tool steps that each ran once and succeeded, one that failed once, the run's end."""
    bad = {"type": "ValueError", "message": "bad input", "retryable": False}
    events = [ev(E.RUN_STARTED, 10.0, steps=n + 1, resumed=False)]
    for i in range(n):
        events.append(ev(E.STEP_STARTED, 10.0 + i, f"s{i}", 1))
        events.append(ev(E.STEP_SUCCEEDED, 10.5 + i, f"s{i}", 1, duration=0.5))
    events.append(ev(E.STEP_STARTED, 20.0, "bad", 1))
    events.append(ev(E.STEP_FAILED, 20.25, "bad", 1, duration=0.25, error=bad))
    events.append(ev(E.RUN_FINISHED, 21.0, status="failed", error=None))
    return events


class Counting:
    """Counts ``start_span`` calls on an SDK tracer (set on the instance: its type is kept)."""

    def __init__(self, tracer: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        self.names: list[str] = []
        real = tracer.start_span

        def start_span(name: str, *args: Any, **kwargs: Any) -> Any:
            self.names.append(name)
            return real(name, *args, **kwargs)

        monkeypatch.setattr(tracer, "start_span", start_span)


class Starts(SpanProcessor):  # type: ignore[misc]
    """A span processor that needs ``on_start``: the observer must not bypass it."""

    def __init__(self) -> None:
        self.started: list[str] = []

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        self.started.append(span.name)


@pytest.fixture
def other() -> Iterator[Otel]:
    """A second in-memory SDK setup, to compare two observers' spans."""
    yield from otel_setup()


def observer(otel: Otel, **kw: Any) -> OtelObserver:
    return OtelObserver(
        tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider, **kw
    )


def feed(obs: OtelObserver, events: list[Any]) -> None:
    for e in events:
        obs.on_event(e)


def shapes(otel: Otel) -> list[tuple[Any, ...]]:
    """Every exported span without its random ids: parents by name, all else as exported."""
    spans = otel.spans()
    names = {s.context.span_id: s.name for s in spans}
    (trace,) = {s.context.trace_id for s in spans}
    out = []
    for s in spans:
        assert s.parent is None or s.parent.trace_id == trace
        out.append(
            (
                s.name,
                s.kind,
                None if s.parent is None else names[s.parent.span_id],
                dict(s.attributes),
                [(e.name, dict(e.attributes), e.timestamp) for e in s.events],
                (s.status.status_code, s.status.description),
                (s.start_time, s.end_time),
                dict(s.resource.attributes),
                s.instrumentation_scope,
                (s.context.trace_flags, s.context.trace_state, s.context.is_remote),
                (s.dropped_attributes, s.dropped_events, s.dropped_links, tuple(s.links)),
            )
        )
    return sorted(out, key=lambda shape: (shape[0], shape[6]))


@pytest.mark.parametrize("events", [plain_run, retry_failure_skip_llm], ids=["plain", "mixed"])
def test_direct_spans_are_the_sdks_own(
    otel: Otel, other: Otel, monkeypatch: pytest.MonkeyPatch, events: Any
) -> None:
    """The same events, once with plain step spans handed over finished and once through
    ``start_span`` (a processor that needs ``on_start`` forces that): identical spans. Only the
    steps with events or children (retries, an error, an LLM call) went through ``start_span``."""
    tools = make_tools()
    fast = observer(otel, plan=make_plan(tools))
    calls = Counting(fast.tracer, monkeypatch)
    starts = Starts()
    other.tracer_provider.add_span_processor(starts)
    slow = observer(other, plan=make_plan(tools))
    feed(fast, events())
    feed(slow, events())
    assert shapes(otel) == shapes(other)
    assert len(otel.spans()) == len(other.spans()) > 1
    if events is plain_run:
        assert calls.names == ["planrail.run", "planrail.step bad"]  # bad has an exception event
    else:
        assert "planrail.step skip" not in calls.names
        assert {"planrail.step retry", "planrail.step ask"} <= set(calls.names)
    assert sorted(starts.started) == sorted(s.name for s in other.spans())


def test_direct_step_spans_are_children_of_the_run_with_the_events_times(otel: Otel) -> None:
    """A plain step span: parent the run span, same trace, start and end from its events, the
    step's attributes, and its id stored with its final event."""
    events = plain_run(2)
    feed(observer(otel, plan=make_plan(make_tools())), events)
    run = otel.by_name("planrail.run")
    step = otel.by_name("planrail.step s1")
    assert step.parent.span_id == run.context.span_id
    assert step.context.trace_id == run.context.trace_id
    assert (step.start_time, step.end_time) == (11_000_000_000, 11_500_000_000)
    assert dict(step.attributes) == {
        "planrail.run_id": RUN,
        "planrail.step_id": "s1",
        "planrail.idempotency_key": f"{RUN}:s1",
        "planrail.attempt": 1,
        "planrail.step.status": "succeeded",
    }
    assert step.status.status_code.name == "UNSET"
    final = next(e for e in events if e.step_id == "s1" and e.type == E.STEP_SUCCEEDED)
    assert final.data["otel"]["span_id"] == format(step.context.span_id, "016x")


def _samplers() -> list[Any]:
    from opentelemetry.sdk.trace.sampling import (
        ALWAYS_OFF,
        ParentBased,
        ParentBasedTraceIdRatio,
    )

    return [ALWAYS_OFF, ParentBased(ALWAYS_OFF), ParentBasedTraceIdRatio(0.0)]


@pytest.mark.parametrize("which", range(3), ids=["always_off", "parentbased_off", "ratio_0"])
def test_a_run_nothing_samples_makes_no_step_span(
    monkeypatch: pytest.MonkeyPatch, which: int
) -> None:
    """Sampled out (or everything dropped): one tracer call for the run span, then none per
    step; nothing exported, no ids stored; the step metrics are still counted."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider

    provider = TracerProvider(sampler=_samplers()[which], shutdown_on_exit=False)
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
    obs = OtelObserver(tracer_provider=provider, meter_provider=meters)
    calls = Counting(obs.tracer, monkeypatch)
    events = plain_run(5)
    feed(obs, events)
    assert calls.names == ["planrail.run"]
    assert all("otel" not in e.data for e in events)
    points = [
        (dict(p.attributes), p.value)
        for rm in reader.get_metrics_data().resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == "planrail.steps"
        for p in m.data.data_points
    ]
    assert sorted(points, key=str) == [
        ({"planrail.step.status": "failed"}, 1),
        ({"planrail.step.status": "succeeded"}, 5),
    ]


def test_a_sampler_that_records_children_of_an_unsampled_run_gets_them(other: Otel) -> None:
    """``ParentBased`` set to sample children of an unsampled local parent: the run span is not
    sampled, the step spans are (through ``start_span``: the run span is not recording)."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, ParentBased

    provider = TracerProvider(
        sampler=ParentBased(ALWAYS_OFF, local_parent_not_sampled=ALWAYS_ON),
        shutdown_on_exit=False,
    )
    provider.add_span_processor(SimpleSpanProcessor(other.spans_exporter))
    feed(OtelObserver(tracer_provider=provider), plain_run(2))
    assert sorted(s.name for s in other.spans()) == [
        "planrail.step bad",
        "planrail.step s0",
        "planrail.step s1",
    ]


def test_an_attribute_length_limit_is_applied(other: Otel) -> None:
    """A span-attribute length limit: spans go through the SDK, which truncates."""
    from opentelemetry.sdk.trace import SpanLimits, TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider(
        span_limits=SpanLimits(max_span_attribute_length=4), shutdown_on_exit=False
    )
    provider.add_span_processor(SimpleSpanProcessor(other.spans_exporter))
    feed(OtelObserver(tracer_provider=provider), plain_run(1))
    step = other.by_name("planrail.step s0")
    assert step.attributes["planrail.step.status"] == "succ"
    assert step.attributes["planrail.run_id"] == RUN[:4]
