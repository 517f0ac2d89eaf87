"""The ``planrail`` command. Exit codes are part of the contract (see ``docs/cli.md``)."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from planrail.cli.mcp_tools import McpConfigOpt, McpOpt, add_mcp_tools, pin_mcp_schemas
from planrail.cli.render import print_issues, print_plan, print_result
from planrail.clock import SYSTEM_CLOCK
from planrail.engine.executor import Execution
from planrail.engine.result import RunResult
from planrail.errors import PlanrailError, ToolLoadError
from planrail.plan.catalog import load_catalog, load_tools
from planrail.plan.model import Plan
from planrail.plan.tools import ToolRegistry
from planrail.plan.validate import ValidationReport, validate
from planrail.policies.security import CallApprovalRequest, SecurityPolicy
from planrail.store import Store, open_store

__all__ = ["ExitCode", "app", "main"]


class ExitCode(enum.IntEnum):
    OK = 0
    RUN_FAILED = 1
    USAGE = 2
    INVALID_PLAN = 3
    APPROVAL_REFUSED = 4
    INTERRUPTED = 130


app = typer.Typer(
    name="planrail",
    help="Plans as dependency graphs for multi-step LLM agents: validate, approve, execute.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

ToolsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--tools",
        "-t",
        help="Module path (pkg.module) or .py file with @planrail.tool functions; repeatable.",
    ),
]
CatalogOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--catalog", "-c", help="Tool catalog JSON (MCP or OpenAI function form); repeatable."
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")]
StoreOpt = Annotated[
    str | None,
    typer.Option(
        "--store",
        envvar="PLANRAIL_STORE",
        show_envvar=True,
        help="sqlite:///path.db, postgresql://… or memory:// "
        "[default: sqlite:///.planrail/planrail.db]",
    ),
]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress display.")]
TraceOpt = Annotated[
    Path | None, typer.Option("--trace", help="Append the run's events to this JSON Lines file.")
]


def _out(json_mode: bool) -> Console:
    """Human output goes to stdout, or to stderr when stdout carries JSON."""
    return Console(stderr=json_mode, highlight=False)


def _fail(console: Console, message: str, code: ExitCode) -> typer.Exit:
    console.print(f"[red]error:[/] {escape(message)}", highlight=False)
    return typer.Exit(int(code))


def registry_from(
    tools: list[str] | None, catalogs: list[Path] | None, console: Console
) -> ToolRegistry:
    """Every tool named on the command line, or a usage error (exit 2) saying what failed."""
    registry = ToolRegistry()
    try:
        for cat in catalogs or ():
            for spec in load_catalog(cat):
                registry.add(spec)
        for target in tools or ():
            for t in load_tools(target):
                registry.add(t)
    except ToolLoadError as exc:
        raise _fail(console, exc.message, ExitCode.USAGE) from None
    return registry


def _check_plan_path(path: Path, console: Console) -> None:
    if not path.exists():
        raise _fail(console, f"{path}: no such file", ExitCode.USAGE)
    if path.is_dir():
        raise _fail(console, f"{path}: is a directory, not a plan file", ExitCode.USAGE)


@app.command("validate")
def validate_cmd(
    plan: Annotated[Path, typer.Argument(help="Plan file (JSON or YAML).")],
    tools: ToolsOpt = None,
    catalog: CatalogOpt = None,
    json_out: JsonOpt = False,
    mcp: McpOpt = None,
    mcp_config: McpConfigOpt = None,
) -> None:
    """Check a plan statically: every problem at once, nothing executed (exit 3 if invalid)."""
    console = _out(json_out)
    _check_plan_path(plan, console)
    registry = registry_from(tools, catalog, console)
    hub = add_mcp_tools(registry, mcp, mcp_config, console)
    has_tools = bool(tools or catalog) or hub is not None
    report = validate(plan, registry if has_tools else None)
    if json_out:
        print(json.dumps(report.to_dict(), ensure_ascii=False))
    else:
        print_issues(console, report, str(plan))
        if not has_tools and report.valid:
            console.print("[dim]tools were not checked: pass --tools or --catalog[/]")
    raise typer.Exit(ExitCode.OK if report.valid else ExitCode.INVALID_PLAN)


def needs_approval(plan: Plan, registry: ToolRegistry) -> dict[str, str]:
    """Steps that change the world (or ask for approval), with their side-effect class."""
    found: dict[str, str] = {}
    for step in plan.steps:
        spec = registry.spec(step.tool or "") if step.action == "tool_call" else None
        effect = spec.side_effects if spec is not None else "none"
        wanted = step.requires_approval
        if wanted is None and spec is not None:
            wanted = spec.requires_approval
        if wanted is None:
            wanted = effect != "none"
        if wanted:
            found[step.id] = effect
    return found


def side_effects_of(plan: Plan, registry: ToolRegistry) -> dict[str, str]:
    """Each step's side-effect class, for the approval table ("none" for non-tool steps)."""
    effects: dict[str, str] = {}
    for step in plan.steps:
        spec = registry.spec(step.tool or "") if step.action == "tool_call" else None
        effects[step.id] = spec.side_effects if spec is not None else "none"
    return effects


