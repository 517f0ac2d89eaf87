"""The run summary: a row per step for small runs; a large run shows what did not succeed
and counts the rest in one line (rendering thousands of rows takes seconds)."""

from __future__ import annotations

import io

from rich.console import Console

from planrail.cli.render import print_result
from planrail.engine.result import RunResult, StepResult
from planrail.types import StepStatus


def _run(n: int, failed: tuple[int, ...] = ()) -> RunResult:
    steps = {}
    for i in range(n):
        status = StepStatus.FAILED if i in failed else StepStatus.SUCCEEDED
        steps[f"s{i}"] = StepResult(id=f"s{i}", status=status, attempts=1, output=f"out{i}")
    return RunResult(run_id="r1", status="failed" if failed else "succeeded", steps=steps)


def _printed(result: RunResult, rows: int) -> str:
    buffer = io.StringIO()
    print_result(Console(file=buffer, width=200, color_system=None), result, rows=rows)
    return buffer.getvalue()


def _rows(text: str) -> list[str]:
    return [line.split("│")[1].strip() for line in text.splitlines() if line.startswith("│ s")]


def test_a_run_within_the_limit_gets_a_row_per_step_and_no_count_line() -> None:
    text = _printed(_run(5), rows=5)
    assert _rows(text) == ["s0", "s1", "s2", "s3", "s4"]
    assert "more step" not in text


def test_a_large_run_shows_failed_steps_first_and_counts_the_rest() -> None:
    text = _printed(_run(30, failed=(17, 29)), rows=4)
    # Both failures get a row though they come late; two succeeded fill the rest, plan order.
    assert _rows(text) == ["s0", "s1", "s17", "s29"]
    assert "… and 26 more step(s) not shown (26 succeeded)" in text
    assert "planrail show r1" in text


def test_more_failures_than_rows_are_counted_by_status() -> None:
    text = _printed(_run(10, failed=(1, 2, 3, 4)), rows=2)
    assert _rows(text) == ["s1", "s2"]
    assert "(2 failed, 6 succeeded)" in text
