"""OpenTelemetry: the span tree, its attributes and the metrics, from synthetic event sequences
(exact, whatever the step runner emits today) and from real runs."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest

from planrail.engine.events import Event, EventType
from planrail.observe.otel import (
    FLUSH_AFTER_S,
    STEP_COUNT_BATCH,
    MissingExtraError,
    OtelObserver,
)
from planrail.observe.otel_config import _exporter, configure_from_env

from .helpers import MODEL, RUN, Otel, Recorder, ev, make_execution, make_plan, make_tools, run

E = EventType


def observer(otel: Otel, **kw: Any) -> OtelObserver:
    return OtelObserver(
        tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider, **kw
    )


def feed(obs: OtelObserver, *events: Any) -> None:
    for e in events:
        obs.on_event(e)


def retry_failure_skip_llm() -> list[Any]:
    """A run where ``retry`` fails once and is retried after 0.5 s, ``fail`` fails, ``skip`` is
    skipped because of it, and ``ask`` calls an LLM."""
    err = {"type": "RetryableError", "message": "upstream busy", "retryable": True}
    bad = {"type": "ValueError", "message": "bad input", "retryable": False}
    return [
        ev(E.RUN_STARTED, 100.0, steps=4, resumed=False),
        ev(E.STEP_STARTED, 100.0, "retry", 1),
        ev(E.STEP_STARTED, 100.0, "fail", 1),
        ev(E.ATTEMPT_FAILED, 100.25, "retry", 1, error=err),
        ev(E.RETRY_SCHEDULED, 100.25, "retry", 1, delay=0.5),
        ev(E.STEP_FAILED, 100.5, "fail", 1, duration=0.5, error=bad),
        ev(E.STEP_SKIPPED, 100.5, "skip", reason="dependency 'fail' failed"),
        ev(E.STEP_SUCCEEDED, 101.0, "retry", 2, duration=1.0),
        ev(E.STEP_STARTED, 101.0, "ask", 1),
        ev(
            E.STEP_SUCCEEDED,
            102.0,
            "ask",
            1,
            duration=1.0,
            usage={"input_tokens": 12, "output_tokens": 5},
        ),
        ev(E.RUN_FINISHED, 102.0, status="failed", error=None),
    ]


def test_span_tree_for_retry_failure_skip_and_llm_call(otel: Otel) -> None:
    """One run span; a step span per step under it; an attempt span per attempt of the retried
    step; the LLM attempt is a GenAI ``chat {model}`` client span; a tool step that ran once is
    its own attempt (no child)."""
    tools = make_tools()
    feed(observer(otel, plan=make_plan(tools)), *retry_failure_skip_llm())
    run = otel.by_name("planrail.run")
    assert run.parent is None
    steps = {s.name for s in otel.children(run)}
    assert steps == {
        "planrail.step retry",
        "planrail.step fail",
        "planrail.step skip",
        "planrail.step ask",
    }
    retry = otel.by_name("planrail.step retry")
    attempts = sorted(otel.children(retry), key=lambda s: s.start_time)
    assert [a.name for a in attempts] == ["planrail.attempt", "planrail.attempt"]
    assert [a.attributes["planrail.attempt"] for a in attempts] == [1, 2]
    assert otel.children(otel.by_name("planrail.step skip")) == []
    assert [s.name for s in otel.children(otel.by_name("planrail.step ask"))] == [f"chat {MODEL}"]
    assert otel.children(otel.by_name("planrail.step fail")) == []
    assert len(otel.spans()) == 1 + 4 + 2 + 1  # run, steps, attempts of retry, ask's chat


def test_attempt_spans_carry_real_times_and_the_backoff_gap(otel: Otel) -> None:
    """The first attempt ends when it failed; the second starts when the backoff is over."""
    feed(observer(otel), *retry_failure_skip_llm())
    first, second = sorted(
        otel.children(otel.by_name("planrail.step retry")), key=lambda s: s.start_time
    )
    assert (first.start_time, first.end_time) == (100_000_000_000, 100_250_000_000)
    assert (second.start_time, second.end_time) == (100_750_000_000, 101_000_000_000)
    assert first.status.status_code.name == "ERROR"
    assert first.attributes["error.type"] == "RetryableError"
    assert [e.name for e in first.events] == ["exception"]
    assert first.events[0].attributes["exception.message"] == "upstream busy"
    assert second.status.status_code.name == "UNSET"
    step = otel.by_name("planrail.step retry")
    assert [(e.name, e.attributes["planrail.retry.delay"]) for e in step.events] == [
        ("planrail.retry_scheduled", 0.5)
    ]
    assert step.attributes["planrail.attempt"] == 2


def test_planrail_attributes_on_every_span(otel: Otel) -> None:
    """run_id everywhere; step_id, attempt and idempotency key on step and attempt spans."""
    feed(observer(otel), *retry_failure_skip_llm())
    for span in otel.spans():
        assert span.attributes["planrail.run_id"] == RUN
        if span.name != "planrail.run":
            sid = span.attributes["planrail.step_id"]
            assert span.attributes["planrail.idempotency_key"] == f"{RUN}:{sid}"
            if span.name != "planrail.step skip":
                assert span.attributes["planrail.attempt"] >= 1


def test_failure_and_skip_statuses(otel: Otel) -> None:
    """A failed step is an ERROR span with the error type and an exception event; a skipped one
    says why, and the run span records the run's status."""
    feed(observer(otel), *retry_failure_skip_llm())
    fail = otel.by_name("planrail.step fail")
    assert fail.status.status_code.name == "ERROR"
    assert fail.status.description == "bad input"
    assert fail.attributes["error.type"] == "ValueError"
    assert fail.attributes["planrail.step.status"] == "failed"
    assert [e.attributes["exception.type"] for e in fail.events] == ["ValueError"]
    skip = otel.by_name("planrail.step skip")
    assert skip.attributes["planrail.step.status"] == "skipped"
    assert skip.attributes["planrail.reason"] == "dependency 'fail' failed"
    assert skip.start_time == skip.end_time == 100_500_000_000
    run = otel.by_name("planrail.run")
    assert run.attributes["planrail.run.status"] == "failed"
    assert run.status.status_code.name == "ERROR"
    assert (run.start_time, run.end_time) == (100_000_000_000, 102_000_000_000)


