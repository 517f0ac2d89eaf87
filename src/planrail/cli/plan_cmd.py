"""``planrail plan "GOAL"``: a model writes the plan, a person approves it, planrail runs it.

Exit codes as ``run``: 0 succeeded, 1 a step failed (or the budget ran out, or the model could
not be used), 2 usage error, 3 no valid plan within the repairs allowed, 4 approval refused.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from planrail.agent import Agent, AgentResult
from planrail.cli.common import (
    BaseUrlOpt,
    CatalogOpt,
    ExitCode,
    FailFastOpt,
    JsonOpt,
    MaxConcurrencyOpt,
    PolicyOpt,
    QuietOpt,
    ShowSecretsOpt,
    StoreOpt,
    StrictOpt,
    ToolsOpt,
    TraceOpt,
    YesOpt,
    app,
    ask_call,
    fail,
    open_store_or_exit,
    out,
    redactor_for,
    registry_from,
    security_policy,
    terminal_approver,
)
from planrail.cli.interrupts import python_sigint
from planrail.cli.jsonout import json_text
from planrail.cli.mcp_tools import McpConfigOpt, McpOpt, add_mcp_tools
from planrail.cli.render import print_result, print_warnings
from planrail.engine.run_ids import failure_mode_of
from planrail.errors import PlanrailError
from planrail.llm import Budget, PriceTable, open_llm
from planrail.plan.secrets import Redactor
from planrail.plan.validate import Issue
from planrail.planner.schema import DEFAULT_MAX_STEPS

__all__: list[str] = []

_EXIT = {
    "succeeded": ExitCode.OK,
    "refused": ExitCode.APPROVAL_REFUSED,
    "invalid": ExitCode.INVALID_PLAN,
    "cancelled": ExitCode.INTERRUPTED,
}


def _exit_code(result: AgentResult) -> ExitCode:
    return _EXIT.get(result.status, ExitCode.RUN_FAILED)


@app.command("plan")
def plan_cmd(
    goal: Annotated[str, typer.Argument(help="What to achieve, in words.")],
    model: Annotated[
        str,
        typer.Option(
            "--model",
            "-m",
            envvar="PLANRAIL_MODEL",
            help="provider:model, e.g. openai:gpt-4.1-mini, anthropic:claude-sonnet-4-5,"
            " ollama:llama3.1",
        ),
    ],
    tools: ToolsOpt = None,
    catalog: CatalogOpt = None,
    base_url: BaseUrlOpt = None,
    yes: YesOpt = False,
    stream: Annotated[
        bool,
        typer.Option("--stream/--no-stream", help="Start read-only steps while the plan streams."),
    ] = True,
    max_repairs: Annotated[int, typer.Option(min=0, help="Repair prompts per plan.")] = 3,
    max_steps: Annotated[
        int, typer.Option(min=1, help="Most steps in one plan (the schema's and the answer's).")
    ] = DEFAULT_MAX_STEPS,
    max_replans: Annotated[int, typer.Option(min=0, help="Replans after a failed step.")] = 0,
    max_llm_calls: Annotated[int | None, typer.Option(min=0, help="Budget: model calls.")] = None,
    max_input_tokens: Annotated[
        int | None, typer.Option(min=0, help="Budget: input tokens.")
    ] = None,
    max_output_tokens: Annotated[
        int | None, typer.Option(min=0, help="Budget: output tokens.")
    ] = None,
    max_cost: Annotated[float | None, typer.Option(min=0, help="Budget: cost.")] = None,
    prices: Annotated[
        Path | None,
        typer.Option(help='Price table JSON: {"model": {"input": 0.4, "output": 1.6}} per 1M.'),
    ] = None,
    max_concurrency: MaxConcurrencyOpt = None,
    fail_fast: FailFastOpt = None,
    store: StoreOpt = None,
    policy: PolicyOpt = None,
    strict: StrictOpt = False,
    trace: TraceOpt = None,
    run_id: Annotated[
        str | None, typer.Option("--run-id", help="Id of the first plan's run (replans: -rN).")
    ] = None,
    quiet: QuietOpt = False,
    show_secrets: ShowSecretsOpt = False,
    json_out: JsonOpt = False,
    mcp: McpOpt = None,
    mcp_config: McpConfigOpt = None,
    max_tokens: Annotated[
        int | None,
        typer.Option(min=1, help="Most tokens one answer may have (default: from the context)."),
    ] = None,
    timeout: Annotated[
        float | None, typer.Option(min=0.1, help="Seconds one model request may take.")
    ] = None,
    temperature: Annotated[float | None, typer.Option(min=0, help="Sampling temperature.")] = None,
    seed: Annotated[int | None, typer.Option(help="Sampling seed (servers that take one).")] = None,
    prompt: Annotated[
        str,
        typer.Option(help="Planner prompt: full, compact, or auto (compact for small contexts)."),
    ] = "auto",
    structured: Annotated[
        str | None,
        typer.Option(
            help="Structured-output form to start from: json_schema_strict, json_schema,"
            " json_object_schema (llama.cpp), json_object, none (default: by provider)."
        ),
    ] = None,
    context_window: Annotated[
        int | None,
        typer.Option(min=256, help="The model's context size in tokens, when known."),
    ] = None,
) -> None:
    """Have a model plan GOAL with the given tools, approve the plan, then run it.

    Each plan version is a stored run (resumable, listed by `planrail runs`), under the same
    security policy, approval and traces as `planrail run`.
    """
    console = out(json_out)
    registry = registry_from(tools, catalog, console)
    if add_mcp_tools(registry, mcp, mcp_config, console) is None and not tools:
        raise fail(console, "plan needs --tools or --mcp: the tools to plan with", ExitCode.USAGE)
    if prompt not in ("full", "compact", "auto"):
        raise fail(console, "--prompt must be full, compact or auto", ExitCode.USAGE)
    options: dict[str, Any] = {
        k: v
        for k, v in {
            "max_tokens": max_tokens,
            "timeout": timeout,
            "temperature": temperature,
            "seed": seed,
            "structured": structured,
            "context_window": context_window,
        }.items()
        if v is not None
    }
    try:
        llm = open_llm(model, base_url=base_url, **options)
        table = PriceTable.from_mapping(json.loads(prices.read_text())) if prices else None
    except PlanrailError as exc:
        raise fail(console, exc.message, ExitCode.USAGE) from None
    except TypeError as exc:
        raise fail(console, f"{model}: option not supported ({exc})", ExitCode.USAGE) from None
    except (OSError, ValueError, AttributeError) as exc:
        raise fail(console, f"{prices}: not a price table ({exc})", ExitCode.USAGE) from None
    try:
        budget = Budget(max_llm_calls, max_input_tokens, max_output_tokens, max_cost)
    except (TypeError, ValueError) as exc:  # --max-cost inf: no spend could reach it
        raise fail(console, f"budget: {exc}", ExitCode.USAGE) from None
    security = security_policy(policy, strict, console)
    the_store = open_store_or_exit(store, console)
    observers = _observers(console, trace, quiet=quiet or json_out)
    try:
        agent = Agent(
            llm,
            registry,
            approval=terminal_approver(console, yes=yes, author="planner"),
            store=the_store,
            security=security,
            approve_call=ask_call(console) if security is not None else None,
            observers=observers,
            run_id=run_id,
            budget=budget,
            prices=table,
            max_repairs=max_repairs,
            max_steps=max_steps,
            max_replans=max_replans,
            stream=stream,
            max_concurrency=max_concurrency,
            failure_mode=failure_mode_of(fail_fast),
            prompt=prompt,  # type: ignore[arg-type]  # one of the three: checked above
        )
    except PlanrailError as exc:  # an option no run could take (a bad --run-id)
        raise fail(console, exc.message, ExitCode.USAGE) from None
    if not (quiet or json_out):
        console.print(f"planning with {model}…")
    try:
        with python_sigint():  # asyncio.run cancels the agent on Ctrl-C, which records it
            result = asyncio.run(_run(agent, goal))
    except KeyboardInterrupt:
        console.print("[magenta]interrupted[/]")
        raise typer.Exit(ExitCode.INTERRUPTED) from None
    redactor = None if show_secrets else redactor_for(result.plan, registry, result.runs)
    if json_out:
        data = result.to_dict()
        print(json_text(data if redactor is None else redactor.scrub(data)))
    else:
        _print(console, result, redactor)
    raise typer.Exit(_exit_code(result))


def _observers(console: Console, trace: Path | None, *, quiet: bool) -> list[Any]:
    """The same observers as ``planrail run`` (the trace file, OpenTelemetry, progress lines),
    and the valid plan's warnings, printed as ``run`` prints a plan file's."""
    from planrail.cli.progress import observers_for

    return [*observers_for(trace, console, quiet=quiet), PlanWarnings(console)]


class PlanWarnings:
    """Prints each valid plan's warnings (a placeholder such as ``<user_id>``, a lint) as the
    planner finds it: before its approval screen, or before it runs with ``--yes``."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def on_event(self, event: Any) -> None:
        """A run's events: nothing to print here."""

    def on_planner_event(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "plan_valid":
            warnings = [Issue(**w) for w in data.get("warnings", ())]
            print_warnings(self.console, warnings, f"the model's plan (attempt {data['attempt']})")


async def _run(agent: Agent, goal: str) -> AgentResult:
    try:
        return await agent.run(goal)
    finally:
        close = getattr(agent.llm, "aclose", None)
        if close is not None:
            await close()


def _print(console: Console, result: AgentResult, redactor: Redactor | None) -> None:
    def clean(text: str) -> str:
        return text if redactor is None else redactor.text(text)

    if result.status == "invalid" and result.attempts:
        console.print(f"[red]✗ no valid plan[/]: {len(result.attempts)} attempt(s)")
        for issue in result.attempts[-1].issues:
            console.print(f"  [red]{escape(str(issue))}[/]")
    if result.run is not None and result.status != "refused":
        run = result.run.redacted(redactor)
        print_result(console, run)
        output = result.output if redactor is None else redactor.scrub(result.output)
        if output is not None:
            console.print_json(json_text(output))
    if result.status == "refused":
        console.print(f"[red]approval refused[/]: {escape(clean(result.reason or ''))}")
    elif result.reason and result.status != "succeeded":
        console.print(f"[red]{result.status}[/]: {escape(clean(result.reason))}")
    usage = result.usage
    console.print(
        f"[dim]LLM: {usage.get('calls', 0)} call(s), {usage.get('input_tokens', 0):,} in /"
        f" {usage.get('output_tokens', 0):,} out tokens; {result.replans} replan(s)[/]"
    )