def approve(
    console: Console, plan: Plan, registry: ToolRegistry, *, yes: bool
) -> dict[str, Any] | None:
    """Show the plan and ask a person, unless ``--yes`` or nothing changes the world.

    Returns the approval record (bound to the plan's hash), or None when refused.
    """
    pending = needs_approval(plan, registry)
    record = {
        "plan_hash": plan.hash,
        "at": SYSTEM_CLOCK.now(),
        "by": "not required" if not pending else "--yes" if yes else "operator",
    }
    if not pending or yes:
        return record
    effects = side_effects_of(plan, registry)
    print_plan(console, plan, effects)
    console.print(f"{len(pending)} step(s) change the world: {', '.join(pending)}")
    if not sys.stdin.isatty():
        console.print("[red]approval needed[/]: no terminal to ask on; pass --yes to approve")
        return None
    return record if typer.confirm("Run this plan?", default=False, err=True) else None


def execute(execution: Execution, console: Console, *, quiet: bool) -> RunResult:
    """Run with live progress; Ctrl-C cancels the run cleanly and exits 130."""
    from planrail.cli.progress import make_progress

    progress = make_progress(console, [s.id for s in execution.plan.steps], quiet=quiet)
    execution.observers.append(progress)
    with progress:
        try:
            return asyncio.run(execution.run())
        except KeyboardInterrupt:
            pass
        except PlanrailError as exc:  # the run could not start: busy, or another plan
            raise _fail(console, exc.message, ExitCode.USAGE) from None
    result = execution.result()
    console.print("[magenta]interrupted[/]: running steps were cancelled; the run is cancelled")
    return result


def emit_result(result: RunResult, console: Console, *, json_out: bool) -> None:
    if json_out:
        print(json.dumps(result.to_dict(), ensure_ascii=False, default=str))
    else:
        print_result(console, result)
        if result.output is not None:
            console.print_json(json.dumps(result.output, ensure_ascii=False, default=str))


def exit_code(result: RunResult) -> ExitCode:
    if result.status == "succeeded":
        return ExitCode.OK
    if result.status == "cancelled":
        return ExitCode.INTERRUPTED
    return ExitCode.RUN_FAILED


@app.command("run")
def run_cmd(
    plan: Annotated[Path, typer.Argument(help="Plan file (JSON or YAML).")],
    tools: ToolsOpt = None,
    catalog: CatalogOpt = None,
    run_id: Annotated[str | None, typer.Option("--run-id", help="Id for this run.")] = None,
    max_concurrency: Annotated[
        int | None, typer.Option("--max-concurrency", min=1, help="Most steps running at once.")
    ] = None,
    fail_fast: Annotated[
        bool, typer.Option("--fail-fast", help="Cancel everything in flight on the first failure.")
    ] = False,
    store: StoreOpt = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Approve without asking.")] = False,
    quiet: QuietOpt = False,
    trace: TraceOpt = None,
    policy: Annotated[
        Path | None,
        typer.Option("--policy", help="Security policy file (JSON/YAML); see docs/security.md."),
    ] = None,
    strict: Annotated[
        bool,
        typer.Option(
            "--strict",
            help="Strict security: side-effecting tools need an allow rule, and their arguments"
            " from tool or LLM output need approval at run time.",
        ),
    ] = False,
    json_out: JsonOpt = False,
    mcp: McpOpt = None,
    mcp_config: McpConfigOpt = None,
) -> None:
    """Validate, approve and execute a plan by dependency (exit 1 if a step failed).

    A --run-id that already exists with the same plan resumes that run instead.
    """
    console = _out(json_out)
    _check_plan_path(plan, console)
    registry = registry_from(tools, catalog, console)
    hub = add_mcp_tools(registry, mcp, mcp_config, console)
    if not tools and hub is None:
        raise _fail(
            console, "run needs --tools or --mcp: the code of the plan's tools", ExitCode.USAGE
        )
    report = validate(plan, registry)
    if not report.valid:
        _report_invalid(console, report, str(plan), json_out)
        raise typer.Exit(ExitCode.INVALID_PLAN)
    assert report.plan is not None
    security = _security_policy(policy, strict, console)
    the_store = open_store_or_exit(store, console)
    existing = the_store.get_run(run_id) if run_id else None
    approval = existing.approval if existing is not None else None
    if approval is None or approval.get("plan_hash") != report.plan.hash:
        approval = approve(console, report.plan, registry, yes=yes)
    approval = pin_mcp_schemas(hub, approval, report.plan, registry)
    if approval is None:
        if json_out:
            refused: dict[str, Any] = {
                "run_id": run_id,
                "status": "awaiting_approval",
                "output": None,
                "steps": [],
                "error": "approval refused: nothing was executed",
            }
            print(json.dumps(refused))
        console.print("[red]approval refused[/]: nothing was executed")
        raise typer.Exit(ExitCode.APPROVAL_REFUSED)
    execution = Execution(
        report.plan,
        registry,
        run_id=run_id,
        max_concurrency=max_concurrency,
        failure_mode="fail_fast" if fail_fast else "continue",
        store=the_store,
        approval=approval,
        security=security,
        approve_call=_ask_call(console) if security is not None else None,
    )
    from planrail.cli.progress import attach_observers

    attach_observers(execution, trace, console)
    result = execute(execution, console, quiet=quiet or json_out)
    emit_result(result, console, json_out=json_out)
    raise typer.Exit(exit_code(result))


