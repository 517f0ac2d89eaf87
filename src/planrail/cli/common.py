"""What every ``planrail`` command shares: the Typer app, options, exit codes, the terminal
approver and the run driver. Command modules import this one (never each other), and
``planrail.cli.app`` imports the command modules: no import cycle.
"""

from __future__ import annotations

import asyncio
import atexit
import dataclasses
import enum
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from planrail.cli.jsonout import json_text
from planrail.cli.printable import console as printable_console
from planrail.cli.render import print_issues, print_result
from planrail.engine.approval import ApprovalRequest, Approver
from planrail.engine.executor import Execution
from planrail.engine.result import RunResult
from planrail.errors import PlanrailError, ToolLoadError
from planrail.plan.catalog import load_catalog, load_tools
from planrail.plan.secrets import Redactor
from planrail.plan.tools import ToolRegistry, ToolRunner
from planrail.plan.validate import ValidationReport
from planrail.policies.security import CallApprovalRequest, SecurityPolicy
from planrail.store import Store, open_store

__all__ = ["ExitCode", "app"]


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


def out(json_mode: bool) -> Console:
    """Human output goes to stdout, or to stderr when stdout carries JSON."""
    return printable_console(stderr=json_mode, highlight=False)


def fail(console: Console, message: str, code: ExitCode) -> typer.Exit:
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
        defined: dict[str, str] = {}  # tool name -> the --tools target that defined it
        for target in tools or ():
            for t in load_tools(target):
                first = defined.setdefault(t.name, target)
                if registry.find(t.name) not in (None, t):  # two tools, one name: which runs?
                    where = "twice in it" if first == target else f"by --tools {first} too"
                    raise ToolLoadError(
                        f"--tools {target}: a tool named '{t.name}' is defined {where};"
                        " each name must name one tool (rename one: @planrail.tool(name=...))"
                    )
                registry.add(t)
    except ToolLoadError as exc:
        raise fail(console, exc.message, ExitCode.USAGE) from None
    return registry


def check_plan_path(path: Path, console: Console) -> None:
    if not path.exists():
        raise fail(console, f"{path}: no such file", ExitCode.USAGE)
    if path.is_dir():
        raise fail(console, f"{path}: is a directory, not a plan file", ExitCode.USAGE)


PolicyOpt = Annotated[
    Path | None,
    typer.Option(
        "--policy",
        help="Security policy file (JSON/YAML), or 'default' for the shipped default policy;"
        " see docs/security.md.",
    ),
]
StrictOpt = Annotated[
    bool,
    typer.Option(
        "--strict",
        help="Strict security: side-effecting tools need an allow rule, and their arguments"
        " from tool or LLM output need approval at run time.",
    ),
]
OverridePolicyOpt = Annotated[
    bool,
    typer.Option(
        "--override-policy",
        help="Resume under --policy/--strict although the run started under another security"
        " policy (recorded as a policy_overridden event).",
    ),
]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Approve the plan without asking.")]
# How a run runs is stored with it (planrail.engine.gate._adopt_execution): a resume given
# neither option runs as the run last did; one given an option runs so from then on.
MaxConcurrencyOpt = Annotated[
    int | None,
    typer.Option(
        "--max-concurrency",
        min=1,
        help="Most steps running at once. Stored with the run: a resume without it keeps"
        " the run's; one with it sets the run's from then on.",
    ),
]
FailFastOpt = Annotated[
    bool | None,
    typer.Option(
        "--fail-fast/--no-fail-fast",
        help="Cancel everything in flight on the first failure (--no-fail-fast: go on past"
        " failures, the default). Stored with the run: a resume given neither keeps the run's"
        " mode; one given either sets it from then on.",
        show_default=False,
    ),
]


ModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        envvar="PLANRAIL_MODEL",
        help="provider:model for llm_call steps, e.g. openai:gpt-4.1-mini, ollama:llama3.1",
    ),
]
BaseUrlOpt = Annotated[
    str | None,
    typer.Option("--base-url", help="OpenAI-compatible server (vLLM, Ollama, llama.cpp, …)."),
]


BackendOpt = Annotated[
    str,
    typer.Option(
        "--backend", help="Where tool calls run: local (this process) or ray (a Ray cluster)."
    ),
]
RayAddressOpt = Annotated[
    str | None,
    typer.Option(
        "--ray-address",
        help="With --backend ray: auto (the cluster on this machine) or ray://HOST:PORT;"
        " default: RAY_ADDRESS, else a local Ray started for the run.",
    ),
]


