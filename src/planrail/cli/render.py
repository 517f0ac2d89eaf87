"""Human output: validation issues, plan tables, run summaries. Rich, but plain when piped."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from planrail.cli.jsonout import json_text
from planrail.engine.result import RunResult
from planrail.plan.compiled import CompiledPlan
from planrail.plan.validate import Issue, ValidationReport

__all__ = ["STATUS_STYLE", "print_issues", "print_plan", "print_result", "print_warnings"]

STATUS_STYLE = {
    "pending": ("·", "dim"),
    "running": ("▶", "cyan"),
    "succeeded": ("✓", "green"),
    "failed": ("✗", "red"),
    "skipped": ("↷", "yellow"),
    "cancelled": ("■", "magenta"),
    "in_doubt": ("?", "bold red"),
}


def print_issues(console: Console, report: ValidationReport, source: str) -> None:
    """Every error and warning, with where it is and how to fix it."""
    if report.valid:
        console.print(f"[green]✓[/] {source} is valid ({_count(report.warnings, 'warning')})")
    else:
        console.print(
            f"[red]✗[/] {source} is invalid: {_count(report.errors, 'error')}, "
            f"{_count(report.warnings, 'warning')} — nothing was executed"
        )
    _issues(console, report.errors, report.warnings)


def print_warnings(console: Console, warnings: list[Issue], source: str) -> None:
    """A valid plan's warnings, printed before it runs (nothing when it has none): what may
    be a mistake in it — a placeholder such as ``TBD``, a lint — is seen before approving."""
    if warnings:
        console.print(
            f"[yellow]![/] {escape(source)} is valid, with {_count(warnings, 'warning')}:"
            " it runs as written"
        )
        _issues(console, [], warnings)


def _issues(console: Console, errors: list[Issue], warnings: list[Issue]) -> None:
    for kind, style, issues in (("error", "red", errors), ("warning", "yellow", warnings)):
        for issue in issues:
            _issue(console, kind, style, issue)


def _issue(console: Console, kind: str, style: str, issue: Issue) -> None:
    where = f"step '{issue.step}'" if issue.step else "plan"
    head = Text.assemble(
        (f"  {kind} ", style), (f"[{issue.code}] ", "bold"), f"{where} at ", (issue.path, "cyan")
    )
    console.print(head)
    console.print(Text("      " + issue.message))


def _count(items: list[Any], word: str) -> str:
    return f"{len(items)} {word}{'' if len(items) == 1 else 's'}"


def print_plan(console: Console, compiled: CompiledPlan) -> None:
    """The plan as a table: each step, what it calls, what it waits for, where its inputs
    come from ("user" for literals, else the producing steps) and its side effects."""
    plan = compiled.plan
    table = Table(title=plan.goal or None, show_lines=False, expand=False)
    table.add_column("step", style="bold")
    table.add_column("calls")
    table.add_column("after")
    table.add_column("arguments (source)")
    table.add_column("side effects")
    for step in plan.steps:
        known = compiled.steps[step.id]
        what = step.tool or step.action
        args = []
        for name in step.args or {}:
            producers = dict.fromkeys(r.step for r in known.references_under("args", name))
            src = ", ".join(producers) or "user"
            style = "green" if src == "user" else "cyan"
            args.append(f"{name} [{style}]({src})[/]")
        row = [step.id, what, ", ".join(step.depends_on) or "—", "\n".join(args) or "—"]
        effect = known.effect.side_effects
        row.append(f"[yellow]{effect}[/]" if effect != "none" else effect)
        table.add_row(*row)
    console.print(table)


RESULT_ROWS = 50
"""At most this many steps get a row in a run's summary; the rest are counted in one line."""


def print_result(
    console: Console,
    result: RunResult,
    order: Iterable[str] | None = None,
    rows: int = RESULT_ROWS,
) -> None:
    """The final summary table of a run: a row per step, at most ``rows`` of them.

    A larger run shows every step that did not succeed first (in plan order, up to ``rows``),
    then succeeded ones while rows are left, and counts the rest by status in one line:
    rendering a table of thousands of rows takes seconds and shows nothing a person reads.
    ``planrail show RUN_ID`` and ``--json`` list every step."""
    table = Table(title=f"run {result.run_id}: {result.status}")
    for col in ("step", "status", "attempts", "duration", "output / error / reason"):
        table.add_column(col)
    shown, folded = _fold(result, list(order or result.steps), rows)
    for sid in shown:
        r = result.steps[sid]
        icon, style = STATUS_STYLE.get(str(r.status), ("", ""))
        dur = (
            f"{r.finished_at - r.started_at:.2f}s"
            if r.started_at is not None and r.finished_at is not None
            else "—"
        )
        if r.error:
            detail = f"[red]{escape(str(r.error['type']))}: {escape(str(r.error['message']))}[/]"
        elif r.reason:
            detail = f"[yellow]{escape(r.reason)}[/]"
        else:
            detail = _short(r.output)
        table.add_row(sid, f"[{style}]{icon} {r.status}[/]", str(r.attempts), dur, detail)
    console.print(table)
    if folded:
        counts = Counter(str(result.steps[sid].status) for sid in folded)
        said = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
        console.print(
            f"… and {len(folded)} more step(s) not shown ({said}):"
            f" `planrail show {result.run_id}` or --json lists every step"
        )
    if result.error:
        console.print(f"[red]{escape(result.error)}[/]")


def _fold(result: RunResult, order: list[str], rows: int) -> tuple[list[str], list[str]]:
    """The steps that get a row (in ``order``) and the ones that are only counted."""
    if len(order) <= rows:
        return order, []
    first = [sid for sid in order if str(result.steps[sid].status) != "succeeded"][:rows]
    first += [sid for sid in order if str(result.steps[sid].status) == "succeeded"][
        : rows - len(first)
    ]
    chosen = set(first)
    return [sid for sid in order if sid in chosen], [sid for sid in order if sid not in chosen]


def _short(value: Any, limit: int = 80) -> str:

    text = value if isinstance(value, str) else json_text(value)
    text = text.replace("[", "\\[")
    return text if len(text) <= limit else text[: limit - 1] + "…"
