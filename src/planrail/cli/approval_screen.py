"""The approval screen on a terminal, drawn from the library's model
(:class:`planrail.engine.approval_view.ApprovalView`), and ``planrail review``.

Untrusted-derived values are drawn in bold red with ``!``; the short plan hash the approval
binds to comes last, right above the question.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from planrail.cli.common import (
    CatalogOpt,
    ExitCode,
    JsonOpt,
    PolicyOpt,
    StrictOpt,
    ToolsOpt,
    app,
    check_plan_path,
    fail,
    out,
    registry_from,
    report_invalid,
    security_policy,
)
from planrail.cli.render import print_warnings
from planrail.engine.approval_view import ApprovalView, build_view
from planrail.errors import PlanrailError
from planrail.plan.validate import check_plan
from planrail.runs import prepare
from planrail.runs.build import validation_options

__all__ = ["print_view"]

MAX_VALUE = 160
"""Characters of one value shown on the terminal (``--json`` has them all)."""
MAX_READ_ONLY = 12
"""Read-only steps listed by name; beyond that, only their count."""


def _value_text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = text.replace("\n", "⏎")
    return text if len(text) <= MAX_VALUE else f"{text[:MAX_VALUE]}… ({len(text):,} chars)"


def print_view(console: Console, view: ApprovalView) -> None:
    """Draw the approval screen: values, provenance, replan diff, collapsed read-only steps."""
    head = Text.assemble(("approval needed", "bold"), f" — {view.reason}: {view.goal}")
    console.print(head)
    if view.diff is not None:
        d = view.diff
        console.print(
            Text(
                f"changed since the approved version {d.previous_hash[:19]}…:"
                f" added {', '.join(d.added) or '—'}; changed {', '.join(d.changed) or '—'};"
                f" removed {', '.join(d.removed) or '—'}",
                "yellow",
            )
        )
        for sid, delta in d.args.items():
            for name, ba in delta.items():
                console.print(
                    Text(
                        f"  {sid}.{name}: {_value_text(ba['before'])} → {_value_text(ba['after'])}"
                    )
                )
    for step in view.steps:
        mark = f" [{step.change}]" if step.change and step.change != "same" else ""
        console.print(
            Text.assemble(
                (step.id, "bold"), f" calls {step.tool} ({step.side_effects}){mark}", style=""
            )
        )
        for arg in step.args:
            style = "bold red" if arg.untrusted else "green"
            flag = "! " if arg.untrusted else "  "
            later = "" if arg.known else " (known at run time)"
            console.print(
                Text.assemble(
                    f"  {flag}{arg.name} = ", (_value_text(arg.value), style), (later, "dim")
                )
            )
            for src in arg.sources:
                console.print(Text(f"      ← {src.text}", "red" if not src.trusted else "dim"))
    if view.read_only:
        names = [f"{sid} ({tool})" for sid, tool in view.read_only[:MAX_READ_ONLY]]
        more = len(view.read_only) - MAX_READ_ONLY
        extra = f" and {more} more" if more > 0 else ""
        console.print(Text(f"read-only, run without asking: {', '.join(names)}{extra}", "dim"))
    if view.reused:
        console.print(Text(f"reused (not run again): {', '.join(view.reused)}", "dim"))
    warn = f"; {len(view.untrusted)} with untrusted values (!)" if view.untrusted else ""
    console.print(
        Text(
            f"{len(view.steps)} step(s) change the world{warn}. Approving binds plan"
            f" {view.short_hash}…"
        )
    )


@app.command("review")
def review_cmd(
    plan: Annotated[Path, typer.Argument(help="Plan file (JSON or YAML).")],
    tools: ToolsOpt = None,
    catalog: CatalogOpt = None,
    policy: PolicyOpt = None,
    strict: StrictOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Show the approval screen of a plan without running anything (--json: its data)."""
    console = out(json_out)
    check_plan_path(plan, console)
    registry = registry_from(tools, catalog, console)
    security = security_policy(policy, strict, console)
    # Validated once, with the options the policy's run needs: prepare() does not do it again.
    report = check_plan(plan, registry, options=validation_options(security))
    if report.compiled is None:
        report_invalid(console, report, str(plan), json_out)
        raise typer.Exit(ExitCode.INVALID_PLAN)
    print_warnings(console, report.warnings, str(plan))
    try:
        execution = prepare(report.compiled, registry, security=security)
    except PlanrailError as exc:
        raise fail(console, exc.message, ExitCode.USAGE) from None
    view = build_view(execution.approval_request())
    if json_out:
        print(json.dumps(view.to_dict(), ensure_ascii=False, default=str))
    else:
        print_view(console, view)
