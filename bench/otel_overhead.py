"""OpenTelemetry overhead: the same zero-duration DAG run with and without the OTel observer.

The DAG is the overhead benchmark's 10,000-step layered graph (width 100, 1-3 dependencies per
step, all durations 0), so all the time measured is planrail's own. "Enabled" is a production
set-up: an SDK ``TracerProvider`` with a ``BatchSpanProcessor`` (queue large enough that no span
is dropped; the exporter discards them, so no network is measured) and an SDK ``MeterProvider``,
both observed through :class:`planrail.observe.OtelObserver` — a span per step (a tool step
that ran once is its own attempt) plus the run's, and the step/duration metrics. The plan is
validated once, outside the timing; each timed run is ``Execution.run()`` alone, alternating
off/on, median of the repeats.

    python -m bench.otel_overhead [--quick]      # --quick: 2,000 steps, 1 repeat
    python -m bench.otel_overhead --instructions [--steps 2000] [--against DIR ...] [--jobs N]

Prints the ratio (enabled / disabled wall time) and writes ``bench/results/otel.json``
(``otel-quick.json`` with --quick).

``--instructions`` counts instructions instead of seconds, which a loaded machine does not
move: for each source tree (this checkout's ``src``, then each ``--against DIR``, e.g. a
``git worktree add --detach`` of an older commit) and OpenTelemetry off and on, a child process
validates the plan and runs it once and three times under ``valgrind --tool=callgrind`` (every
thread counted: the batch processor's too; providers made and flushed each run), and the row is
``(Ir(3 runs) - Ir(1 run)) / (2 * steps)`` — what one more run costs per step, start-up,
imports and validation cancelled out (``bench.instructions``' method). Writes
``bench/results/otel-instructions.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import time
from pathlib import Path
from typing import Any

from bench import dags
from bench.engines.base import short_ids
from bench.engines.planrail_adapter import to_plan
from bench.report import RESULTS_DIR, table, write_json

STEPS, QUICK_STEPS = 10_000, 2_000
REPEATS, QUICK_REPEATS = 5, 1
WIDTH = 100
CHILD = """
import sys
from bench import otel_overhead
runs, n, otel = int(sys.argv[1]), int(sys.argv[2]), {otel}
plan, tool = otel_overhead.setup(n)
for _ in range(runs):
    otel_overhead.one_run(plan, tool, otel)
"""


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


def setup(n: int) -> tuple[Any, Any]:
    """The validated ``n``-step plan and its tool."""
    from planrail.plan.validate import load_plan

    tool = _tool()
    dag = short_ids(dags.layered(n, WIDTH, seed=0, durations="zero"))
    return load_plan(to_plan(dag, 1.0), [tool]), tool


def instructions(steps: int, against: list[Path], jobs: int = 1) -> dict[str, Any]:
    """Instructions per step with OpenTelemetry off and on, per source tree (callgrind); the
    ``4 * trees`` child processes run ``jobs`` at a time (counts do not depend on the load)."""
    from concurrent.futures import ThreadPoolExecutor

    from bench.instructions import ROOT, count

    trees = [ROOT, *against]
    cases = [(tree, otel, runs) for tree in trees for otel in (False, True) for runs in (1, 3)]
    with ThreadPoolExecutor(jobs) as pool:
        ir = dict(
            zip(
                cases,
                pool.map(lambda c: count(c[0], c[2], steps, CHILD.format(otel=c[1])), cases),
                strict=True,
            )
        )
    print(f"instructions per step (Execution.run() of a {steps}-step layered DAG, callgrind)")
    print("  disabled    enabled  enabled / disabled  tree")
    record = {}
    for tree in trees:
        off, on = ((ir[tree, otel, 3] - ir[tree, otel, 1]) / (2 * steps) for otel in (False, True))
        record[str(tree)] = {"disabled": off, "enabled": on, "ratio": on / off}
        print(f"  {off / 1000:7.1f}k  {on / 1000:7.1f}k  {on / off:17.3f}x  {tree}")
    out = RESULTS_DIR / "otel-instructions.json"
    out.write_text(json.dumps({"steps": steps, "per_step": record}, indent=1) + "\n")
    print(f"results: {out}")
    return record


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2,000 steps, one repeat")
    parser.add_argument("--instructions", action="store_true", help="callgrind, not seconds")
    parser.add_argument("--steps", type=int, default=QUICK_STEPS, help="with --instructions")
    parser.add_argument("--against", action="append", default=[], type=Path)
    parser.add_argument("--jobs", type=int, default=1, help="callgrind children at a time")
    args = parser.parse_args(argv)
    if args.instructions:
        return instructions(args.steps, args.against, args.jobs)
    n = QUICK_STEPS if args.quick else STEPS
    repeats = QUICK_REPEATS if args.quick else REPEATS
    plan, tool = setup(n)
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
