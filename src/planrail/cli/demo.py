"""``planrail demo``: the onboarding story, end to end, on embedded defaults.

1. The flat to-do list an agent wrote is rejected by the validator, with the reasons.
2. The dependency graph runs with live progress; independent steps overlap.
3. The rows it created in the local SQLite CRM are shown.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from contextlib import closing
from importlib import resources
from pathlib import Path

from rich.console import Console
from rich.rule import Rule
from rich.table import Table

from planrail.cli.jsonout import json_text
from planrail.cli.render import print_issues, print_plan, print_result
from planrail.engine.approval import approve_all
from planrail.engine.result import StepResult
from planrail.plan.tools import ToolRegistry
from planrail.plan.validate import validate
from planrail.runs import prepare

__all__ = ["run_demo"]


def _plan_text(name: str) -> str:
    return resources.files("planrail.demo").joinpath(name).read_text(encoding="utf-8")


def run_demo(console: Console, *, fast: bool = False, crm: Path | None = None) -> int:
    """Run the demo; returns the exit code (0 when the onboarding succeeded)."""
    crm = crm or Path(".planrail/demo/crm.sqlite")
    crm.parent.mkdir(parents=True, exist_ok=True)
    crm.unlink(missing_ok=True)
    os.environ["PLANRAIL_DEMO_CRM"] = str(crm)
    if fast:
        os.environ["PLANRAIL_DEMO_LATENCY"] = "0"
    from planrail.demo import onboarding

    onboarding.LATENCY = 0.0 if fast else onboarding.LATENCY
    registry = ToolRegistry(onboarding.TOOLS)

    console.print(Rule("[bold]planrail demo[/]: onboard Alice as a new pro customer"))
    console.print(
        "\n[bold]1. The flat to-do list an agent wrote[/] (steps in list order, "
        "no declared dependencies)\n"
    )
    flat = validate(_plan_text("flat_plan.json"), registry)
    print_issues(console, flat, "the flat plan")
    console.print(
        "\n[dim]Run as a list, 'subscription' would start before 'price' exists, and "
        "'welcome' would pass an id nobody produced. planrail refuses it.[/]\n"
    )

    console.print("[bold]2. The same work as a dependency graph[/]\n")
    report = validate(_plan_text("plan.json"), registry)
    if report.compiled is None:  # the shipped plan is tested; this guards a broken install
        print_issues(console, report, "the demo plan")
        return 3
    print_plan(console, report.compiled)
    console.print(
        "[dim]Approved automatically for the demo (`planrail run` asks, or takes --yes).[/]\n"
    )

    from planrail.cli.progress import make_progress

    execution = prepare(report.compiled, registry, approver=approve_all)
    progress = make_progress(console, [s.id for s in execution.plan.steps], quiet=False)
    execution.observers.append(progress)
    with progress:
        result = asyncio.run(execution.run())
    print_result(console, result)
    _timeline(console, result.steps)

    console.print(f"\n[bold]3. What is in the CRM now[/] ({crm})\n")
    _show_crm(console, crm)
    console.print(f"\nrun output: {json_text(result.output)}")
    return 0 if result.succeeded else 1


def _timeline(console: Console, steps: dict[str, StepResult]) -> None:
    rows = [s for s in steps.values() if s.started_at is not None]
    if not rows:
        return
    t0 = min(s.started_at for s in rows if s.started_at is not None)
    t1 = max(s.finished_at or 0.0 for s in rows)
    width = 40
    span = max(t1 - t0, 1e-9)
    console.print("\ntimeline (steps on the same columns ran at the same time):")
    for s in rows:
        if s.started_at is None or s.finished_at is None:
            continue
        a = int((s.started_at - t0) / span * width)
        b = max(a + 1, int((s.finished_at - t0) / span * width))
        bar = " " * a + "█" * (b - a)
        console.print(
            f"  {s.id:<13} |{bar:<{width}}| {s.started_at - t0:5.2f}s → {s.finished_at - t0:5.2f}s",
            highlight=False,
        )


def _show_crm(console: Console, crm: Path) -> None:
    with closing(sqlite3.connect(crm)) as conn:
        for table_name in ("accounts", "subscriptions", "workspaces", "outbox"):
            cur = conn.execute(f"SELECT * FROM {table_name}")
            cols = [d[0] for d in cur.description]
            table = Table(title=table_name, title_justify="left")
            for c in cols:
                table.add_column(c)
            for row in cur.fetchall():
                table.add_row(*(str(v) for v in row))
            console.print(table)
