"""Durable runs on the command line: ``resume``, ``runs``, ``show``, ``resolve``."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from planrail.cli.common import (
    BackendOpt,
    BaseUrlOpt,
    CatalogOpt,
    ExitCode,
    FailFastOpt,
    JsonOpt,
    MaxConcurrencyOpt,
    ModelOpt,
    OverridePolicyOpt,
    PolicyOpt,
    QuietOpt,
    RayAddressOpt,
    StoreOpt,
    StrictOpt,
    ToolsOpt,
    TraceOpt,
    YesOpt,
    app,
    emit_result,
    fail,
    open_llm_or_exit,
    open_store_or_exit,
    operator_name,
    out,
    registry_from,
    security_policy,
    tool_runner_for,
)
from planrail.cli.jsonout import json_text
from planrail.cli.mcp_tools import McpConfigOpt, McpOpt, add_mcp_tools
from planrail.cli.run_cmd import run as run_on_terminal
from planrail.engine import operations
from planrail.engine.checkpoint import load_result
from planrail.engine.gate import REPLANNED_AS, replaced_by, stored_width
from planrail.engine.run_ids import failure_mode_of
from planrail.errors import PlanLoadError, PlanrailError
from planrail.plan.loader import PlanLimits, load_document
from planrail.store import RUN_STATUSES, RunRecord

__all__: list[str] = []


@app.command("resume")
def resume_cmd(
    run_id: Annotated[str, typer.Argument(help="The run to continue.")],
    tools: ToolsOpt = None,
    catalog: CatalogOpt = None,
    store: StoreOpt = None,
    quiet: QuietOpt = False,
    trace: TraceOpt = None,
    wait: Annotated[
        float,
        typer.Option("--wait", min=0, help="Seconds to wait while another runner holds the run."),
    ] = 0.0,
    max_concurrency: MaxConcurrencyOpt = None,
    fail_fast: FailFastOpt = None,
    yes: YesOpt = False,
    policy: PolicyOpt = None,
    strict: StrictOpt = False,
    override_policy: OverridePolicyOpt = False,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    backend: BackendOpt = "local",
    ray_address: RayAddressOpt = None,
    json_out: JsonOpt = False,
    mcp: McpOpt = None,
    mcp_config: McpConfigOpt = None,
) -> None:
    """Continue a run from its checkpoint: succeeded steps are not run again.

    The run's stored security and run policies apply again, and so do its --max-concurrency
    and --fail-fast unless given here (given, they are the run's from then on); its stored
    approval must be for its plan as stored. While another runner holds the run's lease, fail
    at once (exit 2), or wait up to --wait seconds for it to finish or for its lease to expire.
    """
    console = out(json_out)
    the_store = open_store_or_exit(store, console, create=False)
    run = the_store.get_run(run_id)
    if run is None:
        raise fail(console, f"no run '{run_id}' in this store", ExitCode.USAGE)
    registry = registry_from(tools, catalog, console)
    add_mcp_tools(registry, mcp, mcp_config, console)
    if run.status == "succeeded":
        result = load_result(the_store, run_id)
        console.print(f"run {run_id} already succeeded; nothing to do")
        emit_result(result, console, json_out=json_out)
        raise typer.Exit(ExitCode.OK)
    # The run path resumes it as every door does (planrail.runs.resume): it validates the
    # stored plan under the security policy the run resumes under (gate.resumes_under).
    run_on_terminal(
        console,
        None,
        registry,
        resumes=run_id,
        store=the_store,
        lease_wait=wait,
        security=security_policy(policy, strict, console),
        policy_override=override_policy,
        llm=open_llm_or_exit(model, base_url, console),
        # a Ray runner as wide as the run will be: given, or as stored (gate._adopt_execution)
        tool_runner=tool_runner_for(
            backend, ray_address, max_concurrency or stored_width(run), console
        ),
        max_concurrency=max_concurrency,
        failure_mode=failure_mode_of(fail_fast),
        reason="resume",
        yes=yes,
        quiet=quiet,
        trace=trace,
        json_out=json_out,
        source=f"the plan of run {run_id}",
    )


@app.command("runs")
def runs_cmd(
    status: Annotated[
        str | None, typer.Option("--status", help=f"One of: {', '.join(sorted(RUN_STATUSES))}.")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="Most runs to list.")] = 50,
    store: StoreOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """List runs, newest first."""
    console = out(json_out)
    if status is not None and status not in RUN_STATUSES:
        raise fail(
            console, f"--status must be one of {', '.join(sorted(RUN_STATUSES))}", ExitCode.USAGE
        )
    runs = open_store_or_exit(store, console, create=False).list_runs(status=status, limit=limit)
    rows = [_row(r) for r in runs]
    if json_out:
        print(json_text(rows))
        return
    table = Table(title=f"{len(rows)} run(s)")
    for col in ("run_id", "status", "created", "steps", "goal"):
        table.add_column(col)
    for row in rows:
        created = _when(row["created_at"])
        status = row["status"]
        if REPLANNED_AS in row:  # not to be resumed: the replan that replaced it is
            status += f" (replaced by {row[REPLANNED_AS]})"
        table.add_row(row["run_id"], status, created, str(row["steps"]), str(row["goal"])[:60])
    console.print(table)


def _row(run: RunRecord) -> dict[str, Any]:
    """A run as ``runs --json`` lists it; a run replaced by a replan also names the version
    that replaced it (the key is there only then)."""
    row = {
        "run_id": run.run_id,
        "status": run.status,
        "created_at": run.created_at,
        "updated_at": run.updated_at,
        "goal": run.plan.get("goal", ""),
        "steps": len(run.plan.get("steps", [])),
        "plan_hash": run.plan_hash,
    }
    newer = replaced_by(run)
    if newer is not None:
        row[REPLANNED_AS] = newer
    return row


def _when(ts: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


@app.command("resolve")
def resolve_cmd(
    run_id: Annotated[str, typer.Argument(help="The run.")],
    step_id: Annotated[str, typer.Argument(help="The in-doubt step.")],
    succeeded: Annotated[
        bool, typer.Option("--succeeded", help="The call did happen: record it as succeeded.")
    ] = False,
    output: Annotated[
        str | None, typer.Option("--output", help="Its output as JSON (with --succeeded).")
    ] = None,
    retry: Annotated[bool, typer.Option("--retry", help="Run the step again on resume.")] = False,
    failed: Annotated[
        bool, typer.Option("--failed", help="It did not happen: record it as failed.")
    ] = False,
    item: Annotated[
        int | None,
        typer.Option(
            "--item", help="Decide one in-doubt item of a for_each step (its index), not the step."
        ),
    ] = None,
    store: StoreOpt = None,
) -> None:
    """Decide an in-doubt step, or one item of it: it happened, or not.

    --succeeded: it happened (--output: its output, as JSON).
    --retry: run it again on resume. --failed: it did not happen.
    --item I: decide item I of a for_each step, not the step."""
    console = out(False)
    if succeeded + retry + failed != 1:
        raise fail(console, "give exactly one of --succeeded, --retry or --failed", ExitCode.USAGE)
    if output is not None and not succeeded:
        raise fail(console, "--output goes with --succeeded", ExitCode.USAGE)
    value: Any = None
    if output is not None:
        try:  # read as a plan file is: nested too deep, a huge integer, a repeated key are said
            value = load_document(output, PlanLimits(), fmt="json", what="the output")
        except PlanLoadError as exc:
            raise fail(console, f"--output: {exc.message}", ExitCode.USAGE) from None
    decision: operations.Decision = "succeeded" if succeeded else "retry" if retry else "failed"
    the_store = open_store_or_exit(store, console, create=False)
    try:
        operations.resolve(
            the_store, run_id, step_id, decision, output=value, item=item, by=operator_name()
        )
    except PlanrailError as exc:
        raise fail(console, exc.message, ExitCode.USAGE) from None
    what = f"item {item} of step {step_id}" if item is not None else f"step {step_id}"
    done = {
        "succeeded": "recorded as succeeded",
        "retry": "will run again",
        "failed": "recorded as failed (a resume runs it again)",
    }[decision]
    record = the_store.get_steps(run_id).get(step_id)
    if item is not None and record is not None and record.status == "in_doubt":
        done += f"; the step stays in doubt ({record.reason})"
    console.print(
        f"{what} of run {run_id}: {done}; continue with `planrail resume {run_id} --tools …`"
    )