def test_llm_span_follows_genai_conventions(otel: Otel) -> None:
    """gen_ai.operation.name, gen_ai.request.model and gen_ai.usage.* on a CLIENT span."""
    tools = make_tools()
    feed(observer(otel, plan=make_plan(tools)), *retry_failure_skip_llm())
    chat = otel.by_name(f"chat {MODEL}")
    assert chat.kind.name == "CLIENT"
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.request.model"] == MODEL
    assert chat.attributes["gen_ai.usage.input_tokens"] == 12
    assert chat.attributes["gen_ai.usage.output_tokens"] == 5
    assert chat.attributes["planrail.action"] == "llm_call"


def test_metrics_by_status_retries_durations_tokens(otel: Otel) -> None:
    """Counters by status, the retry count, duration histograms and GenAI token usage."""
    feed(observer(otel, model=MODEL), *retry_failure_skip_llm())
    m = otel.metrics()
    steps = {a["planrail.step.status"]: p.value for a, p in m["planrail.steps"]}
    assert steps == {"succeeded": 2, "failed": 1, "skipped": 1}
    assert [p.value for _, p in m["planrail.retries"]] == [1]
    assert [(a, p.value) for a, p in m["planrail.runs"]] == [({"planrail.run.status": "failed"}, 1)]
    durations = {
        a["planrail.step.status"]: (p.count, p.sum) for a, p in m["planrail.step.duration"]
    }
    assert durations == {"succeeded": (2, 2.0), "failed": (1, 0.5)}
    assert [(p.count, p.sum) for _, p in m["planrail.run.duration"]] == [(1, 2.0)]
    tokens = {a["gen_ai.token.type"]: p.sum for a, p in m["gen_ai.client.token.usage"]}
    assert tokens == {"input": 12, "output": 5}