def _security_policy(path: Path | None, strict: bool, console: Console) -> SecurityPolicy | None:
    """The ``--policy`` file (with ``--strict`` forcing strict mode), or None; exit 2 if bad."""
    if path is None and not strict:
        return None
    try:
        found = SecurityPolicy.load(path) if path is not None else SecurityPolicy()
    except PlanrailError as exc:
        raise _fail(console, f"{path}: {exc.message}", ExitCode.USAGE) from None
    return dataclasses.replace(found, strict=True) if strict else found


def _ask_call(console: Console) -> Any:
    """Runtime approval of one tool call: asked on the terminal; refused without one (--yes
    approves the plan, never a call the security policy holds back)."""

    def ask(request: CallApprovalRequest) -> bool:
        if not sys.stdin.isatty():
            return False
        console.print(
            f"step [bold]{request.step_id}[/] calls [bold]{request.tool}[/]:"
            f" {request.decision.reason}"
        )
        console.print_json(json.dumps(request.args, ensure_ascii=False, default=str))
        return typer.confirm(
            f"Allow this call ({request.args_hash[:19]}…)?", default=False, err=True
        )

    return ask


def open_store_or_exit(url: str | None, console: Console) -> Store:
    """The store named by ``--store``/``PLANRAIL_STORE`` (default SQLite), or exit 2 saying why."""
    try:
        return open_store(url)
    except PlanrailError as exc:
        raise _fail(console, exc.message, ExitCode.USAGE) from None


def _report_invalid(
    console: Console, report: ValidationReport, source: str, json_out: bool
) -> None:
    if json_out:
        print(json.dumps(report.to_dict(), ensure_ascii=False))
    else:
        print_issues(console, report, source)


@app.command("demo")
def demo_cmd(
    fast: Annotated[bool, typer.Option("--fast", help="No simulated latency.")] = False,
) -> None:
    """The built-in end-to-end demonstration: onboarding on a local SQLite CRM (no network)."""
    from planrail.cli.demo import run_demo

    raise typer.Exit(run_demo(Console(highlight=False), fast=fast))


def main(argv: list[str] | None = None) -> Any:
    """Entry point of the ``planrail`` script."""
    try:
        return app(args=argv, prog_name="planrail")
    except PlanrailError as exc:  # anything not handled by a command: one line, never a traceback
        Console(stderr=True).print(f"[red]error:[/] {escape(exc.message)}", highlight=False)
        sys.exit(ExitCode.USAGE)


from planrail.cli import inspect_cmd as _inspect_cmd  # noqa: E402,F401  (registers its commands)
from planrail.cli import mcp_cmd as _mcp_cmd  # noqa: E402,F401  (registers `planrail mcp`)
from planrail.cli import plan_cmd as _plan_cmd  # noqa: E402,F401  (registers the command)
from planrail.cli import runs_cmd as _runs_cmd  # noqa: E402,F401  (registers its commands)
