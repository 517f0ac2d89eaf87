"""Fan-out resume: each item of a ``for_each`` is recorded as it succeeds, and a resume calls
only the items that did not (checked with a call ledger), through every store."""

from __future__ import annotations

from typing import Any

import pytest

import planrail
from planrail.engine.executor import Execution
from planrail.plan.tools import Tool

from .conftest import Opener
from .helpers import fan_out_plan

ITEMS = [10, 11, 12, 13, 14, 15]


def _tools(ledger: list[int], failing: set[int]) -> list[Tool]:
    @planrail.tool(side_effects="none")
    async def source() -> list[int]:
        """The list to fan out over."""
        return list(ITEMS)

    @planrail.tool(side_effects="unsafe")
    async def pay(n: int) -> dict[str, Any]:
        """An unsafe effect: recorded in the ledger each time it is really made."""
        if n in failing:
            raise ValueError(f"card declined for {n}")
        ledger.append(n)
        return {"paid": n}

    return [source, pay]


@pytest.mark.parametrize("max_parallel", [1, 3])
async def test_resume_calls_only_the_items_that_did_not_succeed(
    open_store: Opener, max_parallel: int
) -> None:
    """Item 13 fails on the first run: the items that succeeded are recorded one by one; the
    resume (13 now succeeds) calls 13 and the items never started, never one that succeeded —
    so the unsafe effect happens exactly once per item — and the output keeps input order."""
    ledger: list[int] = []
    failing = {13}
    tools = _tools(ledger, failing)
    plan = fan_out_plan(tools, max_parallel)

    first = await Execution(plan, tools, store=open_store(), run_id="fan", approve=True).run()
    assert first.status == "failed"
    assert first.steps["pay"].status == "failed"
    assert "item 3 failed" in (first.steps["pay"].reason or "")
    done_first = list(ledger)
    assert 13 not in done_first
    assert done_first, "some items succeeded before the failure"

    failing.clear()
    again = await Execution(plan, tools, store=open_store(), run_id="fan", approve=True).run()

    assert again.status == "succeeded"
    assert sorted(ledger) == ITEMS, f"each item paid exactly once, got {ledger}"
    assert ledger[len(done_first) :].count(13) == 1
    assert set(ledger[len(done_first) :]).isdisjoint(done_first)
    assert again.steps["pay"].output == [{"paid": n} for n in ITEMS]


async def test_a_fan_out_without_a_store_reruns_whole() -> None:
    """Without a store nothing is kept between runs: a second run calls every item again (the
    per-item record is a property of durable runs only)."""
    ledger: list[int] = []
    tools = _tools(ledger, set())
    plan = fan_out_plan(tools, 2)
    await Execution(plan, tools, approve=True).run()
    await Execution(plan, tools, approve=True).run()
    assert sorted(ledger) == sorted(ITEMS * 2)
