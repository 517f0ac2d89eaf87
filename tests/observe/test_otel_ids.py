"""The OpenTelemetry ids a traced run stores with its events, read back by another store handle
(as another process, `planrail show` or the dashboard would), against the spans the SDK
exported."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from planrail.cli import app
from planrail.observe.otel import OTEL_DATA_KEY, OtelObserver
from planrail.observe.view import RunView, trace_ids
from planrail.store import open_store

from .helpers import RUN, Otel, make_execution, run


def _hex(value: int, digits: int) -> str:
    return format(value, f"0{digits}x")


def _stored(url: str) -> list[tuple[str, str | None, dict[str, Any]]]:
    with open_store(url) as other:  # a second handle: what another process reads
        return [(e.type, e.step_id, e.data) for e in other.events(RUN)]


def test_a_traced_run_stores_its_trace_id_and_each_steps_span_id(
    otel: Otel, tmp_path: Path
) -> None:
    """The trace id stored with the run is the exported spans' trace id, the run span's id is
    stored with it, and each step's stored span id is the id of its exported step span;
    `planrail show --step` prints them."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with open_store(url) as store:
        execution = make_execution(store=store)
        OtelObserver(
            tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider
        ).attach(execution)
        result = run(execution)
    events = _stored(url)
    run_span = otel.by_name("planrail.run")
    trace_id = _hex(run_span.context.trace_id, 32)
    assert {_hex(s.context.trace_id, 32) for s in otel.spans()} == {trace_id}
    assert trace_ids(events) == {
        "trace_id": trace_id,
        "span_id": _hex(run_span.context.span_id, 16),
    }
    assert set(result.steps) == {"retry", "fail", "skip", "ask", "auth"}
    for sid in result.steps:
        span = otel.by_name(f"planrail.step {sid}")
        assert trace_ids(events, sid) == {
            "trace_id": trace_id,
            "span_id": _hex(span.context.span_id, 16),
        }, sid
    with open_store(url) as other:
        view = RunView.from_store(other, RUN)
    assert view is not None
    assert view.step_detail("retry")["trace"] == trace_ids(events, "retry")  # type: ignore[index]
    shown = CliRunner().invoke(app, ["show", RUN, "--step", "retry", "--store", url])
    assert shown.exit_code == 0, shown.output
    retry_span = _hex(otel.by_name("planrail.step retry").context.span_id, 16)
    assert f"trace       {trace_id}  span {retry_span}" in shown.output


def test_nothing_is_stored_when_nothing_samples(tmp_path: Path) -> None:
    """A run whose spans are not sampled stores no ids (none that no backend holds)."""
    pytest.importorskip("opentelemetry.sdk", reason="needs the [otel] extra")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

    provider = TracerProvider(sampler=ALWAYS_OFF, shutdown_on_exit=False)
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with open_store(url) as store:
        execution = make_execution(store=store)
        OtelObserver(tracer_provider=provider).attach(execution)
        assert run(execution).steps["retry"].status == "succeeded"
    events = _stored(url)
    assert events
    assert all(OTEL_DATA_KEY not in data for _, _, data in events)
    assert trace_ids(events) is None
    assert trace_ids(events, "retry") is None


def _ids(trace: str, span: str) -> dict[str, Any]:
    return {OTEL_DATA_KEY: {"trace_id": trace, "span_id": span}}


def test_a_resumed_run_keeps_the_span_of_the_execution_that_ran_each_step() -> None:
    """A step restored on resume keeps the span of the execution that ran it; one that ran
    again gets the new one; one with no outcome yet shows the latest execution's trace."""
    events = [
        ("run_started", None, _ids("t1", "r1")),
        ("step_succeeded", "a", _ids("t1", "a1")),
        ("step_failed", "b", _ids("t1", "b1")),
        ("run_finished", None, {}),
        ("run_started", None, _ids("t2", "r2")),
        ("step_restored", "a", _ids("t2", "a2")),
        ("step_started", "b", {}),
        ("step_succeeded", "b", _ids("t2", "b2")),
        ("step_started", "c", {}),
    ]
    assert trace_ids(events, "a") == {"trace_id": "t1", "span_id": "a1"}
    assert trace_ids(events, "b") == {"trace_id": "t2", "span_id": "b2"}
    assert trace_ids(events, "c") == {"trace_id": "t2"}
    assert trace_ids(events) == {"trace_id": "t2", "span_id": "r2"}
    only_restored = [
        ("run_started", None, _ids("t3", "r3")),
        ("step_restored", "a", _ids("t3", "a3")),
    ]
    assert trace_ids(only_restored, "a") == {"trace_id": "t3", "span_id": "a3"}
