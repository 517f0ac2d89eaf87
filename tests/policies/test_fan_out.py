"""Fan-out: for_each runs the step once per item, bounded by max_parallel; the output keeps the
input order; every item has its own idempotency key and attempts."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from planrail.errors import RetryableError
from planrail.runs import prepare
from planrail.store import MemoryStore
from planrail.testing import ECHO, FaultTool, Hang, Slow

from .conftest import now, run_plan


def fan_plan(items: list[Any], **step: Any) -> tuple[dict[str, Any], FaultTool]:
    source = FaultTool(
        "source",
        [{"items": items}],
        output_schema={"type": "object", "properties": {"items": {"type": "array"}}},
    )
    plan = {
        "steps": [
            {"id": "src", "tool": "source"},
            {
                "id": "each",
                "tool": "work",
                "for_each": "${src.items}",
                "args": {"value": "${item}"},
                "depends_on": ["src"],
                **step,
            },
            {"id": "after", "tool": "sink", "args": {"all": "${each}"}, "depends_on": ["each"]},
        ]
    }
    return plan, source


@pytest.mark.looptime
async def test_output_is_in_input_order_even_when_items_finish_out_of_order() -> None:
    """Item durations 3, 1, 2: results still come back as [item0, item1, item2]."""
    plan, source = fan_plan([3, 1, 2])
    work = FaultTool("work", [lambda args: {"v": args["value"]}])
    slow_work = FaultTool("work", [Slow(3, {"v": 3}), Slow(1, {"v": 1}), Slow(2, {"v": 2})])
    for tool in (work, slow_work):
        result = await run_plan(plan, [source, tool, FaultTool("sink", [ECHO])])
        assert result.steps["each"].output == [{"v": 3}, {"v": 1}, {"v": 2}]
        assert result.steps["after"].output == {"all": [{"v": 3}, {"v": 1}, {"v": 2}]}


@pytest.mark.looptime
async def test_max_parallel_bounds_items_in_flight() -> None:
    """Seven 1s items with max_parallel 3: never more than 3 at once, done at t=3."""
    plan, source = fan_plan(list(range(7)), max_parallel=3)
    work = FaultTool("work", [Slow(1)])
    result = await run_plan(plan, [source, work, FaultTool("sink", [ECHO])])
    assert result.status == "succeeded"
    assert work.max_active == 3
    assert now() == 3


@pytest.mark.looptime
async def test_each_item_has_its_own_key_and_attempts() -> None:
    """Keys are run_id:step_id:index; a flaky item retries alone, with its own attempt count."""
    plan, source = fan_plan(["a", "b"], retry={"max_attempts": 3, "initial_delay": 1, "jitter": 0})
    seen: dict[int, int] = {}

    def flaky(args: dict[str, Any]) -> Any:
        if args["value"] == "b" and seen.setdefault(1, 0) < 2:
            seen[1] += 1
            raise RetryableError("b is flaky")
        return args["value"]

    work = FaultTool("work", [flaky])
    result = await run_plan(plan, [source, work, FaultTool("sink", [ECHO])], run_id="run_f")
    assert result.steps["each"].output == ["a", "b"]
    keys = sorted({(c.item, c.idempotency_key) for c in work.calls})
    assert keys == [(0, "run_f:each:0"), (1, "run_f:each:1")]
    attempts = [(c.item, c.attempt) for c in work.calls]
    assert sorted(attempts) == [(0, 1), (1, 1), (1, 2), (1, 3)]
    assert result.steps["each"].attempts == 4


@pytest.mark.looptime
async def test_a_failed_item_fails_the_step_and_cancels_the_others() -> None:
    """Item 1 fails at once: the step fails naming item 1; the 10s items are cancelled."""
    plan, source = fan_plan([0, 1, 2])
    work = FaultTool("work", [Slow(10), ValueError("item broke"), Slow(10)])
    result = await run_plan(plan, [source, work, FaultTool("sink", [ECHO])])
    step = result.steps["each"]
    assert step.status == "failed"
    assert step.error["message"] == "item 1: item broke"
    assert now() == 0
    assert work.active == 0
    assert result.steps["after"].status == "skipped"


@pytest.mark.looptime
async def test_items_can_fall_back_one_by_one() -> None:
    """A fallback applies per item: only the failed item is replaced; the step is degraded."""
    plan, source = fan_plan([1, 2, 3], fallback={"value": {"missing": "${item}"}})
    work = FaultTool("work", [{"ok": 1}, ValueError("no"), {"ok": 3}])
    result = await run_plan(
        plan, [source, work, FaultTool("sink", [ECHO])], policy={"default_max_parallel": 1}
    )
    step = result.steps["each"]
    assert step.output == [{"ok": 1}, {"missing": 2}, {"ok": 3}]
    assert step.degraded
    assert "item(s) 1" in (step.reason or "")


@pytest.mark.looptime
async def test_an_empty_list_gives_an_empty_output() -> None:
    """for_each over [] succeeds at once with [] and calls nothing."""
    plan, source = fan_plan([])
    work = FaultTool("work", [ECHO])
    result = await run_plan(plan, [source, work, FaultTool("sink", [ECHO])])
    assert result.steps["each"].output == []
    assert work.call_count == 0


@pytest.mark.looptime
async def test_a_non_list_at_run_time_fails_clearly() -> None:
    """If the referenced value is not a list when the step runs, the step fails saying so."""
    source = FaultTool("source", [{"items": "oops"}])
    plan = {
        "steps": [
            {"id": "src", "tool": "source"},
            {"id": "each", "tool": "work", "for_each": "${src.items}", "depends_on": ["src"]},
        ]
    }
    result = await run_plan(plan, [source, FaultTool("work", [ECHO])])
    assert "for_each needs a list" in result.steps["each"].error["message"]
    too_many = await run_plan(
        plan,
        [FaultTool("source", [{"items": [1, 2, 3]}]), FaultTool("work", [ECHO])],
        policy={"max_items": 2},
    )
    assert "limit is 2" in too_many.steps["each"].error["message"]


async def _cancel_at(execution: Any, seconds: float) -> None:
    """Run ``execution``, cancel it ``seconds`` of virtual time later; the cancellation reaches
    the caller."""
    task = asyncio.ensure_future(execution.run())
    await asyncio.sleep(seconds)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.mark.looptime
@pytest.mark.parametrize(
    ("second", "status"), [("waits to retry", "cancelled"), ("runs", "in_doubt")]
)
async def test_a_committed_item_is_no_call_under_way_when_the_run_is_cancelled(
    second: str, status: str
) -> None:
    """A durable fan-out of an unsafe tool, one item at a time: item 0 succeeded and is
    committed, item 1 is cancelled while it waits to retry (no call under way: the step is
    ``cancelled``, a resume calls item 1 again) or while its call runs (its effect is unknown:
    ``in_doubt``). Item 0's finished call counted as under way until the step ended."""
    plan, source = fan_plan(
        [0, 1], max_parallel=1, retry={"max_attempts": 5, "initial_delay": 100, "jitter": 0}
    )
    later: Any = RetryableError("down") if second == "waits to retry" else Hang()
    work = FaultTool("work", [{"v": 0}, later], side_effects="unsafe")
    store = MemoryStore()
    execution = prepare(plan, [source, work, FaultTool("sink", [ECHO])], store=store, approve=True)
    await _cancel_at(execution, 50)
    assert [c.item for c in work.calls] == [0, 1]
    each = execution.results["each"]
    assert each.status == status
    if status == "cancelled":
        assert "waited to retry" in (each.reason or "")
    stored = store.get_steps(execution.run_id)["each"]
    assert stored.status == status
    assert list(stored.metadata["items"]) == ["0"]  # what a resume keeps: item 0 only
