"""Live progress: one line per event when piped, a counted table on a terminal, nothing with
``--quiet``; and library code never prints."""

from __future__ import annotations

import ast
import asyncio
import io
from pathlib import Path

from rich.console import Console

from planrail.cli.progress import LineProgress, LiveProgress, make_progress
from planrail.engine.events import EventType

from .helpers import FakeClock, ev

E = EventType
SRC = Path(__file__).resolve().parents[2] / "src" / "planrail"


def sequence() -> list[object]:
    err = {"type": "RetryableError", "message": "busy", "retryable": True}
    return [
        ev(E.RUN_STARTED, 10.0),
        ev(E.STEP_STARTED, 10.0, "a", 1),
        ev(E.STEP_STARTED, 10.0, "b", 1),
        ev(E.ATTEMPT_FAILED, 10.5, "a", 1, error=err),
        ev(E.RETRY_SCHEDULED, 10.5, "a", 1, delay=1.0),
        ev(E.STEP_FAILED, 11.0, "b", 1, duration=1.0, error={"type": "X", "message": "bad"}),
        ev(E.STEP_SKIPPED, 11.0, "c", reason="dependency 'b' failed"),
        ev(
            E.STEP_SUCCEEDED,
            12.0,
            "a",
            2,
            duration=2.0,
            usage={"input_tokens": 7, "output_tokens": 3},
        ),
        ev(E.RUN_FINISHED, 12.0, status="failed", error=None),
    ]


def test_line_progress_prints_one_line_per_event() -> None:
    """Elapsed time from the run's start, icon, step, status, duration and detail."""
    out = io.StringIO()
    progress = LineProgress(Console(file=out, width=200))
    for e in sequence():
        progress.on_event(e)  # type: ignore[arg-type]
    assert out.getvalue().splitlines() == [
        "   0.00s ▶ a running",
        "   0.00s ▶ b running",
        "   0.50s ! a attempt 1 failed: busy",
        "   0.50s ↻ a retry: retrying in 1.00s",
        "   1.00s ✗ b failed (1.00s): bad",
        "   1.00s ↷ c skipped: dependency 'b' failed",
        "   2.00s ✓ a succeeded (2.00s)",
        "   2.00s run failed",
    ]


class CountingFile(io.StringIO):
    """A file that counts its flushes, or fails like a pipe whose reader has gone."""

    def __init__(self, broken_after: int | None = None) -> None:
        super().__init__()
        self.flushes = 0
        self.writes = 0
        self.broken_after = broken_after

    def write(self, s: str) -> int:
        if self.broken_after is not None and self.getvalue().count("\n") >= self.broken_after:
            raise BrokenPipeError(32, "Broken pipe")
        self.writes += 1
        return super().write(s)

    def flush(self) -> None:
        self.flushes += 1


def test_line_progress_writes_once_per_turn_of_the_loop() -> None:
    """A burst of events in one turn is one write and one flush, done before the loop waits:
    the log is current whenever the run waits, and an unbuffered output is not written to
    line by line."""
    out = CountingFile()
    progress = LineProgress(Console(file=out, width=200))

    async def burst() -> tuple[int, int]:
        for i in range(50):
            progress.on_event(ev(E.STEP_STARTED, 1.0, f"s{i}", 1))  # type: ignore[arg-type]
        during = (out.writes, out.flushes)
        await asyncio.sleep(0)  # one turn: the queued write runs
        return during, (out.writes, out.flushes)

    assert asyncio.run(burst()) == ((0, 0), (1, 1))
    assert out.getvalue().splitlines() == [f"   0.00s ▶ s{i} running" for i in range(50)]
    progress.on_event(ev(E.STEP_STARTED, 2.0, "late", 1))  # type: ignore[arg-type]
    assert (out.writes, out.flushes) == (2, 2)  # outside a loop: at once


def test_line_progress_writes_what_is_pending_when_it_ends() -> None:
    """The run's last line is written at once, and leaving the display writes any line still
    waiting for its turn of the loop."""
    out = CountingFile()
    progress = LineProgress(Console(file=out, width=200))

    async def run() -> None:
        progress.on_event(ev(E.STEP_STARTED, 1.0, "a", 1))  # type: ignore[arg-type]
        progress.on_event(ev(E.RUN_FINISHED, 2.0, status="succeeded"))  # type: ignore[arg-type]
        assert out.getvalue().splitlines() == ["   0.00s ▶ a running", "   1.00s run succeeded"]
        progress.on_event(ev(E.STEP_STARTED, 3.0, "b", 1))  # type: ignore[arg-type]
        assert "b running" not in out.getvalue()  # its turn has not come
        with progress:
            pass
        assert out.getvalue().splitlines()[-1] == "   2.00s ▶ b running"

    asyncio.run(run())
    assert out.writes == 2


def test_line_progress_shows_control_characters_as_escapes() -> None:
    """A tool's error message cannot move the cursor or recolour the terminal of whoever
    reads the log: its control characters are written as escapes, as every CLI console
    writes them (planrail.cli.printable); tabs stay."""
    out = io.StringIO()
    progress = LineProgress(Console(file=out, width=200))
    err = {"type": "ToolError", "message": "\x1b[31mred\x1b[0m\rover\x07\tdone", "retryable": False}
    progress.on_event(ev(E.STEP_FAILED, 0.0, "a", 1, error=err))  # type: ignore[arg-type]
    assert out.getvalue() == "   0.00s ✗ a failed: \\x1b[31mred\\x1b[0m\\x0dover\\x07\tdone\n"


