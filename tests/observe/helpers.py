"""Shared pieces of the observability tests: a plan with a retry, a failure, a skip and an LLM
call; its tools; a scripted ``llm_call`` handler; synthetic events; an in-memory OTel setup."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import planrail
from planrail.engine.events import Event, EventType
from planrail.engine.executor import Execution
from planrail.engine.result import RunResult
from planrail.engine.step_runner import Call
from planrail.plan.model import Plan
from planrail.plan.validate import load_plan

RUN = "run_obs"
MODEL = "test-model"


class FakeClock:
    """Virtual time: ``sleep`` moves the clock instead of waiting, so backoffs cost nothing."""

    def __init__(self, start: float = 1000.0) -> None:
        self.t = start

    def now(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.t += max(seconds, 0.0)
        await asyncio.sleep(0)


def make_tools() -> list[planrail.Tool]:
    """``flaky`` fails once (retryable), ``boom`` always fails, ``echo`` returns its input,
    ``login`` has a secret parameter."""
    calls = {"flaky": 0}

    @planrail.tool(side_effects="none")
    def flaky(x: int) -> dict[str, int]:
        calls["flaky"] += 1
        if calls["flaky"] == 1:
            raise planrail.RetryableError("upstream busy")
        return {"y": x}

    @planrail.tool(side_effects="none")
    def boom(x: int) -> dict[str, int]:
        raise ValueError("bad input")

    @planrail.tool(side_effects="none")
    def echo(x: Any) -> dict[str, Any]:
        return {"y": x}

    @planrail.tool(side_effects="none", secret_params=["password"])
    def login(user: str, password: str) -> dict[str, str]:
        return {"session": f"s-{user}"}

    return [flaky, boom, echo, login]


PLAN_DOC: dict[str, Any] = {
    "goal": "exercise every kind of outcome",
    "steps": [
        {
            "id": "retry",
            "tool": "flaky",
            "args": {"x": 1},
            "retry": {"max_attempts": 3, "initial_delay": 0.5, "jitter": 0},
        },
        {"id": "fail", "tool": "boom", "args": {"x": 2}},
        {"id": "skip", "tool": "echo", "args": {"x": "${fail.y}"}, "depends_on": ["fail"]},
        {
            "id": "ask",
            "action": "llm_call",
            "prompt": "Say ${retry.y}",
            "model": MODEL,
            "depends_on": ["retry"],
        },
        {
            "id": "auth",
            "tool": "login",
            "args": {"user": "alice", "password": "hunter2"},
        },
    ],
}


def make_plan(tools: list[planrail.Tool]) -> Plan:
    return load_plan(PLAN_DOC, tools)


async def llm_handler(call: Call) -> Any:
    """A scripted LLM: answers and reports token usage like a real client would."""
    call.usage["input_tokens"] = call.usage.get("input_tokens", 0) + 12
    call.usage["output_tokens"] = call.usage.get("output_tokens", 0) + 5
    return {"text": f"answer to {call.resolve(call.step.prompt)}"}


def make_execution(**options: Any) -> Execution:
    tools = make_tools()
    options.setdefault("clock", FakeClock())
    return Execution(
        make_plan(tools), tools, handlers={"llm_call": llm_handler}, run_id=RUN, **options
    )


def run(execution: Execution) -> RunResult:
    """Run to the end on a fresh event loop."""
    return asyncio.run(execution.run())


class Recorder:
    """Collects every event."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def on_event(self, event: Event) -> None:
        self.events.append(event)

    def of(self, step: str) -> list[Event]:
        return [e for e in self.events if e.step_id == step]


def ev(
    type_: EventType, at: float, step: str | None = None, attempt: int | None = None, **data: Any
) -> Event:
    """A synthetic event of run ``RUN``."""
    return Event(type_, RUN, at, step, attempt, data)


@dataclass
class Otel:
    """An SDK tracer and meter provider that keep everything in memory."""

    spans_exporter: Any
    reader: Any
    tracer_provider: Any
    meter_provider: Any

    def spans(self) -> list[Any]:
        return list(self.spans_exporter.get_finished_spans())

    def by_name(self, name: str) -> Any:
        found = [s for s in self.spans() if s.name == name]
        assert len(found) == 1, f"{len(found)} spans named {name!r}"
        return found[0]

    def children(self, parent: Any) -> list[Any]:
        return [
            s
            for s in self.spans()
            if s.parent is not None and s.parent.span_id == parent.context.span_id
        ]

    def metrics(self) -> dict[str, list[tuple[dict[str, Any], Any]]]:
        """``{metric name: [(attributes, data point)]}``."""
        data = self.reader.get_metrics_data()
        out: dict[str, list[tuple[dict[str, Any], Any]]] = {}
        if data is None:  # nothing recorded yet
            return out
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    for p in m.data.data_points:
                        out.setdefault(m.name, []).append((dict(p.attributes), p))
        return out


def otel_setup() -> Iterator[Otel]:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    tp = TracerProvider(shutdown_on_exit=False)
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    mp = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
    yield Otel(exporter, reader, tp, mp)
    tp.shutdown()
    mp.shutdown()
