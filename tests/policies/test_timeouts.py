"""Timeouts per attempt, per step (all attempts) and per run, in virtual time."""

from __future__ import annotations

import pytest

from planrail.errors import RetryableError
from planrail.testing import FaultTool, Hang, hang, slow

from .conftest import now, retry, run_plan


@pytest.mark.looptime
async def test_a_hanging_tool_is_cut_off_by_its_timeout() -> None:
    """A tool that never returns fails with AttemptTimeoutError exactly at timeout=5."""
    tool = hang("stuck")
    result = await run_plan({"steps": [{"id": "a", "tool": "stuck", "timeout": 5}]}, [tool])
    step = result.steps["a"]
    assert result.status == "failed"
    assert step.error["type"] == "AttemptTimeoutError"
    assert step.attempts == 1
    assert now() == 5
    assert tool.active == 0  # the hanging call was really cancelled


@pytest.mark.looptime
async def test_timeouts_are_retried_and_each_attempt_gets_the_full_timeout() -> None:
    """Hang, hang, answer: attempts start at 0, 3+1, 7+2 (timeout 3, backoff 1 then 2)."""
    tool = FaultTool("t", [Hang(), Hang(), {"ok": True}])
    plan = {"steps": [{"id": "a", "tool": "t", "timeout": 3, "retry": retry(3, 1)}]}
    result = await run_plan(plan, [tool])
    assert result.status == "succeeded"
    assert tool.call_times == [0, 4, 9]


@pytest.mark.looptime
async def test_the_tools_declared_timeout_applies_when_the_step_sets_none() -> None:
    """ToolSpec.timeout is the per-attempt default; the step's own timeout overrides it."""
    tool = hang("stuck", timeout=2)
    result = await run_plan({"steps": [{"id": "a", "tool": "stuck"}]}, [tool])
    assert result.steps["a"].error["type"] == "AttemptTimeoutError"
    assert now() == 2
    tool2 = hang("stuck2", timeout=2)
    start = now()
    await run_plan({"steps": [{"id": "a", "tool": "stuck2", "timeout": 7}]}, [tool2])
    assert now() - start == 7


@pytest.mark.looptime
async def test_total_timeout_bounds_all_attempts_and_backoff() -> None:
    """timeout 4, 1s between attempts, total 12: attempts at 0, 5, 10; the third is cut at 12."""
    tool = hang("stuck")
    plan = {
        "steps": [
            {
                "id": "a",
                "tool": "stuck",
                "timeout": 4,
                "total_timeout": 12,
                "retry": retry(5, 1, backoff=1),
            }
        ]
    }
    result = await run_plan(plan, [tool])
    step = result.steps["a"]
    assert tool.call_times == [0, 5, 10]
    assert step.error["type"] == "StepTimeoutError"
    assert step.attempts == 3
    assert now() == 12


@pytest.mark.looptime
async def test_no_retry_is_started_when_its_backoff_would_pass_total_timeout() -> None:
    """A retry whose wait would end after total_timeout is not waited for: fail at once."""
    tool = FaultTool("t", [RetryableError("busy")])
    plan = {
        "steps": [{"id": "a", "tool": "t", "total_timeout": 5, "retry": retry(5, 2, backoff=3)}]
    }
    result = await run_plan(plan, [tool])
    assert tool.call_times == [0, 2]  # the next wait (6s) would pass t=5
    assert now() == 2
    assert "time limit" in result.steps["a"].attempt_history[-1]["retry"]


@pytest.mark.looptime
async def test_the_run_deadline_stops_the_run() -> None:
    """With deadline 10 a 30s step is cut at 10, the run fails, later steps never start."""
    long = slow("long", 30)
    after = slow("after", 1)
    plan = {
        "steps": [{"id": "a", "tool": "long"}, {"id": "b", "tool": "after", "depends_on": ["a"]}]
    }
    result = await run_plan(plan, [long, after], policy={"deadline": 10})
    assert now() == 10
    assert result.status == "failed"
    assert result.steps["a"].error["type"] == "DeadlineExceededError"
    assert result.steps["b"].status == "skipped"
    assert after.call_count == 0
    assert "deadline" in (result.error or "")


@pytest.mark.looptime
async def test_the_deadline_cancels_other_running_steps() -> None:
    """Parallel steps running at the deadline are stopped too; none runs past it."""
    tools = [slow("s1", 30), slow("s2", 40), slow("s3", 2)]
    plan = {"steps": [{"id": t.name, "tool": t.name} for t in tools]}
    result = await run_plan(plan, tools, policy={"deadline": 10})
    assert now() == 10
    assert result.steps["s3"].status == "succeeded"
    assert {result.steps["s1"].status, result.steps["s2"].status} <= {"failed", "cancelled"}
    assert all(t.active == 0 for t in tools)