def test_step_counts_and_durations_reach_the_sdk_in_batches_and_all_by_the_end(
    otel: Otel,
) -> None:
    """One more than a batch of steps: the first batch's counts and durations are handed to
    the SDK once it is full (none before), the rest when the run ends — every step's value once,
    with its status."""
    obs = observer(otel)
    n = STEP_COUNT_BATCH + 1
    feed(obs, ev(E.RUN_STARTED, 0.0, steps=n, resumed=False))

    def seen() -> tuple[dict[str, int], dict[str, tuple[int, float]]]:
        m = otel.metrics()
        counts = {a["planrail.step.status"]: p.value for a, p in m.get("planrail.steps", [])}
        took = m.get("planrail.step.duration", [])
        return counts, {a["planrail.step.status"]: (p.count, p.sum) for a, p in took}

    for i in range(n):
        status = E.STEP_FAILED if i % 2 else E.STEP_SUCCEEDED
        feed(obs, ev(E.STEP_STARTED, float(i), f"s{i}", 1), ev(status, i + 0.25, f"s{i}", 1))
        if i == STEP_COUNT_BATCH - 2:
            assert seen() == ({}, {}), "nothing before the batch is full"
    half = STEP_COUNT_BATCH // 2
    assert seen() == (
        {"succeeded": half, "failed": half},
        {"succeeded": (half, half * 0.25), "failed": (half, half * 0.25)},
    )
    feed(obs, ev(E.RUN_FINISHED, float(n), status="failed", error=None))
    assert seen() == (
        {"succeeded": half + 1, "failed": half},
        {"succeeded": (half + 1, (half + 1) * 0.25), "failed": (half, half * 0.25)},
    )


@pytest.mark.looptime
async def test_a_slow_run_hands_each_batch_over_within_the_flush_delay(otel: Otel) -> None:
    """A step ends and the next is far off: its span, count and duration reach the SDK
    ``FLUSH_AFTER_S`` later (the run's loop's time), not at the next batch or the run's end."""
    obs = observer(otel)
    feed(obs, ev(E.RUN_STARTED, 0.0, steps=2, resumed=False))
    feed(obs, ev(E.STEP_STARTED, 0.0, "a", 1), ev(E.STEP_SUCCEEDED, 2.0, "a", 1))
    assert [s.name for s in otel.spans()] == []
    await asyncio.sleep(FLUSH_AFTER_S)
    assert [s.name for s in otel.spans()] == ["planrail.step a"]
    m = otel.metrics()
    assert [(p.count, p.sum) for _, p in m["planrail.step.duration"]] == [(1, 2.0)]
    assert [p.value for _, p in m["planrail.steps"]] == [1]
    feed(obs, ev(E.STEP_STARTED, 60.0, "b", 1), ev(E.STEP_SUCCEEDED, 61.0, "b", 1))
    feed(obs, ev(E.RUN_FINISHED, 61.0, status="succeeded", error=None))
    assert [s.name for s in otel.spans()] == ["planrail.step a", "planrail.step b", "planrail.run"]


def test_cancelled_during_backoff_has_no_phantom_attempt(otel: Otel) -> None:
    """A step cancelled while waiting to retry has one attempt span, not two."""
    err = {"type": "RetryableError", "message": "busy", "retryable": True}
    feed(
        observer(otel),
        ev(E.RUN_STARTED, 0.0),
        ev(E.STEP_STARTED, 0.0, "a", 1),
        ev(E.ATTEMPT_FAILED, 1.0, "a", 1, error=err),
        ev(E.RETRY_SCHEDULED, 1.0, "a", 1, delay=5.0),
        ev(E.STEP_CANCELLED, 2.0, "a", 1, reason="the run was cancelled"),
        ev(E.RUN_FINISHED, 2.0, status="cancelled", error=None),
    )
    step = otel.by_name("planrail.step a")
    assert otel.children(step) == []  # one attempt only: the step span is the attempt
    assert [e.name for e in step.events] == ["planrail.retry_scheduled", "exception"]


