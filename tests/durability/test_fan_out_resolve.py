"""Per-item resolve: when items of a ``for_each`` over an unsafe tool are in doubt, an operator
decides each (``operations.resolve(..., item=I)``, ``planrail resolve RUN STEP --item I``);
the step stays in doubt until all are decided, and the resume calls only what remains (checked
with a call ledger), through every store."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import planrail
from planrail.cli import app
from planrail.engine import operations
from planrail.engine.executor import Execution
from planrail.plan.tools import Tool
from planrail.store import SQLiteStore, Store

from .conftest import Opener
from .helpers import fan_out_plan

ITEMS = [10, 11, 12, 13, 14, 15]
HANGING = (11, 13)


class Payments:
    """The receiver: every call of ``pay`` in the ledger; items 11 and 13 hang (until the run
    is cancelled) on the first run, once the other items have returned."""

    def __init__(self) -> None:
        self.ledger: list[int] = []
        self.hang = True
        self.returned = asyncio.Event()
        self.hung = {n: asyncio.Event() for n in HANGING}

    def tools(self) -> list[Tool]:
        @planrail.tool(side_effects="none")
        async def source() -> list[int]:
            """The list to fan out over."""
            return list(ITEMS)

        @planrail.tool(side_effects="unsafe")
        async def pay(n: int) -> dict[str, Any]:
            """An unsafe effect, made each time it is called."""
            self.ledger.append(n)
            if self.hang and n in HANGING:
                await self.returned.wait()  # the others have returned (and been recorded)
                self.hung[n].set()
                await asyncio.Event().wait()
            if len([x for x in self.ledger if x not in HANGING]) == len(ITEMS) - len(HANGING):
                self.returned.set()
            return {"paid": n}

        return [source, pay]


async def _cut_off(store: Store, payments: Payments) -> planrail.Plan:
    """Run until items 11 and 13 hang mid-call, then cancel the run (as Ctrl-C would)."""
    tools = payments.tools()
    plan = fan_out_plan(tools, len(ITEMS))
    task = asyncio.ensure_future(
        Execution(plan, tools, store=store, run_id="fan", approve=True).run()
    )
    await asyncio.gather(*(e.wait() for e in payments.hung.values()))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    return plan


async def test_in_doubt_items_are_decided_one_by_one_then_only_the_rest_runs(
    open_store: Opener,
) -> None:
    """Items 11 and 13 were mid-call when the run was cancelled: the step is in doubt, the four
    others are recorded. Item 11 resolved as succeeded (with its output) leaves the step in
    doubt — a resume calls nothing — until item 13 is resolved for retry; the resume then calls
    13 alone, and the step's output holds 11's given output in input order. Items not in
    doubt cannot be decided."""
    payments = Payments()
    plan = await _cut_off(open_store(), payments)
    assert sorted(payments.ledger) == ITEMS
    store = open_store()
    record = store.get_steps("fan")["pay"]
    assert record.status == "in_doubt"
    assert sorted(record.metadata["items"]) == ["0", "2", "4", "5"]

    with pytest.raises(operations.OperationError, match=r"item 0 .* is succeeded.*in doubt: 1, 3"):
        operations.resolve(store, "fan", "pay", "retry", item=0)
    operations.resolve(store, "fan", "pay", "succeeded", output={"paid": 11}, item=1)
    with pytest.raises(operations.OperationError, match=r"item 1 .* is succeeded.*in doubt: 3"):
        operations.resolve(store, "fan", "pay", "retry", item=1)
    assert store.get_steps("fan")["pay"].status == "in_doubt"

    payments.hang = False
    tools = payments.tools()
    held = await Execution(plan, tools, store=open_store(), run_id="fan", approve=True).run()
    assert held.steps["pay"].status == "in_doubt"
    assert sorted(payments.ledger) == ITEMS, "nothing called while an item is in doubt"

    store = open_store()
    operations.resolve(store, "fan", "pay", "retry", item=3)
    assert store.get_steps("fan")["pay"].status == "pending"
    done = await Execution(plan, tools, store=open_store(), run_id="fan", approve=True).run()

    assert done.status == "succeeded"
    assert payments.ledger[len(ITEMS) :] == [13], "only the item resolved for retry ran again"
    assert done.steps["pay"].output == [{"paid": n} for n in ITEMS]
    actions = [
        (e.data.get("item"), e.data.get("decision"))
        for e in open_store().events("fan")
        if e.type == "operator_action"
    ]
    assert actions == [(1, "succeeded"), (3, "retry")]


async def test_resolve_item_on_the_command_line(tmp_path: Path) -> None:
    """``planrail resolve RUN STEP --item I --succeeded --output …`` / ``--failed``: an item
    decided failed makes the step failed once no item is left in doubt (a resume runs it
    again); a step that is not a fan-out refuses ``--item`` (exit 2)."""
    db = tmp_path / "runs.db"
    store_url = f"sqlite:///{db}"
    payments = Payments()
    await _cut_off(SQLiteStore(db), payments)
    cli = CliRunner()

    def resolve(*args: str) -> Any:
        return cli.invoke(app, ["resolve", "fan", *args, "--store", store_url])

    first = resolve("pay", "--item", "1", "--succeeded", "--output", json.dumps({"paid": 11}))
    assert first.exit_code == 0, first.output
    assert "stays in doubt" in first.output
    assert resolve("src", "--item", "0", "--retry").exit_code == 2  # not in doubt
    second = resolve("pay", "--item", "3", "--failed")
    assert second.exit_code == 0, second.output
    record = SQLiteStore(db).get_steps("fan")["pay"]
    assert record.status == "failed"
    assert record.metadata["items"]["1"] == {"item": 11, "output": {"paid": 11}}
    assert resolve("pay", "--item", "3", "--retry", "--failed").exit_code == 2


async def test_items_cut_off_by_another_items_failure_are_in_doubt_not_failed(
    open_store: Opener,
) -> None:
    """Item 12 fails for good while items 11 and 13 are mid-call on the unsafe tool: the
    fan-out stops them, but they may have happened, so the step is ``in_doubt`` (not failed,
    which a resume would run again) and names them; a resume calls nothing of it until they
    are decided; then only 12 (retried) and the items decided for retry run."""
    ledger: list[int] = []
    hung = {n: asyncio.Event() for n in HANGING}
    first = [True]

    @planrail.tool(side_effects="none")
    async def source() -> list[int]:
        """The list to fan out over."""
        return list(ITEMS)

    @planrail.tool(side_effects="unsafe")
    async def pay(n: int) -> dict[str, Any]:
        """Items 11 and 13 hang, and 12 fails once they do (first run only)."""
        ledger.append(n)
        if first[0] and n in HANGING:
            hung[n].set()
            await asyncio.Event().wait()
        if first[0] and n == 12:
            await asyncio.gather(*(e.wait() for e in hung.values()))
            raise ValueError("card declined")
        return {"paid": n}

    tools = [source, pay]
    plan = fan_out_plan(tools, len(ITEMS))
    cut = await Execution(plan, tools, store=open_store(), run_id="cut", approve=True).run()
    step = cut.steps["pay"]
    assert step.status == "in_doubt"
    assert "item 2 failed" in (step.reason or "")
    assert "item(s) 1, 3 stopped while their calls were under way" in (step.reason or "")
    assert sorted(ledger) == ITEMS

    first[0] = False
    held = await Execution(plan, tools, store=open_store(), run_id="cut", approve=True).run()
    assert held.steps["pay"].status == "in_doubt"
    assert sorted(ledger) == ITEMS, "nothing called while items are in doubt"
    store = open_store()
    operations.resolve(store, "cut", "pay", "succeeded", output={"paid": 11}, item=1)
    operations.resolve(store, "cut", "pay", "retry", item=2)
    operations.resolve(store, "cut", "pay", "retry", item=3)
    done = await Execution(plan, tools, store=open_store(), run_id="cut", approve=True).run()
    assert done.status == "succeeded"
    assert sorted(ledger[len(ITEMS) :]) == [12, 13]
    assert done.steps["pay"].output == [{"paid": n} for n in ITEMS]


async def test_a_stored_plan_that_no_longer_validates_is_a_clear_refusal_for_an_item(
    open_store: Opener,
) -> None:
    """The run's stored plan does not validate any more (written by an older planrail, or
    edited): deciding one item is refused with an ``OperationError`` saying why (not a
    pydantic traceback), and deciding the step as a whole still works."""
    payments = Payments()
    await _cut_off(open_store(), payments)
    store = open_store()
    run = store.get_run("fan")
    assert run is not None
    broken = {**run.plan, "steps": [*run.plan["steps"], {"id": "x", "tool": 7}]}  # not a str
    store.commit(run=dataclasses.replace(run, plan=broken))

    with pytest.raises(operations.OperationError, match=r"does not validate any more.*as a whole"):
        operations.resolve(store, "fan", "pay", "retry", item=1)
    operations.resolve(store, "fan", "pay", "retry")
    assert store.get_steps("fan")["pay"].status == "pending"
