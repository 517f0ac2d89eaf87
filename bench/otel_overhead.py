"""OpenTelemetry overhead: the same zero-duration DAG run with and without the OTel observer.

The DAG is the overhead benchmark's 10,000-step layered graph (width 100, 1-3 dependencies per
step, all durations 0), so all the time measured is planrail's own. "Enabled" is a production
set-up: an SDK ``TracerProvider`` with a ``BatchSpanProcessor`` (queue large enough that no span
is dropped; the exporter discards them, so no network is measured) and an SDK ``MeterProvider``,
both observed through :class:`planrail.observe.OtelObserver` — 2 spans per step (step and
attempt) plus the run's, and the step/duration metrics. The plan is validated once, outside the
timing; each timed run is ``Execution.run()`` alone, alternating off/on, median of the repeats.

    python -m bench.otel_overhead [--quick]      # --quick: 2,000 steps, 1 repeat

Prints the ratio (enabled / disabled wall time) and writes ``bench/results/otel.json``
(``otel-quick.json`` with --quick).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time
from typing import Any

from bench import dags
from bench.engines.base import short_ids
from bench.engines.planrail_adapter import to_plan
from bench.report import table, write_json

STEPS, QUICK_STEPS = 10_000, 2_000
REPEATS, QUICK_REPEATS = 5, 1
WIDTH = 100


def _tool() -> Any:
    import planrail

    @planrail.tool(side_effects="none")
    async def node(id: str, duration: float, inputs: list[str]) -> str:
        return id

    return node


class Discard:
    """A span exporter that counts spans and throws them away."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Any) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        self.spans += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


def one_run(plan: Any, tool: Any, otel: bool) -> tuple[float, int]:
    """Wall seconds of one execution, and the spans exported (0 when disabled)."""
    from planrail.engine.executor import Execution

    observers: list[Any] = []
    exporter, provider, meters = Discard(), None, None
    if otel:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        from planrail.observe.otel import OtelObserver

        provider = TracerProvider(shutdown_on_exit=False)
        provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=1_000_000))
        meters = MeterProvider(metric_readers=[InMemoryMetricReader()], shutdown_on_exit=False)
        observers.append(OtelObserver(tracer_provider=provider, meter_provider=meters, plan=plan))
    execution = Execution(plan, [tool], observers=observers)
    gc.collect()
    t0 = time.perf_counter()
    result = asyncio.run(execution.run())
    elapsed = time.perf_counter() - t0
    assert result.status == "succeeded", result.status
    if provider is not None and meters is not None:
        provider.shutdown()  # flushes the batch queue (outside the timing)
        meters.shutdown()
    return elapsed, exporter.spans


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2,000 steps, one repeat")
    args = parser.parse_args(argv)
    n = QUICK_STEPS if args.quick else STEPS
    repeats = QUICK_REPEATS if args.quick else REPEATS
    from planrail.plan.validate import load_plan

    tool = _tool()
    dag = short_ids(dags.layered(n, WIDTH, seed=0, durations="zero"))
    plan = load_plan(to_plan(dag, 1.0), [tool])
    one_run(plan, tool, False)  # warm-up: imports, caches
    one_run(plan, tool, True)
    off: list[float] = []
    on: list[float] = []
    spans = 0
    for _ in range(repeats):
        off.append(one_run(plan, tool, False)[0])
        t, spans = one_run(plan, tool, True)
        on.append(t)
    m_off, m_on = statistics.median(off), statistics.median(on)
    ratio = m_on / m_off
    payload = {
        "steps": n,
        "repeats": repeats,
        "disabled_s": m_off,
        "enabled_s": m_on,
        "ratio": ratio,
        "disabled_us_per_step": m_off / n * 1e6,
        "enabled_us_per_step": m_on / n * 1e6,
        "otel_us_per_step": (m_on - m_off) / n * 1e6,
        "spans_per_run": spans,
        "runs_disabled_s": off,
        "runs_enabled_s": on,
    }
    print(
        table(
            ["OpenTelemetry", "wall s (median)", "µs / step"],
            [
                ["disabled", m_off, m_off / n * 1e6],
                ["enabled", m_on, m_on / n * 1e6],
            ],
        )
    )
    print(
        f"\n{n} steps, {repeats} repeat(s), {spans} spans per run: enabled / disabled = "
        f"{ratio:.2f}x (+{payload['otel_us_per_step']:.1f} µs per step)"
    )
    path = write_json("otel", args.quick, payload)
    print(f"results: {path}")
    return payload


if __name__ == "__main__":
    main()