def tool_runner_for(
    backend: str, address: str | None, max_concurrency: int | None, console: Console
) -> ToolRunner | None:
    """The ``--backend`` runner (None: the execution's own local runner); exit 2 if unusable."""
    if backend == "local":
        if address is not None:
            raise fail(console, "--ray-address needs --backend ray", ExitCode.USAGE)
        return None
    if backend != "ray":
        raise fail(console, f"--backend must be local or ray, not {backend!r}", ExitCode.USAGE)
    try:
        from planrail.backends.ray import RayRunner
    except ImportError:
        raise fail(
            console, "--backend ray needs Ray: pip install 'planrail[ray]'", ExitCode.USAGE
        ) from None
    return RayRunner(address, max_concurrency=max_concurrency or 64)


def security_policy(path: Path | None, strict: bool, console: Console) -> SecurityPolicy | None:
    """The ``--policy`` file (with ``--strict`` forcing strict mode), or None; exit 2 if bad."""
    if path is None and not strict:
        return None
    try:
        if path is not None and str(path) == "default" and not path.exists():
            found = SecurityPolicy.default()
        else:
            found = SecurityPolicy.load(path) if path is not None else SecurityPolicy()
    except PlanrailError as exc:
        raise fail(console, exc.message, ExitCode.USAGE) from None  # it names the file
    return dataclasses.replace(found, strict=True) if strict else found


def ask_call(console: Console) -> Any:
    """Runtime approval of one tool call: asked on the terminal; refused without one (--yes
    approves the plan, never a call the security policy holds back)."""

    def ask(request: CallApprovalRequest) -> bool:
        if not sys.stdin.isatty():
            return False
        console.print(
            f"step [bold]{request.step_id}[/] calls [bold]{request.tool}[/]:"
            f" {request.decision.reason}"
        )
        console.print_json(json_text(request.args))
        return typer.confirm(
            f"Allow this call ({request.args_hash[:19]}…)?", default=False, err=True
        )

    return ask


def open_llm_or_exit(model: str | None, base_url: str | None, console: Console) -> Any:
    """The LLM client for ``--model`` (None without one), or exit 2 saying why."""
    if model is None:
        return None
    from planrail.llm import open_llm

    try:
        return open_llm(model, base_url=base_url)
    except PlanrailError as exc:
        raise fail(console, exc.message, ExitCode.USAGE) from None


def when_the_command_ends(close: Callable[[], object]) -> None:
    """Run ``close`` when the command's context closes: once the command has ended, however it
    ended (returned, ``typer.Exit`` of any code, a usage error, ``KeyboardInterrupt``), also
    when the app runs in-process (``CliRunner``, an embedding program). Outside a command: at
    exit. What is registered last is closed first."""
    ctx = None
    for module in ("typer._click.globals", "click"):  # recent Typer carries its own Click
        try:
            ctx = importlib.import_module(module).get_current_context(silent=True)
            break
        except ImportError:  # pragma: no cover - depends on the Typer version
            continue
    if ctx is not None:
        ctx.call_on_close(close)
    else:
        atexit.register(close)


def open_store_or_exit(url: str | None, console: Console, *, create: bool = True) -> Store:
    """The store named by ``--store``/``PLANRAIL_STORE`` (default SQLite), or exit 2 saying why.
    The command owns it: it is closed when the command ends (:func:`when_the_command_ends`),
    so no connection outlives the command; a command that serves (``ui``, ``mcp serve``) ends
    when its server stops.

    ``create=False`` for the commands that only read or change runs already made (``runs``,
    ``show``, ``resume``, ``resolve``, ``approve``…): a SQLite file that does not exist is said
    (exit 2), not created empty — a mistyped path would otherwise list no runs."""
    try:
        store = open_store(url, create=create)
    except PlanrailError as exc:
        raise fail(console, exc.message, ExitCode.USAGE) from None
    when_the_command_ends(store.close)
    return store


def report_invalid(console: Console, report: ValidationReport, source: str, json_out: bool) -> None:
    if json_out:
        print(json_text(report.to_dict()))
    else:
        print_issues(console, report, source)


# ---------------------------------------------------------------- the approval screen


def terminal_approver(
    console: Console, *, yes: bool, author: str = "plan", json_out: bool = False
) -> Approver:
    """The CLI's approver: ``--yes`` approves; otherwise the approval screen
    (:mod:`planrail.engine.approval_view`: every value, where it comes from, the plan hash,
    the replan diff) is shown and a person is asked; without a terminal, no. ``author`` says
    who wrote the plan's literals (``planner`` for ``planrail plan``); ``planrail review
    --json`` prints the same data. With ``--yes`` no screen is built (it is nobody's to read:
    for 1,000 steps it took a few hundred ms before the first step)."""
    from planrail.cli.approval_screen import print_view
    from planrail.engine.approval_view import build_view

    async def approver(request: ApprovalRequest) -> bool:
        if yes:
            return True
        print_view(
            console, build_view(request, author="planner" if author == "planner" else "plan")
        )
        if not sys.stdin.isatty():
            console.print("[red]approval needed[/]: no terminal to ask on; pass --yes to approve")
            return False
        return await asyncio.to_thread(typer.confirm, "Run this plan?", default=False, err=True)

    approver.label = "--yes" if yes else "operator (terminal)"  # type: ignore[attr-defined]
    return approver


