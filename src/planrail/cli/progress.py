"""What the command line watches a run with: live progress, a trace file, OpenTelemetry.

Progress is a table that updates in place on a terminal, one line per event otherwise, nothing
with ``--quiet``. Each display is an :class:`~planrail.types.Observer`, like any other: it only
records state when an event arrives (O(1)); the table is drawn at most 4 times a second.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.text import Text

from planrail.cli.printable import printable
from planrail.cli.render import STATUS_STYLE
from planrail.clock import SYSTEM_CLOCK
from planrail.engine.events import Event, EventType
from planrail.types import Clock

__all__ = ["LineProgress", "LiveProgress", "attach_observers", "make_progress"]

E = EventType
_STATUS_OF = {
    E.STEP_STARTED: "running",
    E.STEP_RESTORED: "succeeded",
    E.STEP_SUCCEEDED: "succeeded",
    E.STEP_DEGRADED: "succeeded",
    E.STEP_FAILED: "failed",
    E.STEP_SKIPPED: "skipped",
    E.STEP_CANCELLED: "cancelled",
    E.STEP_IN_DOUBT: "in_doubt",
}
_ORDER = ("running", "succeeded", "failed", "skipped", "cancelled", "in_doubt", "pending")


def _detail(event: Event) -> str:
    data = event.data
    if event.type == E.RETRY_SCHEDULED:
        return f"retrying in {float(data.get('delay') or 0.0):.2f}s"
    if event.type == E.STEP_DEGRADED:
        return "degraded: " + str(data.get("reason") or "its fallback was used")
    if event.type == E.STEP_RESTORED:
        return "restored from the checkpoint"
    error = data.get("error") if isinstance(data.get("error"), dict) else None
    return str(data.get("reason") or (error or {}).get("message") or "")


class LiveProgress:
    """Per-step state, counts, retries, tokens and elapsed time, redrawn in place.

    With many steps, the rows shown are the running, failed and most recent ones.
    """

    def __init__(
        self,
        console: Console,
        step_ids: list[str],
        max_rows: int = 30,
        *,
        clock: Clock = SYSTEM_CLOCK,
        auto_refresh: bool = True,
    ) -> None:
        self.console = console
        self.clock = clock
        self.states = dict.fromkeys(step_ids, "pending")
        self.counts = {"pending": len(self.states)}
        self.started: dict[str, float] = {}
        self.ended: dict[str, float] = {}
        self.details: dict[str, str] = {}
        self.recent: dict[str, None] = {}
        """Steps by last change, oldest first (a dict as an ordered set)."""
        self.retries = 0
        self.tokens = [0, 0]
        self.t0: float | None = None
        self.t_end: float | None = None
        self.run_status: str | None = None
        self.max_rows = max_rows
        self._last: RenderableType = Text("")
        self.live = Live(
            console=console,
            get_renderable=self.render,
            refresh_per_second=4,
            auto_refresh=auto_refresh,
            transient=False,
        )

    def __enter__(self) -> LiveProgress:
        self.live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.live.refresh()
        self.live.__exit__(*exc)

    def on_event(self, event: Event) -> None:
        if event.type == E.RUN_STARTED:
            self.t0 = event.at
            return
        if event.type == E.RUN_FINISHED:
            self.t_end, self.run_status = event.at, str(event.data.get("status"))
            return
        if event.step_id is None:
            return
        sid = event.step_id
        if event.type == E.RETRY_SCHEDULED:
            self.retries += 1
        usage = event.data.get("usage") or {}
        self.tokens[0] += int(usage.get("input_tokens", 0))
        self.tokens[1] += int(usage.get("output_tokens", 0))
        detail = _detail(event)
        if detail:
            self.details[sid] = detail
        status = _STATUS_OF.get(event.type)
        if status is None:
            return
        old = self.states.get(sid)
        if old is not None:
            self.counts[old] -= 1
        self.states[sid] = status
        self.counts[status] = self.counts.get(status, 0) + 1
        if status == "running":
            self.started[sid] = event.at
        else:
            self.ended[sid] = event.at
        self.recent.pop(sid, None)
        self.recent[sid] = None

    def _rows(self) -> list[str]:
        if len(self.states) <= self.max_rows:
            return list(self.states)
        urgent = [s for s, st in self.states.items() if st in ("running", "failed", "in_doubt")]
        chosen = dict.fromkeys(urgent[: self.max_rows])
        for sid in reversed(list(self.recent)):
            if len(chosen) >= self.max_rows:
                break
            chosen.setdefault(sid, None)
        return [s for s in self.states if s in chosen]

    def render(self) -> RenderableType:
        """The current table (called by the display's refresh, never per event)."""
        # A dict may change size under the refresh thread: then keep the last table.
        with contextlib.suppress(RuntimeError):
            self._last = self._render()
        return self._last

    def _render(self) -> Group:
        now = self.t_end if self.t_end is not None else self.clock.now()
        shown = self._rows()
        # Lines of fixed-width columns, not a rich Table: a Table measures every cell on each
        # redraw, and at ~35 ms a draw (30 rows) its refresh thread took the GIL from the run.
        width = max(map(len, shown), default=0)
        lines = Text(no_wrap=True, overflow="ellipsis")
        for sid in shown:
            status = self.states[sid]
            icon, style = STATUS_STYLE[status]
            t = ""
            if sid in self.started:
                t = f"{self.ended.get(sid, now) - self.started[sid]:.1f}s"
            if lines:
                lines.append("\n")
            lines.append(f"{icon} ", style)
            lines.append(f"{sid:<{width}} ")
            lines.append(f"{status:<9}", style)
            lines.append(f" {t:>6} ")
            lines.append(self.details.get(sid, ""), "dim")
        parts = [f"{k} {self.counts[k]}" for k in _ORDER if self.counts.get(k)]
        if self.retries:
            parts.append(f"retries {self.retries}")
        if any(self.tokens):
            parts.append(f"tokens {self.tokens[0]}→{self.tokens[1]}")
        elapsed = now - self.t0 if self.t0 is not None else 0.0
        head = "  ".join(parts) + f"   elapsed {elapsed:.1f}s"
        if self.run_status is not None:
            head = f"run {self.run_status}   " + head
        hidden = len(self.states) - len(shown)
        rows: list[RenderableType] = [Text(head, style="bold"), lines]
        if hidden > 0:
            rows.append(Text(f"… {hidden} more step(s)", "dim"))
        return Group(*rows)


class LineProgress:
    """One line per event, for logs and pipes: ``elapsed icon step status (duration): detail``.

    The lines are plain text, not rendered by Rich: rendering cost ~0.25 ms a line on the run's
    event loop, so a wide wave waited for its own progress lines (``python -m bench.cli
    --configs log``). The lines of one turn of the loop are written together at the end of that
    turn, in one write and one flush: the log is current whenever the run waits, and an
    unbuffered output (``PYTHONUNBUFFERED=1``, common in CI) costs one system call per burst of
    events rather than one per line. Outside a running loop, and for the run's last line, a
    line is written at once.
    """

    def __init__(self, console: Console) -> None:
        self.console = console
        self.t0: float | None = None
        self._pending: list[str] = []
        self._queued_on: asyncio.AbstractEventLoop | None = None
        self._gone = False
        """The output was closed under it: no more lines."""

    def __enter__(self) -> LineProgress:
        return self

    def attach(self, execution: Any) -> LineProgress:
        execution.observers.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.flush()

    def on_event(self, event: Event) -> None:
        if self.t0 is None:
            self.t0 = event.at
        elapsed = event.at - self.t0
        if event.type == E.RUN_FINISHED:
            error = f": {event.data['error']}" if event.data.get("error") else ""
            self._line(f"{elapsed:7.2f}s run {event.data.get('status')}{error}")
            self.flush()
            return
        status: str | None = _STATUS_OF.get(event.type)
        if event.type == E.ATTEMPT_FAILED:
            status, icon = f"attempt {event.attempt or '?'} failed", "!"
        elif event.type == E.RETRY_SCHEDULED:
            status, icon = "retry", "↻"
        elif status is None:
            return
        else:
            icon = STATUS_STYLE[status][0]
            if event.type == E.STEP_DEGRADED:
                status = "succeeded"
        extra = ""
        if "duration" in event.data:
            extra = f" ({float(event.data['duration']):.2f}s)"
        detail = _detail(event)
        if detail:
            extra += f": {detail}"
        self._line(f"{elapsed:7.2f}s {icon} {event.step_id} {status}{extra}")

    def _line(self, text: str) -> None:
        if self._gone:
            return
        self._pending.append(printable(text))  # an error's escape sequences, shown as text
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not inside a run's loop: nothing later would write it
            self.flush()
            return
        if self._queued_on is not loop:  # (a loop closed before it wrote is not this one)
            self._queued_on = loop
            loop.call_soon(self.flush)

    def flush(self) -> None:
        """Write and flush the lines not written yet."""
        self._queued_on = None
        if not self._pending or self._gone:
            return
        text = "\n".join(self._pending) + "\n"
        self._pending.clear()
        try:
            out = self.console.file
            out.write(text)
            out.flush()
        except (OSError, ValueError):  # the reader went away (`| head`): the run goes on
            self._gone = True


class _Quiet:
    def __enter__(self) -> _Quiet:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def on_event(self, event: Event) -> None:
        return None


def make_progress(console: Console, step_ids: list[str], *, quiet: bool) -> Any:
    """The right display for where output goes."""
    if quiet:
        return _Quiet()
    if console.is_terminal:
        return LiveProgress(console, step_ids)
    return LineProgress(console)


def observers_for(trace: Path | None, console: Console, *, quiet: bool = True) -> list[Any]:
    """What the command line was asked to watch runs with, each with ``attach(execution)``.

    ``trace``: a JSON Lines trace file (appended to). OpenTelemetry: when the standard
    ``OTEL_*`` variables ask for it (see :func:`planrail.observe.otel_config.configure_from_env`);
    a missing ``[otel]`` extra is a usage error (exit 2) saying how to install it. Unless
    ``quiet``, one progress line per event (for runs whose steps are not known in advance).
    """
    import typer
    from rich.markup import escape

    from planrail.errors import PlanrailError
    from planrail.observe.otel_config import configure_from_env
    from planrail.observe.trace import TraceWriter

    found: list[Any] = []
    try:
        otel = configure_from_env()
    except PlanrailError as exc:
        console.print(f"[red]error:[/] {escape(exc.message)}", highlight=False)
        raise typer.Exit(2) from None
    if otel is not None:
        found.append(otel)
    if trace is not None:
        try:
            found.append(TraceWriter(trace))
        except OSError as exc:
            console.print(f"[red]error:[/] --trace {escape(str(trace))}: {exc.strerror}")
            raise typer.Exit(2) from None
    if not quiet:
        found.append(LineProgress(console))
    return found


def attach_observers(execution: Any, trace: Path | None, console: Console) -> None:
    """Attach :func:`observers_for` ``trace`` (no progress: :func:`make_progress` adds it)."""
    for observer in observers_for(trace, console):
        observer.attach(execution)
