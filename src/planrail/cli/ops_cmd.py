"""Operator actions on stored runs: ``planrail approve``, ``refuse`` and ``cancel``.

Each calls :mod:`planrail.engine.operations` (the same functions the dashboard and the MCP
server use), so the lease checks and the ``operator_action`` events are the same everywhere.
"""

from __future__ import annotations

from typing import Annotated

import typer

from planrail.cli.common import (
    ExitCode,
    StoreOpt,
    app,
    fail,
    open_store_or_exit,
    operator_name,
    out,
)
from planrail.engine import operations
from planrail.errors import PlanrailError

__all__: list[str] = []

RunIdArg = Annotated[str, typer.Argument(help="The run.")]
ReasonOpt = Annotated[str | None, typer.Option("--reason", help="Why (kept with the event).")]


@app.command("approve")
def approve_cmd(run_id: RunIdArg, store: StoreOpt = None) -> None:
    """Approve a run that waits for approval (then `planrail resume RUN_ID` runs it)."""
    console = out(False)
    try:
        run = operations.approve(
            open_store_or_exit(store, console, create=False), run_id, by=operator_name()
        )
    except PlanrailError as exc:
        raise fail(console, exc.message, ExitCode.USAGE) from None
    console.print(
        f"run {run_id} approved (plan {run.plan_hash[:19]}…); run it with"
        f" `planrail resume {run_id} --tools …`"
    )


@app.command("refuse")
def refuse_cmd(run_id: RunIdArg, store: StoreOpt = None, reason: ReasonOpt = None) -> None:
    """Refuse a run that waits for approval: it ends cancelled, nothing of it runs."""
    console = out(False)
    try:
        operations.refuse(
            open_store_or_exit(store, console, create=False),
            run_id,
            by=operator_name(),
            reason=reason or "refused by an operator",
        )
    except PlanrailError as exc:
        raise fail(console, exc.message, ExitCode.USAGE) from None
    console.print(f"run {run_id} refused: nothing of it will run")


@app.command("cancel")
def cancel_cmd(run_id: RunIdArg, store: StoreOpt = None, reason: ReasonOpt = None) -> None:
    """Cancel a run, also one that another process is running right now.

    Steps whose call was under way and whose tool does not honour idempotency keys become
    in_doubt (decide with `planrail resolve`); keyed ones run again with the same key on resume.
    """
    console = out(False)
    try:
        outcome = operations.cancel(
            open_store_or_exit(store, console, create=False),
            run_id,
            by=operator_name(),
            reason=reason or "cancelled by an operator",
        )
    except PlanrailError as exc:
        raise fail(console, exc.message, ExitCode.USAGE) from None
    if outcome == "requested":
        console.print(f"run {run_id}: cancel requested; its runner stops within a second")
    else:
        console.print(f"run {run_id} cancelled")
