"""Looking at runs and plans: ``planrail show`` and ``planrail graph``."""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from planrail.cli.common import (
    CatalogOpt,
    ExitCode,
    JsonOpt,
    StoreOpt,
    ToolsOpt,
    app,
    check_plan_path,
    fail,
    open_store_or_exit,
    out,
    registry_from,
    when_the_command_ends,
)
from planrail.cli.jsonout import json_text
from planrail.cli.render import STATUS_STYLE, print_issues
from planrail.engine.events import EventType
from planrail.engine.gate import REPLANNED_AS, replaced_by, replaced_note
from planrail.errors import PlanrailError, StoreNotFoundError
from planrail.observe.graph import DepGraph, to_dot, to_mermaid
from planrail.observe.layout import to_svg
from planrail.observe.trace import TraceError, read_trace
from planrail.observe.view import RunView
from planrail.plan.secrets import secret_params_of
from planrail.plan.validate import validate
from planrail.store import open_store

__all__ = ["render_show", "render_step"]

TIMELINE_WIDTH = 40
TIMELINE_ROWS = 40


# ---------------------------------------------------------------------- show


@app.command("show")
def show_cmd(
    run_id: Annotated[
        str | None, typer.Argument(help="The run to show (optional with --trace).")
    ] = None,
    step: Annotated[
        str | None,
        typer.Option("--step", help="One step: its resolved inputs, output and attempt history."),
    ] = None,
    trace: Annotated[
        Path | None,
        typer.Option("--trace", help="Read the run from this trace file instead of the store."),
    ] = None,
    tools: ToolsOpt = None,
    catalog: CatalogOpt = None,
    store: StoreOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """A run: summary, steps and timeline (--json: the object `run --json` printed).

    Inputs of parameters a tool declares secret (known from --tools/--catalog), and of
    parameters named like secrets (api_key, password, token, …), are shown as "***".
    """
    console = out(json_out)
    view, newer = _load_view(run_id, trace, tools, catalog, store, console)
    if step is not None:
        detail = view.step_detail(step)
        if detail is None:
            raise fail(console, f"run {view.run_id} has no step '{step}'", ExitCode.USAGE)
        if json_out:
            print(json_text(detail))
        else:
            render_step(console, view, step)
        return
    if json_out:
        shown = view.result.to_dict()
        print(json_text(shown if newer is None else {**shown, REPLANNED_AS: newer}))
    else:
        render_show(console, view, replanned_as=newer)


def _load_view(
    run_id: str | None,
    trace: Path | None,
    tools: list[str] | None,
    catalog: list[Path] | None,
    store: str | None,
    console: Console,
) -> tuple[RunView, str | None]:
    """The run's view, and the run version that replaced it, if the store says one did (a
    trace file does not say)."""
    if trace is not None:
        try:
            return read_trace(trace, run_id), None
        except TraceError as exc:
            raise fail(console, exc.message, ExitCode.USAGE) from None
    if run_id is None:
        raise fail(console, "give a RUN_ID (or --trace FILE)", ExitCode.USAGE)
    the_store = open_store_or_exit(store, console, create=False)
    secrets: dict[str, frozenset[str]] = {}
    run = the_store.get_run(run_id)
    if tools or catalog:
        registry = registry_from(tools, catalog, console)
        for raw in run.plan.get("steps", []) if run is not None else []:
            secrets[raw["id"]] = secret_params_of(registry.spec(raw.get("tool") or ""))
    view = RunView.from_store(the_store, run_id, lambda sid: secrets.get(sid, frozenset()))
    if view is None or run is None:
        raise fail(console, f"no run '{run_id}' in this store", ExitCode.USAGE)
    return view, replaced_by(run)


def _when(ts: float | None) -> str:
    if ts is None:
        return "—"
    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


def _secs(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}s"


def _tokens(usage: dict[str, int]) -> str:
    if not usage:
        return "—"
    return f"{usage.get('input_tokens', 0)}→{usage.get('output_tokens', 0)}"


def render_show(console: Console, view: RunView, replanned_as: str | None = None) -> None:
    """Summary, per-step table, timeline and output of a run (``replanned_as``: the run
    version that replaced it, which is the one to resume)."""
    s = view.summary()
    _icon, style = STATUS_STYLE.get(s["status"], ("", "bold"))
    console.print(
        Text.assemble(("run ", "bold"), (view.run_id, "bold cyan"), "  ", (f"{s['status']}", style))
    )
    if replanned_as is not None:
        console.print(
            Text(
                f"{replaced_note(replanned_as)}; nothing of this run runs again: resume"
                f" {replanned_as} (`planrail resume {replanned_as}`)",
                "yellow",
            )
        )
    if s["goal"]:
        console.print(Text(f"goal     {s['goal']}"))
    counts = ", ".join(f"{n} {k}" for k, n in s["counts"].items())
    console.print(Text(f"started  {_when(s['started_at'])}   elapsed {_secs(s['elapsed'])}"))
    console.print(Text(f"steps    {s['steps']}: {counts}   retries {s['retries']}"))
    if s["tokens"]:
        t = s["tokens"]
        console.print(
            Text(f"tokens   in {t.get('input_tokens', 0)}, out {t.get('output_tokens', 0)}")
        )
    if s["error"]:
        console.print(Text(f"error    {s['error']}", "red"))
    stages = _stages(view)
    if stages is not None:
        console.print(stages)
    console.print(_step_table(view))
    console.print(_timeline(view))
    if view.result.output is not None:
        console.print(Text("output", "bold"))
        console.print_json(json_text(view.result.output))


def _stages(view: RunView) -> Table | None:
    """The plan's stages as groups: sub-goal, steps with their status, the check's verdict."""
    stages = view.plan.get("stages") or []
    if not stages:
        return None
    verdicts = {
        e["data"].get("stage"): e["data"]
        for e in view.events
        if e["type"] == EventType.STAGE_CHECKED
    }
    table = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("stage", "sub-goal", "steps", "check"):
        table.add_column(col)
    for stage in stages:
        steps = Text()
        for sid in stage.get("steps", []):
            r = view.result.steps.get(sid)
            icon, style = STATUS_STYLE.get(str(r.status) if r else "", ("", ""))
            steps.append(f"{icon} {sid}  ", style)
        verdict = verdicts.get(stage.get("id"))
        if verdict is None:
            check = Text("confirm: not reached" if stage.get("confirm") else "—", "dim")
        elif verdict.get("ok"):
            check = Text(f"confirmed: {verdict.get('reason')}", "green")
        else:
            check = Text(f"not confirmed: {verdict.get('reason')}", "red")
        table.add_row(str(stage.get("id")), str(stage.get("goal", "")), steps, check)
    return table


def _step_table(view: RunView) -> Table:
    table = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("step", "status", "attempts", "duration", "tokens", "error / reason"):
        table.add_column(col, justify="right" if col in ("attempts", "duration") else "left")
    for sid, r in view.result.steps.items():
        icon, style = STATUS_STYLE.get(str(r.status), ("", ""))
        status = str(r.status) + (" (degraded)" if r.degraded else "")
        dur = r.finished_at - r.started_at if r.started_at and r.finished_at else None
        if r.error:
            detail = Text(f"{r.error.get('type')}: {r.error.get('message')}", "red")
        else:
            detail = Text(r.reason or "", "yellow")
        table.add_row(
            sid,
            Text(f"{icon} {status}", style),
            str(r.attempts),
            _secs(dur),
            _tokens(r.usage),
            detail,
        )
    return table


def _timeline(view: RunView) -> Group:
    """A Gantt chart: one bar per step that ran, on a shared time axis; ↻ marks a retry."""
    ran = [r for r in view.result.steps.values() if r.started_at is not None]
    if not ran:
        return Group(Text("timeline: no step ran", "dim"))
    t0 = min(r.started_at for r in ran if r.started_at is not None)
    t1 = max((r.finished_at or r.started_at or t0) for r in ran)
    span = max(t1 - t0, 1e-9)
    retries: dict[str, list[float]] = {}
    for e in view.events:
        if e["type"] == EventType.RETRY_SCHEDULED and e["step_id"]:
            retries.setdefault(e["step_id"], []).append(e["at"])

    def col(t: float) -> int:
        return min(int((t - t0) / span * TIMELINE_WIDTH), TIMELINE_WIDTH - 1)

    table = Table(box=None, show_header=False, pad_edge=False)
    table.add_column("step")
    table.add_column("bar", no_wrap=True)
    table.add_column("time", justify="right")
    rows = sorted(ran, key=lambda r: (r.started_at or 0.0, r.id))
    for r in rows[:TIMELINE_ROWS]:
        assert r.started_at is not None
        a, b = col(r.started_at), col(r.finished_at or t1)
        cells = [" "] * TIMELINE_WIDTH
        for i in range(a, b + 1):
            cells[i] = "█"
        for t in retries.get(r.id, ()):
            cells[col(t)] = "↻"
        _, style = STATUS_STYLE.get(str(r.status), ("", ""))
        bar = Text("▕", "dim") + Text("".join(cells), style) + Text("▏", "dim")
        table.add_row(r.id, bar, f"+{r.started_at - t0:.2f}s")
    head = Text(f"timeline  0s … {span:.2f}s", "bold")
    more = len(rows) - TIMELINE_ROWS
    tail = [Text(f"… {more} more step(s) not drawn", "dim")] if more > 0 else []
    return Group(head, table, *tail)


def render_step(console: Console, view: RunView, step_id: str) -> None:
    """One step: what it calls, its resolved inputs, output, attempts and events."""
    d = view.step_detail(step_id)
    assert d is not None
    _icon, style = STATUS_STYLE.get(d["status"], ("", ""))
    console.print(
        Text.assemble(("step ", "bold"), (step_id, "bold cyan"), "  ", (d["status"], style))
    )
    rows: list[tuple[str, Any]] = [
        ("run", view.run_id),
        ("calls", d["calls"]),
        ("after", ", ".join(d["depends_on"]) or "—"),
        ("attempts", d["attempts"]),
        ("started", _when(d["started_at"])),
        ("duration", _secs(_dur(d))),
        ("idempotency", d["idempotency_key"] or "—"),
        ("tokens", _tokens(d["usage"])),
    ]
    if d["trace"]:
        span = f"  span {d['trace']['span_id']}" if "span_id" in d["trace"] else ""
        rows.append(("trace", f"{d['trace']['trace_id']}{span}"))
    if d["reason"]:
        rows.append(("reason", d["reason"]))
    if d["error"]:
        rows.append(("error", f"{d['error'].get('type')}: {d['error'].get('message')}"))
    for k, v in rows:
        console.print(Text.assemble((f"{k:<12}", "dim"), str(v)))
    for title, value in (("inputs", d["inputs"]), ("output", d["output"])):
        console.print(Text(title, "bold"))
        if value is None:
            console.print(Text("  —", "dim"))
        else:
            console.print_json(json_text(value))
    console.print(Text("attempts", "bold"))
    _history(console, d["attempt_history"], d["events"])


def _dur(d: dict[str, Any]) -> float | None:
    if d["started_at"] is None or d["finished_at"] is None:
        return None
    return float(d["finished_at"] - d["started_at"])


def _history(console: Console, history: Iterable[dict[str, Any]], events: list[Any]) -> None:
    lines = 0
    for rec in history:
        err = rec.get("error")
        what = f"failed: {err.get('type')}: {err.get('message')}" if err else "succeeded"
        extra = f", then waited {rec['delay']:.2f}s" if rec.get("delay") is not None else ""
        dur = f" in {rec['duration']:.2f}s" if rec.get("duration") is not None else ""
        console.print(Text(f"  #{rec.get('attempt', '?')} {what}{dur}{extra}"))
        lines += 1
    if lines == 0:  # no recorded history: tell the story from the events
        t0 = events[0]["at"] if events else 0.0
        for e in events:
            detail = e["data"].get("reason") or (e["data"].get("error") or {}).get("message") or ""
            attempt = f" (attempt {e['attempt']})" if e["attempt"] else ""
            console.print(Text(f"  +{e['at'] - t0:.2f}s {e['type']}{attempt} {detail}".rstrip()))


# ---------------------------------------------------------------------- graph


class GraphFormat(enum.StrEnum):
    mermaid = "mermaid"
    dot = "dot"
    svg = "svg"


@app.command("graph")
def graph_cmd(
    target: Annotated[
        str, typer.Argument(help="A plan file, a run id in the store, or a trace file (.jsonl).")
    ],
    fmt: Annotated[GraphFormat, typer.Option("--format", "-f", help="Output format.")] = (
        GraphFormat.mermaid
    ),
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write to this file, not stdout.")
    ] = None,
    store: StoreOpt = None,
) -> None:
    """The dependency graph of a plan, or of a run coloured by step status.

    SVG is laid out by planrail itself: no Graphviz needed.
    """
    console = out(output is None)
    graph = _graph_of(target, store, console)
    text = {"mermaid": to_mermaid, "dot": to_dot, "svg": to_svg}[fmt.value](graph)
    if output is None:
        print(text, end="")
    else:
        try:
            output.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise fail(
                console, f"--output {output}: {exc.strerror or exc}", ExitCode.USAGE
            ) from None
        console.print(f"wrote {output} ({fmt.value}, {len(graph.deps)} steps)")


