"""``planrail validate``, ``planrail run`` and ``planrail demo``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from planrail.cli.common import (
    BackendOpt,
    BaseUrlOpt,
    CatalogOpt,
    ExitCode,
    FailFastOpt,
    JsonOpt,
    MaxConcurrencyOpt,
    ModelOpt,
    PolicyOpt,
    QuietOpt,
    RayAddressOpt,
    ShowSecretsOpt,
    StoreOpt,
    StrictOpt,
    ToolsOpt,
    TraceOpt,
    YesOpt,
    app,
    ask_call,
    check_plan_path,
    emit_result,
    execute,
    exit_code,
    fail,
    open_llm_or_exit,
    open_store_or_exit,
    out,
    registry_from,
    report_invalid,
    security_policy,
    tool_runner_for,
)
from planrail.cli.jsonout import json_text
from planrail.cli.mcp_tools import McpConfigOpt, McpOpt, add_mcp_tools
from planrail.cli.printable import console as printable_console
from planrail.cli.render import print_issues, print_warnings
from planrail.engine.run_ids import failure_mode_of
from planrail.errors import PlanrailError, PlanValidationError
from planrail.plan.validate import (
    LEVELS,
    LINT_CODES,
    Level,
    ValidationOptions,
    ValidationReport,
    check_plan,
)
from planrail.runs import prepare, resume
from planrail.runs.build import validation_options

__all__: list[str] = []


@app.command("validate")
def validate_cmd(
    plan: Annotated[Path, typer.Argument(help="Plan file (JSON or YAML).")],
    tools: ToolsOpt = None,
    catalog: CatalogOpt = None,
    json_out: JsonOpt = False,
    strict: Annotated[
        bool, typer.Option("--strict", help="Placeholder literals are errors, not warnings.")
    ] = False,
    lint: Annotated[
        list[str] | None,
        typer.Option(
            "--lint",
            help="Level of the lints: off, warning or error, for both or as CODE=LEVEL"
            f" ({', '.join(LINT_CODES)}); repeatable.",
        ),
    ] = None,
    mcp: McpOpt = None,
    mcp_config: McpConfigOpt = None,
) -> None:
    """Check a plan statically: every problem at once, nothing executed (exit 3 if invalid)."""
    console = out(json_out)
    check_plan_path(plan, console)
    options = ValidationOptions(strict=strict, lints=_lint_levels(lint or [], console))
    registry = registry_from(tools, catalog, console)
    hub = add_mcp_tools(registry, mcp, mcp_config, console)
    has_tools = bool(tools or catalog) or hub is not None
    report = check_plan(plan, registry if has_tools else None, options=options)
    if json_out:
        print(json_text(report.to_dict()))
    else:
        print_issues(console, report, str(plan))
        if not has_tools and report.valid:
            console.print("[dim]tools were not checked: pass --tools or --catalog[/]")
    raise typer.Exit(ExitCode.OK if report.valid else ExitCode.INVALID_PLAN)


def _lint_levels(values: list[str], console: Console) -> dict[str, Level]:
    """``--lint`` values (``error``, ``needless_dependency=off``) as levels per lint code."""
    levels: dict[str, Level] = {}
    for value in values:
        code, eq, level = value.rpartition("=")
        codes = [code] if eq else list(LINT_CODES)  # "=error" names no code: refused below
        if level not in LEVELS or any(c not in LINT_CODES for c in codes):
            raise fail(
                console,
                f"--lint {value!r}: use off, warning or error, alone or as CODE=LEVEL with a"
                f" CODE among {', '.join(LINT_CODES)}",
                ExitCode.USAGE,
            )
        levels.update(dict.fromkeys(codes, level))
    return levels


@app.command("run")
def run_cmd(
    plan: Annotated[Path, typer.Argument(help="Plan file (JSON or YAML).")],
    tools: ToolsOpt = None,
    catalog: CatalogOpt = None,
    run_id: Annotated[str | None, typer.Option("--run-id", help="Id for this run.")] = None,
    max_concurrency: MaxConcurrencyOpt = None,
    fail_fast: FailFastOpt = None,
    store: StoreOpt = None,
    yes: YesOpt = False,
    quiet: QuietOpt = False,
    trace: TraceOpt = None,
    policy: PolicyOpt = None,
    strict: StrictOpt = False,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    backend: BackendOpt = "local",
    ray_address: RayAddressOpt = None,
    show_secrets: ShowSecretsOpt = False,
    json_out: JsonOpt = False,
    mcp: McpOpt = None,
    mcp_config: McpConfigOpt = None,
) -> None:
    """Validate, approve and execute a plan by dependency (exit 1 if a step failed).

    A --run-id that already exists with the same plan resumes that run instead. --model lets
    the plan's llm_call steps ask that model.
    """
    console = out(json_out)
    check_plan_path(plan, console)
    registry = registry_from(tools, catalog, console)
    if add_mcp_tools(registry, mcp, mcp_config, console) is None and not tools:
        raise fail(
            console, "run needs --tools or --mcp: the code of the plan's tools", ExitCode.USAGE
        )
    security = security_policy(policy, strict, console)
    report = check_plan(plan, registry, options=validation_options(security))
    if not report.valid:
        report_invalid(console, report, str(plan), json_out)
        raise typer.Exit(ExitCode.INVALID_PLAN)
    assert report.compiled is not None
    print_warnings(console, report.warnings, str(plan))
    run(
        console,
        report.compiled,
        registry,
        store=open_store_or_exit(store, console),
        security=security,
        llm=open_llm_or_exit(model, base_url, console),
        tool_runner=tool_runner_for(backend, ray_address, max_concurrency, console),
        run_id=run_id,
        max_concurrency=max_concurrency,
        failure_mode=failure_mode_of(fail_fast),
        yes=yes,
        quiet=quiet,
        trace=trace,
        json_out=json_out,
        show_secrets=show_secrets,
        source=str(plan),
    )


def run(
    console: Console,
    plan: object,
    registry: object,
    *,
    yes: bool,
    quiet: bool,
    trace: Path | None,
    json_out: bool,
    show_secrets: bool = False,
    source: str = "the plan",
    resumes: str | None = None,
    **options: object,
) -> None:
    """Build the run through the one run path (:func:`planrail.runs.resume` of stored run
    ``resumes``, as every door resumes one, else :func:`planrail.runs.prepare` of ``plan``),
    drive it on the terminal, print, exit.

    A plan the run path finds invalid (a resume validates it under the security policy it
    resumes under, :func:`planrail.engine.gate.resumes_under`) is reported as ``validate``
    reports one, naming it ``source``: exit 3, nothing executed."""
    from planrail.cli.common import terminal_approver
    from planrail.cli.progress import attach_observers

    try:
        options["approver"] = terminal_approver(console, yes=yes, json_out=json_out)
        if options.get("security") is not None:
            options["approve_call"] = ask_call(console)
        if resumes is not None:
            execution = resume(resumes, registry, **options)  # type: ignore[arg-type]
        else:
            execution = prepare(plan, registry, **options)  # type: ignore[arg-type]
    except PlanValidationError as exc:
        report_invalid(console, ValidationReport(errors=exc.issues), source, json_out)
        raise typer.Exit(ExitCode.INVALID_PLAN) from None
    except PlanrailError as exc:
        raise fail(console, exc.message, ExitCode.USAGE) from None
    attach_observers(execution, trace, console)
    redactor = None if show_secrets else execution.redactor
    result = execute(
        execution, console, quiet=quiet or json_out, redactor=redactor, llm=options.get("llm")
    )
    if result.status == "awaiting_approval":
        console.print(f"[red]approval refused[/]: nothing was executed ({result.error})")
    emit_result(result, console, json_out=json_out, redactor=redactor)
    raise typer.Exit(exit_code(result))


@app.command("demo")
def demo_cmd(
    fast: Annotated[bool, typer.Option("--fast", help="No simulated latency.")] = False,
) -> None:
    """The built-in end-to-end demonstration: onboarding on a local SQLite CRM (no network)."""
    from planrail.cli.demo import run_demo

    raise typer.Exit(run_demo(printable_console(highlight=False), fast=fast))