def test_steps_still_running_at_the_end_are_closed_as_cancelled(otel: Otel) -> None:
    """A run that stops with a step in flight still exports a finished step span."""
    feed(
        observer(otel),
        ev(E.RUN_STARTED, 0.0),
        ev(E.STEP_STARTED, 0.0, "a", 1),
        ev(E.RUN_FINISHED, 3.0, status="cancelled", error="interrupted"),
    )
    step = otel.by_name("planrail.step a")
    assert step.attributes["planrail.step.status"] == "cancelled"
    assert step.end_time == 3_000_000_000
    assert otel.by_name("planrail.run").attributes["planrail.run.error"] == "interrupted"


def test_restored_and_in_doubt_steps_get_zero_length_spans(otel: Otel) -> None:
    """A resumed run shows restored and in-doubt steps, without attempts."""
    feed(
        observer(otel),
        ev(E.RUN_STARTED, 0.0, resumed=True),
        ev(E.STEP_RESTORED, 0.0, "a", 1),
        ev(E.STEP_IN_DOUBT, 0.0, "b", reason="decide with planrail resolve"),
        ev(E.RUN_FINISHED, 0.0, status="failed", error="in doubt: b"),
    )
    assert otel.by_name("planrail.step a").attributes["planrail.step.status"] == "restored"
    doubt = otel.by_name("planrail.step b")
    assert doubt.status.status_code.name == "ERROR"
    assert otel.by_name("planrail.run").attributes["planrail.resumed"] is True
    assert [s.name for s in otel.spans() if "attempt" in s.name] == []


def test_one_observer_watches_interleaved_runs(otel: Otel) -> None:
    """Spans of two runs observed at once land in two separate traces."""
    obs = observer(otel)
    for rid in ("r1", "r2"):
        obs.on_event(Event(E.RUN_STARTED, rid, 0.0))
    for rid in ("r1", "r2"):
        obs.on_event(Event(E.STEP_STARTED, rid, 1.0, "a", 1))
    for rid in ("r2", "r1"):
        obs.on_event(Event(E.STEP_SUCCEEDED, rid, 2.0, "a", 1))
        obs.on_event(Event(E.RUN_FINISHED, rid, 3.0, data={"status": "succeeded"}))
    traces = {s.context.trace_id for s in otel.spans()}
    assert len(traces) == 2
    for span in otel.spans():
        same = [s for s in otel.spans() if s.context.trace_id == span.context.trace_id]
        assert {s.attributes["planrail.run_id"] for s in same} == {
            span.attributes["planrail.run_id"]
        }


def test_real_run_span_tree(otel: Otel) -> None:
    """A real run (tools, an LLM handler setting usage) exports the same tree: a retried step
    with ``attempts == 2`` (one attempt span per attempt the events report), a failed step, a
    skipped step and a GenAI span with the handler's token usage."""
    rec = Recorder()
    execution = make_execution(observers=[rec])
    obs = observer(otel).attach(execution)
    result = run(execution)
    assert obs.plan is execution.plan
    assert result.steps["retry"].attempts == 2
    retry = otel.by_name("planrail.step retry")
    assert retry.attributes["planrail.attempt"] == 2
    failed_attempts = [e for e in rec.of("retry") if e.type == E.ATTEMPT_FAILED]
    assert len(failed_attempts) == 1
    first, second = sorted(otel.children(retry), key=lambda s: s.attributes["planrail.attempt"])
    assert first.status.status_code.name == "ERROR"
    assert second.status.status_code.name == "UNSET"
    assert second.start_time - first.end_time == 500_000_000  # the 0.5 s backoff, virtual
    assert otel.by_name("planrail.step fail").status.status_code.name == "ERROR"
    assert otel.by_name("planrail.step skip").attributes["planrail.step.status"] == "skipped"
    chat = otel.by_name(f"chat {MODEL}")
    assert chat.attributes["gen_ai.usage.input_tokens"] == 12
    assert chat.attributes["gen_ai.usage.output_tokens"] == 5
    run_span = otel.by_name("planrail.run")
    assert {s.name for s in otel.children(run_span)} == {f"planrail.step {s}" for s in result.steps}
    assert run_span.attributes["planrail.run.status"] == result.status == "failed"