def test_line_progress_stops_quietly_when_its_reader_goes() -> None:
    """`planrail run ... | head`: once the pipe is closed the lines stop, and nothing is
    raised into the run (the run is not cancelled by its log going away)."""
    out = CountingFile(broken_after=2)
    progress = LineProgress(Console(file=out, width=200))
    for i in range(5):
        progress.on_event(ev(E.STEP_STARTED, 1.0, f"s{i}", 1))  # type: ignore[arg-type]
    assert out.getvalue().splitlines() == ["   0.00s ▶ s0 running", "   0.00s ▶ s1 running"]
    assert progress._gone


def live(steps: list[str], **kw: object) -> tuple[LiveProgress, io.StringIO]:
    out = io.StringIO()
    console = Console(file=out, width=100, force_terminal=True)
    return LiveProgress(console, steps, auto_refresh=False, **kw), out  # type: ignore[arg-type]


def text_of(progress: LiveProgress) -> str:
    console = Console(file=io.StringIO(), width=100, no_color=True)
    with console.capture() as cap:
        console.print(progress.render())
    return cap.get()


def test_live_progress_counts_retries_tokens_and_elapsed() -> None:
    """The header counts steps by state, retries and tokens; elapsed comes from the events."""
    clock = FakeClock(10.0)
    progress, _ = live(["a", "b", "c"], clock=clock)
    events = sequence()
    for e in events[:5]:
        progress.on_event(e)  # type: ignore[arg-type]
    clock.t = 10.75
    head = text_of(progress).splitlines()[0]
    assert head == "running 2  pending 1  retries 1   elapsed 0.8s"
    for e in events[5:]:
        progress.on_event(e)  # type: ignore[arg-type]
    lines = text_of(progress).splitlines()
    assert lines[0] == (
        "run failed   succeeded 1  failed 1  skipped 1  retries 1  tokens 7→3   elapsed 2.0s"
    )
    assert progress.counts == {
        "pending": 0,
        "running": 0,
        "failed": 1,
        "skipped": 1,
        "succeeded": 1,
    }
    row_b = next(line for line in lines if " b " in line)
    assert "failed" in row_b
    assert "1.0s" in row_b
    assert "bad" in row_b


def test_live_progress_keeps_interesting_rows_when_the_plan_is_big() -> None:
    """With more steps than rows: running and failed steps stay on screen, then recent ones."""
    steps = [f"s{i}" for i in range(100)]
    progress, _ = live(steps, max_rows=5)
    for i in range(10):
        progress.on_event(ev(E.STEP_STARTED, 0.0, f"s{i}", 1))
    for i in range(8):
        progress.on_event(ev(E.STEP_SUCCEEDED, 1.0, f"s{i}", 1, duration=1.0))
    progress.on_event(ev(E.STEP_FAILED, 2.0, "s50", 1, error={"type": "X", "message": "m"}))
    assert progress._rows() == ["s6", "s7", "s8", "s9", "s50"]
    assert "… 95 more step(s)" in text_of(progress)


def test_live_progress_keeps_one_line_per_step_on_a_narrow_terminal() -> None:
    """A long failure reason is cut at the terminal's width: each step stays one line, its
    columns aligned on the longest step id shown."""
    progress, _ = live(["a", "long_id"])
    progress.on_event(ev(E.STEP_FAILED, 1.0, "a", 1, error={"type": "X", "message": "m" * 300}))
    console = Console(file=io.StringIO(), width=40, no_color=True)
    with console.capture() as cap:
        console.print(progress.render())
    lines = cap.get().splitlines()
    assert len(lines) == 3, lines
    assert lines[1].startswith("✗ a       failed")
    assert lines[1].endswith("…")
    assert lines[2].startswith("· long_id pending")
    assert all(len(line) <= 40 for line in lines)


def test_live_display_draws_on_enter_and_exit() -> None:
    """Used as a context manager it draws the final table on the terminal."""
    progress, out = live(["a"])
    with progress:
        progress.on_event(ev(E.RUN_STARTED, 0.0))
        progress.on_event(ev(E.STEP_STARTED, 0.0, "a", 1))
        progress.on_event(ev(E.STEP_SUCCEEDED, 1.0, "a", 1, duration=1.0))
        progress.on_event(ev(E.RUN_FINISHED, 1.0, status="succeeded"))
    assert "run succeeded" in out.getvalue()


def test_make_progress_picks_the_display() -> None:
    """--quiet: nothing; a terminal: the live table; a pipe: lines."""
    term = Console(file=io.StringIO(), force_terminal=True)
    pipe = Console(file=io.StringIO(), force_terminal=False)
    assert type(make_progress(term, ["a"], quiet=True)).__name__ == "_Quiet"
    assert isinstance(make_progress(term, ["a"], quiet=False), LiveProgress)
    assert isinstance(make_progress(pipe, ["a"], quiet=False), LineProgress)


def test_library_code_never_prints() -> None:
    """Outside the command line, planrail writes through ``logging`` only."""
    offenders = []
    for path in SRC.rglob("*.py"):
        if "cli" in path.relative_to(SRC).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print":
                offenders.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert offenders == []