def _graph_of(target: str, store: str | None, console: Console) -> DepGraph:
    path = Path(target)
    if path.suffix == ".jsonl" and path.is_file():
        try:
            view = read_trace(path)
        except TraceError as exc:
            raise fail(console, exc.message, ExitCode.USAGE) from None
        return _run_graph(view)
    if path.suffix in (".json", ".yaml", ".yml") or path.exists():
        check_plan_path(path, console)
        report = validate(path)
        if report.plan is None:
            print_issues(console, report, str(path))
            raise typer.Exit(ExitCode.INVALID_PLAN)
        return DepGraph.of(report.plan)
    try:
        opened = open_store(store, create=False)  # its own messages: not open_store_or_exit
        when_the_command_ends(opened.close)
        stored = RunView.from_store(opened, target)
    except StoreNotFoundError as exc:
        raise fail(
            console,
            f"'{target}' is neither a plan file nor a run id: {exc.message}",
            ExitCode.USAGE,
        ) from None
    except PlanrailError as exc:
        raise fail(console, exc.message, ExitCode.USAGE) from None
    if stored is None:
        raise fail(console, f"'{target}' is neither a plan file nor a run id", ExitCode.USAGE)
    return _run_graph(stored)


def _run_graph(view: RunView) -> DepGraph:
    return DepGraph.of(view.plan, {sid: str(r.status) for sid, r in view.result.steps.items()})