def test_a_failing_observer_never_breaks_a_run(caplog: pytest.LogCaptureFixture) -> None:
    """An observer that raises is logged on the ``planrail`` logger; the run finishes."""

    class Broken:
        def on_event(self, event: Any) -> None:
            raise RuntimeError("observer bug")

    execution = make_execution(observers=[Broken()])
    with caplog.at_level("ERROR", logger="planrail"):
        result = run(execution)
    assert result.steps["retry"].status == "succeeded"
    assert any("observer" in r.getMessage() for r in caplog.records)
    assert all(r.name == "planrail" for r in caplog.records)


def test_missing_extra_is_a_one_line_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without OpenTelemetry installed, making an observer says how to install it."""
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    with pytest.raises(MissingExtraError) as info:
        OtelObserver()
    assert info.value.message == "OpenTelemetry is not installed: pip install 'planrail[otel]'"


def test_configure_from_env_needs_an_otel_variable() -> None:
    """No OTEL_* variable (or OTEL_SDK_DISABLED=true): no observer."""
    assert configure_from_env({}) is None
    assert configure_from_env({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}) is None


def test_configure_from_env_builds_sdk_providers() -> None:
    """OTEL_TRACES_EXPORTER / OTEL_METRICS_EXPORTER pick the exporters (``none`` here)."""
    obs = configure_from_env({"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"})
    assert isinstance(obs, OtelObserver)


def test_exporters_follow_the_standard_variables() -> None:
    """otlp (http/protobuf by default) and console exporters; an unknown name is refused."""
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter

    assert isinstance(_exporter({}, "TRACES"), OTLPSpanExporter)
    assert isinstance(_exporter({"OTEL_METRICS_EXPORTER": "otlp"}, "METRICS"), OTLPMetricExporter)
    assert isinstance(_exporter({"OTEL_TRACES_EXPORTER": "console"}, "TRACES"), ConsoleSpanExporter)
    assert _exporter({"OTEL_TRACES_EXPORTER": "none"}, "TRACES") is None
    with pytest.raises(MissingExtraError, match="zipkin"):
        _exporter({"OTEL_TRACES_EXPORTER": "zipkin"}, "TRACES")


async def test_planner_repair_and_replan_calls_are_genai_spans(otel: Otel) -> None:
    """The agent's planner calls — the first plan, a repair of an invalid answer and a replan
    after a failed step — are ``chat {model}`` CLIENT spans with the GenAI attributes, the
    model name and their token usage, beside the runs' own spans."""
    import json

    import planrail
    from planrail.agent import Agent, approve_all
    from planrail.testing.llm import ScriptedLLM

    tries: list[int] = []

    @planrail.tool(side_effects="none")
    def flaky(n: int) -> int:
        tries.append(n)
        if n == 1:
            raise ValueError("no luck")
        return n

    bad = {"goal": "g", "steps": [{"id": "a", "tool": "nope", "args": {}}]}
    first = {"goal": "g", "steps": [{"id": "a", "tool": "flaky", "args": {"n": 1}}]}
    second = {"goal": "g", "steps": [{"id": "b", "tool": "flaky", "args": {"n": 2}}]}
    llm = ScriptedLLM([json.dumps(x) for x in (bad, first, second)], model="tiny-model")
    obs = observer(otel)
    agent = Agent(llm, [flaky], approval=approve_all, max_replans=1, observers=[obs])
    result = await agent.run("g")
    assert result.status == "succeeded", result.reason
    chats = [s for s in otel.spans() if s.name == "chat tiny-model"]
    kinds = [s.attributes["planrail.planner.kind"] for s in chats]
    assert kinds == ["plan", "repair", "replan"]
    for span in chats:
        assert span.kind.name == "CLIENT"
        assert span.attributes["gen_ai.operation.name"] == "chat"
        assert span.attributes["gen_ai.request.model"] == "tiny-model"
        assert span.attributes["gen_ai.usage.input_tokens"] > 0
    assert len([s for s in otel.spans() if s.name == "planrail.run"]) == 2