# ---------------------------------------------------------------- running


INTERRUPT_GRACE = 5.0
"""Seconds a cancelled run may take to record itself after the first Ctrl-C (or SIGTERM is not
handled: only SIGINT); a second Ctrl-C within them, or their end, exits 130 at once."""


def execute(
    execution: Execution,
    console: Console,
    *,
    quiet: bool,
    redactor: Redactor | None = None,
    llm: object = None,
) -> RunResult:
    """Run with live progress. The first Ctrl-C cancels the run, which records what it leaves
    behind (a call under way is in doubt, or runs again with its key) and exits 130; a second
    one, or a cancelled run still busy after ``INTERRUPT_GRACE`` seconds, exits 130 at once,
    without a traceback. A tool runner the command made for the run (``--backend``) is closed
    after it (an execution closes only its own), and so is the model client it made
    (``--model``: ``llm``), in the loop its connections were made in."""
    from planrail.cli.interrupts import Interrupts
    from planrail.cli.progress import make_progress

    interrupts = Interrupts(console, INTERRUPT_GRACE)

    async def run_then_close() -> RunResult:
        interrupts.attach(asyncio.current_task())
        try:
            return await execution.run()
        finally:
            if not execution.owns_runner:
                await execution.tool_runner.aclose()
            close = getattr(llm, "aclose", None)
            if close is not None:
                await close()

    progress = make_progress(console, [s.id for s in execution.plan.steps], quiet=quiet)
    execution.observers.append(progress)
    with progress, interrupts:
        try:
            result = asyncio.run(run_then_close())
        except (KeyboardInterrupt, asyncio.CancelledError):
            result = None
        except PlanrailError as exc:  # the run could not start: busy, another plan, a policy
            message = exc.message if redactor is None else redactor.text(exc.message)
            raise fail(console, message, ExitCode.USAGE) from None
    report_abandoned(execution, console)
    if result is not None:
        return result
    console.print("[magenta]interrupted[/]: running steps were cancelled; the run is cancelled")
    return execution.result()


def report_abandoned(execution: Execution, console: Console) -> None:
    """Say how many sync calls were given up on while still running (timed out or cancelled):
    the process exits without waiting for them."""
    count = getattr(execution.tool_runner, "abandoned", 0)
    if isinstance(count, int) and count:
        console.print(
            f"[yellow]note[/]: {count} sync tool call(s) timed out or were cancelled and still"
            " run in their thread; planrail does not wait for them"
        )


ShowSecretsOpt = Annotated[
    bool,
    typer.Option(
        "--show-secrets",
        help="Print secret values in clear (local debugging only; never in CI logs)."
        " By default every output redacts them as the store does.",
    ),
]


def emit_result(
    result: RunResult,
    console: Console,
    *,
    json_out: bool,
    redactor: Redactor | None = None,
) -> None:
    """Print the run's summary (or its JSON), secrets redacted by ``redactor`` exactly as the
    store redacts them (``None``: nothing to redact, or ``--show-secrets``)."""
    result = result.redacted(redactor)
    if json_out:
        print(json_text(result.to_dict()))
    else:
        print_result(console, result)
        if result.output is not None:
            console.print_json(json_text(result.output))


def redactor_for(plan: Any, registry: ToolRegistry, runs: list[RunResult]) -> Redactor | None:
    """A redactor that knows the secrets of finished runs of ``plan`` (for output printed
    after an agent ran several executions): it learns them from the runs' outputs."""
    if plan is None:
        return None
    redactor = Redactor.for_plan(plan, registry)
    if redactor is not None:
        redactor.learn_outputs(plan, runs)
    return redactor


def exit_code(result: RunResult) -> ExitCode:
    if result.status == "succeeded":
        return ExitCode.OK
    if result.status == "cancelled":
        return ExitCode.INTERRUPTED
    if result.status == "awaiting_approval":
        return ExitCode.APPROVAL_REFUSED
    return ExitCode.RUN_FAILED


def operator_name() -> str:
    """Who an operator action from this terminal is recorded as: ``user@host (cli)``."""
    import getpass
    import socket

    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()} (cli)"
