"""Bounded loops: repeat until a predicate holds, at most max_iterations, with the history of
earlier iterations handed to the step."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from planrail.errors import RetryableError
from planrail.runs import prepare
from planrail.store import MemoryStore
from planrail.testing import FaultTool, Hang

from .conftest import run_plan


def loop_plan(until: Any, max_iterations: int, **step: Any) -> dict[str, Any]:
    return {
        "steps": [
            {
                "id": "draft",
                "tool": "writer",
                "args": {"topic": "x"},
                "repeat": {"until": until, "max_iterations": max_iterations},
                **step,
            }
        ]
    }


@pytest.mark.looptime
async def test_the_loop_stops_as_soon_as_until_holds() -> None:
    """Scores 1, 5, 9 with until score >= 8: three iterations, the output is the last one."""
    tool = FaultTool("writer", [{"score": 1}, {"score": 5}, {"score": 9}, {"score": 10}])
    result = await run_plan(loop_plan({"ge": ["${self.score}", 8]}, 10), [tool])
    assert result.status == "succeeded"
    assert tool.call_count == 3
    assert result.steps["draft"].output == {"score": 9}


@pytest.mark.looptime
async def test_a_loop_stops_at_max_iterations_with_a_clear_error() -> None:
    """until never holds: exactly max_iterations calls, then LoopExhaustedError (the
    repeated-call guard, which would stop the identical fourth call, is off here)."""
    tool = FaultTool("writer", [{"score": 1}])
    policy = {"max_identical_calls": None}
    result = await run_plan(loop_plan({"ge": ["${self.score}", 8]}, 4), [tool], policy=policy)
    step = result.steps["draft"]
    assert result.status == "failed"
    assert tool.call_count == 4
    assert step.error["type"] == "LoopExhaustedError"
    assert "4 iterations" in step.error["message"]


@pytest.mark.looptime
async def test_the_run_limit_caps_max_iterations() -> None:
    """A plan asking for 50 iterations under RunPolicy.max_iterations=3 runs 3 and says so."""
    tool = FaultTool("writer", [{"score": 1}])
    result = await run_plan(
        loop_plan({"eq": ["${self.score}", 2]}, 50), [tool], policy={"max_iterations": 3}
    )
    assert tool.call_count == 3
    assert "capped by the run's max_iterations" in result.steps["draft"].error["message"]


@pytest.mark.looptime
async def test_each_iteration_sees_the_history_of_earlier_ones() -> None:
    """StepContext.history holds earlier iterations' args, outputs and errors, in order."""
    tool = FaultTool("writer", [{"score": 1}, ValueError("bad draft"), {"score": 9}])
    result = await run_plan(loop_plan({"ge": ["${self.score}", 8]}, 5), [tool])
    assert result.status == "succeeded"
    histories = [c.history for c in tool.calls]
    assert histories[0] == ()
    assert [h["iteration"] for h in histories[2]] == [1, 2]
    assert histories[2][0]["output"] == {"score": 1}
    assert histories[2][0]["args"] == {"topic": "x"}
    assert histories[2][1]["error"]["message"] == "bad draft"
    assert histories[2][1]["output"] is None


@pytest.mark.looptime
async def test_iterations_retry_on_their_own() -> None:
    """Each iteration runs under the step's retry policy; attempts number on across the loop."""
    from planrail.errors import RetryableError

    tool = FaultTool("writer", [RetryableError("busy"), {"score": 1}, {"score": 9}])
    plan = loop_plan(
        {"ge": ["${self.score}", 8]}, 3, retry={"max_attempts": 2, "initial_delay": 1, "jitter": 0}
    )
    result = await run_plan(plan, [tool])
    assert result.status == "succeeded"
    assert [c.attempt for c in tool.calls] == [1, 2, 3]
    assert tool.call_times == [0, 1, 1]
    assert result.steps["draft"].attempts == 3
    assert [h["iteration"] for h in result.steps["draft"].attempt_history] == [1, 1, 2]


@pytest.mark.looptime
async def test_an_exhausted_loop_can_take_its_fallback() -> None:
    """A loop that never satisfies until falls back like any failed step (degraded)."""
    tool = FaultTool("writer", [{"score": 1}])
    plan = loop_plan({"ge": ["${self.score}", 8]}, 2, fallback={"value": {"score": 0}})
    result = await run_plan(plan, [tool])
    assert result.steps["draft"].degraded
    assert result.steps["draft"].output == {"score": 0}
    assert "2 iterations" in (result.steps["draft"].reason or "")


@pytest.mark.looptime
@pytest.mark.parametrize(
    ("second", "status"), [("waits to retry", "cancelled"), ("runs", "in_doubt")]
)
async def test_a_committed_iteration_is_no_call_under_way_when_the_run_is_cancelled(
    second: str, status: str
) -> None:
    """A durable loop of an unsafe tool: iteration 1 finished and is committed, iteration 2 is
    cancelled while it waits to retry (no call under way: ``cancelled``, a resume goes on
    after iteration 1) or while its call runs (its effect is unknown: ``in_doubt``)."""
    later: Any = RetryableError("down") if second == "waits to retry" else Hang()
    tool = FaultTool("writer", [{"score": 1}, later], side_effects="unsafe")
    retry = {"max_attempts": 5, "initial_delay": 100, "jitter": 0}
    plan = loop_plan({"ge": ["${self.score}", 8]}, 5, retry=retry)
    store = MemoryStore()
    execution = prepare(plan, [tool], store=store, approve=True)
    task = asyncio.ensure_future(execution.run())
    await asyncio.sleep(50)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert tool.call_count == 2
    draft = execution.results["draft"]
    assert draft.status == status
    if status == "cancelled":
        assert "waited to retry" in (draft.reason or "")
    assert store.get_steps(execution.run_id)["draft"].status == status
