"""The repeated-call guard: the same tool with the same resolved arguments, past the limit,
fails with repeated_call instead of being called."""

from __future__ import annotations

from typing import Any

import pytest

from planrail.engine.call_guard import CallGuard
from planrail.errors import RepeatedCallError
from planrail.plan.model import Step
from planrail.policies import RunPolicy
from planrail.testing import ECHO, FaultTool, fail_times, http_error

from .conftest import run_plan


def poll_plan(max_iterations: int = 10) -> dict[str, Any]:
    """A loop whose body never changes: the same status call each iteration."""
    return {
        "steps": [
            {
                "id": "wait",
                "tool": "status",
                "args": {"job": "j1"},
                "repeat": {"until": {"eq": ["${self.state}", "done"]},
                           "max_iterations": max_iterations},
            }
        ]
    }  # fmt: skip


@pytest.mark.looptime
async def test_a_repeat_loop_making_the_same_call_is_stopped_before_max_iterations() -> None:
    """With the default limit (3), the fourth identical iteration is refused: the tool is
    called three times, not ten, and the error names the earlier iterations."""
    tool = FaultTool("status", [{"state": "running"}])
    result = await run_plan(poll_plan(10), [tool])
    step = result.steps["wait"]
    assert result.status == "failed"
    assert tool.call_count == 3
    assert step.error is not None
    assert step.error["type"] == "RepeatedCallError"
    assert step.error["message"] == (
        "'wait' iteration 4 would call 'status' with the same arguments for the 4th time in"
        " this run (earlier: 'wait' iteration 1, 'wait' iteration 2, 'wait' iteration 3);"
        " RunPolicy.max_identical_calls is 3. Change the arguments, or list 'status' in"
        " RunPolicy.repeatable_tools if calling it again is intended"
    )


@pytest.mark.looptime
async def test_a_repeatable_tool_or_a_guard_turned_off_polls_to_the_end() -> None:
    """A tool listed in repeatable_tools, or max_identical_calls=None, is called as often as
    the loop asks."""
    for policy in ({"repeatable_tools": ["status"]}, {"max_identical_calls": None}):
        tool = FaultTool("status", [{"state": "running"}] * 5 + [{"state": "done"}])
        result = await run_plan(poll_plan(10), [tool], policy=policy)
        assert result.status == "succeeded", policy
        assert tool.call_count == 6


@pytest.mark.looptime
async def test_identical_steps_past_the_limit_fail_and_the_limit_is_configurable() -> None:
    """Three steps making the same call under max_identical_calls=2: two are called, the third
    fails with repeated_call naming them; a step with other arguments is not affected."""
    tool = FaultTool("lookup", [ECHO])
    plan = {
        "steps": [
            {"id": "a", "tool": "lookup", "args": {"q": "x"}},
            {"id": "b", "tool": "lookup", "args": {"q": "x"}, "depends_on": ["a"]},
            {"id": "c", "tool": "lookup", "args": {"q": "x"}, "depends_on": ["b"]},
            {"id": "d", "tool": "lookup", "args": {"q": "y"}, "depends_on": ["c"],
             "join": "all_finished"},
        ]
    }  # fmt: skip
    result = await run_plan(plan, [tool], policy={"max_identical_calls": 2})
    assert [s.status for s in result.steps.values()] == [
        "succeeded",
        "succeeded",
        "failed",
        "succeeded",
    ]
    error = result.steps["c"].error
    assert error is not None
    assert error["type"] == "RepeatedCallError"
    assert "(earlier: 'a', 'b')" in error["message"]
    assert tool.call_count == 3


@pytest.mark.looptime
async def test_retries_of_one_call_are_not_counted() -> None:
    """A call retried four times after transient errors is one call: the retry policy bounds
    retries, the guard does not cut them short."""
    tool = fail_times("flaky", 4, http_error(503), value={"ok": True})
    plan = {
        "steps": [
            {"id": "s", "tool": "flaky", "args": {"q": 1},
             "retry": {"max_attempts": 5, "initial_delay": 0.01, "jitter": 0}}
        ]
    }  # fmt: skip
    result = await run_plan(plan, [tool])
    assert result.status == "succeeded"
    assert result.steps["s"].attempts == 5


@pytest.mark.looptime
async def test_fan_out_items_with_the_same_arguments_count_as_calls() -> None:
    """A for_each over four equal items makes three calls; the fourth item is refused, named
    by its index."""
    items = FaultTool("items", [{"xs": [7, 7, 7, 7]}])
    tool = FaultTool("use", [ECHO])
    plan = {
        "steps": [
            {"id": "list", "tool": "items"},
            {"id": "each", "tool": "use", "for_each": "${list.xs}", "args": {"x": "${item}"},
             "max_parallel": 1, "depends_on": ["list"]},
        ]
    }  # fmt: skip
    result = await run_plan(plan, [items, tool])
    error = result.steps["each"].error
    assert error is not None
    assert error["message"].startswith("item 3: 'each' item 3 would call 'use'")
    assert tool.call_count == 3


def test_a_replan_cannot_call_a_kept_step_again() -> None:
    """After new_plan, a call identical to one whose step succeeded before the replan is
    refused at once (reference its output instead); other earlier calls still count."""
    guard = CallGuard(3)
    search = Step(id="find", tool="search", args={"q": "x"})
    assert guard.check(search, None, {}, {"q": "x"}) is None
    guard.new_plan({"find": ("search", {"q": "x"})})
    again = Step(id="find_again", tool="search", args={"q": "x"})
    refused = guard.check(again, None, {}, {"q": "x"})
    assert isinstance(refused, RepeatedCallError)
    assert refused.previous == ("find",)
    assert refused.message == (
        "step 'find_again' would call 'search' with the same arguments as step 'find', which"
        " succeeded before the replan and whose output is kept; reference ${find} instead of"
        " calling it again"
    )
    assert guard.check(again, None, {}, {"q": "other"}) is None


def test_the_guard_ignores_other_actions_and_policy_values_are_checked() -> None:
    """llm_call and condition_check steps are not counted; a bad limit is refused."""
    guard = CallGuard(1)
    think = Step(id="t", action="llm_call", prompt="p")
    assert all(guard.check(think, None, {}, {}) is None for _ in range(3))
    assert CallGuard.for_policy(RunPolicy(max_identical_calls=None)) is None
    assert RunPolicy(repeatable_tools="clock").repeatable_tools == frozenset({"clock"})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_identical_calls"):
        RunPolicy(max_identical_calls=0)
