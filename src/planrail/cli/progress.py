"""Live progress for ``planrail run``: a table that updates in place on a terminal, one line per
event otherwise. It is an :class:`~planrail.types.Observer`, like any other."""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from planrail.cli.render import STATUS_STYLE
from planrail.clock import SYSTEM_CLOCK
from planrail.engine.events import Event, EventType

__all__ = ["LineProgress", "LiveProgress", "make_progress"]

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


class LiveProgress:
    """Per-step state, counts and elapsed time, redrawn in place."""

    def __init__(self, console: Console, step_ids: list[str], max_rows: int = 30) -> None:
        self.console = console
        self.states = dict.fromkeys(step_ids, "pending")
        self.started: dict[str, float] = {}
        self.ended: dict[str, float] = {}
        self.details: dict[str, str] = {}
        self.t0 = SYSTEM_CLOCK.now()
        self.max_rows = max_rows
        self.live = Live(self._render(), console=console, refresh_per_second=8, transient=False)

    def __enter__(self) -> LiveProgress:
        self.live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.live.update(self._render())
        self.live.__exit__(*exc)

    def on_event(self, event: Event) -> None:
        status = _STATUS_OF.get(event.type)
        if status is None or event.step_id is None:
            return
        now = event.at
        self.states[event.step_id] = status
        if status == "running":
            self.started[event.step_id] = now
        else:
            self.ended[event.step_id] = now
            reason = event.data.get("reason") or (event.data.get("error") or {}).get("message")
            if reason:
                self.details[event.step_id] = str(reason)
        self.live.update(self._render())

    def _render(self) -> Group:
        now = SYSTEM_CLOCK.now()
        table = Table(box=None, pad_edge=False, show_header=False)
        table.add_column("", width=2)
        table.add_column("step")
        table.add_column("status")
        table.add_column("time", justify="right")
        table.add_column("")
        rows = list(self.states.items())
        if len(rows) > self.max_rows:  # keep the interesting ones on screen
            rows = [r for r in rows if r[1] not in ("pending", "succeeded")][: self.max_rows]
        for sid, status in rows:
            icon, style = STATUS_STYLE[status]
            t = ""
            if sid in self.started:
                t = f"{self.ended.get(sid, now) - self.started[sid]:.1f}s"
            table.add_row(
                Text(icon, style),
                sid,
                Text(status, style),
                t,
                Text(self.details.get(sid, ""), "dim"),
            )
        counts: dict[str, int] = {}
        for s in self.states.values():
            counts[s] = counts.get(s, 0) + 1
        summary = "  ".join(f"{k} {v}" for k, v in counts.items())
        head = Text(f"{summary}   elapsed {now - self.t0:.1f}s", style="bold")
        return Group(head, table)


class LineProgress:
    """One line per step event, for logs and pipes."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.t0 = SYSTEM_CLOCK.now()

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def on_event(self, event: Event) -> None:
        status = _STATUS_OF.get(event.type)
        if status is None:
            return
        icon, _ = STATUS_STYLE[status]
        extra = ""
        if "duration" in event.data:
            extra = f" ({event.data['duration']:.2f}s)"
        reason = event.data.get("reason") or (event.data.get("error") or {}).get("message")
        if reason:
            extra += f": {reason}"
        elapsed = event.at - self.t0
        self.console.print(
            f"{elapsed:7.2f}s {icon} {event.step_id} {status}{extra}", highlight=False, markup=False
        )


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
