"""Failure modes: continue vs fail_fast, join rules end to end, and first-available values."""

from __future__ import annotations

import pytest

from planrail.testing import ECHO, FaultTool, always_fail, slow

from .conftest import now, run_plan


def diamond(join: str, args: dict[str, object] | None = None) -> dict[str, object]:
    """a and b in parallel, then c joining them with ``join``."""
    return {
        "steps": [
            {"id": "a", "tool": "ta"},
            {"id": "b", "tool": "tb"},
            {"id": "c", "tool": "tc", "depends_on": ["a", "b"], "join": join, "args": args or {}},
        ]
    }


@pytest.mark.looptime
async def test_fail_fast_cancels_in_flight_steps_and_skips_the_rest() -> None:
    """A failure at t=1 cancels a 100s step at t=1 and skips steps that had not started."""
    long = slow("long", 100)
    bad = FaultTool("bad", [ValueError("boom")])
    later = FaultTool("later", [ECHO])
    plan = {
        "steps": [
            {"id": "wait", "tool": "pause"},
            {"id": "fail", "tool": "bad", "depends_on": ["wait"]},
            {"id": "running", "tool": "long"},
            {"id": "after", "tool": "later", "depends_on": ["running"]},
        ]
    }
    result = await run_plan(plan, [slow("pause", 1), bad, long, later], failure_mode="fail_fast")
    assert now() == 1
    assert result.status == "failed"
    assert result.steps["fail"].status == "failed"
    assert result.steps["running"].status == "cancelled"
    assert "fail" in (result.steps["running"].reason or "")
    assert result.steps["after"].status == "skipped"
    assert long.active == 0
    assert later.call_count == 0


@pytest.mark.looptime
async def test_continue_lets_independent_branches_finish() -> None:
    """By default a failure skips only its dependents; the independent 100s step completes."""
    plan = {
        "steps": [
            {"id": "fail", "tool": "bad"},
            {"id": "dep", "tool": "later", "depends_on": ["fail"]},
            {"id": "other", "tool": "long"},
        ]
    }
    long = slow("long", 100)
    result = await run_plan(
        plan, [FaultTool("bad", [ValueError("x")]), long, FaultTool("later", [ECHO])]
    )
    assert now() == 100
    assert result.steps["other"].status == "succeeded"
    assert result.steps["dep"].status == "skipped"
    assert "'fail' failed" in (result.steps["dep"].reason or "")


@pytest.mark.looptime
@pytest.mark.parametrize(
    ("join", "a_fails", "c_runs"),
    [
        ("all_succeeded", False, True),
        ("all_succeeded", True, False),
        ("all_finished", True, True),
        ("any_succeeded", True, True),
    ],
)
async def test_join_rules(join: str, a_fails: bool, c_runs: bool) -> None:
    """all_succeeded needs both; all_finished runs after both end; any_succeeded needs one."""
    ta = FaultTool("ta", [ValueError("a broke")] if a_fails else [{"x": 1}])
    tc = FaultTool("tc", [ECHO])
    result = await run_plan(diamond(join), [ta, slow("tb", 2, {"x": 2}), tc])
    assert (result.steps["c"].status == "succeeded") is c_runs
    assert tc.call_count == int(c_runs)
    if c_runs:
        assert tc.call_times == [2]  # c waits for b even when a already decided the join


@pytest.mark.looptime
async def test_any_succeeded_is_skipped_when_nothing_succeeded() -> None:
    """any_succeeded with every dependency failed: the step is skipped with a clear reason."""
    result = await run_plan(
        diamond("any_succeeded"),
        [
            FaultTool("ta", [ValueError("x")]),
            FaultTool("tb", [ValueError("y")]),
            FaultTool("tc", [ECHO]),
        ],
    )
    assert result.steps["c"].status == "skipped"
    assert "no dependency succeeded" in (result.steps["c"].reason or "")


@pytest.mark.looptime
@pytest.mark.parametrize(("a_fails", "expected"), [(False, "from-a"), (True, "from-b")])
async def test_first_available_takes_the_first_producer_that_succeeded(
    a_fails: bool, expected: str
) -> None:
    """{"$first": ["${a.x}", "${b.x}"]} passes over a failed producer; it never yields null."""
    ta = FaultTool("ta", [ValueError("a broke")] if a_fails else [{"x": "from-a"}])
    tc = FaultTool("tc", [ECHO])
    plan = diamond("any_succeeded", {"v": {"$first": ["${a.x}", "${b.x}"]}})
    result = await run_plan(plan, [ta, FaultTool("tb", [{"x": "from-b"}]), tc])
    assert result.steps["c"].output == {"v": expected}


@pytest.mark.looptime
async def test_first_available_with_a_default_literal() -> None:
    """A literal candidate after the references is the default when no producer succeeded."""
    tc = FaultTool("tc", [ECHO])
    plan = diamond("all_finished", {"v": {"$first": ["${a.x}", "${b.x}", "none"]}})
    result = await run_plan(
        plan, [always_fail("ta", ValueError()), always_fail("tb", ValueError()), tc]
    )
    assert result.steps["c"].output == {"v": "none"}


@pytest.mark.looptime
async def test_first_available_with_no_candidate_fails_the_step() -> None:
    """No producer succeeded and no default: the step fails naming the producers tried."""
    plan = diamond("all_finished", {"v": {"$first": ["${a.x}", "${b.x}"]}})
    tc = FaultTool("tc", [ECHO])
    result = await run_plan(
        plan, [always_fail("ta", ValueError()), always_fail("tb", ValueError()), tc]
    )
    c = result.steps["c"]
    assert c.status == "failed"
    assert tc.call_count == 0
    assert "no candidate is available" in c.error["message"]
    assert "'a'" in c.error["message"]
    assert "'b'" in c.error["message"]


@pytest.mark.looptime
async def test_first_available_skips_a_skipped_producer() -> None:
    """A producer skipped by a false 'when' guard is passed over like a failed one."""
    plan = {
        "steps": [
            {"id": "a", "tool": "ta", "when": False},
            {"id": "b", "tool": "tb"},
            {
                "id": "c",
                "tool": "tc",
                "depends_on": ["a", "b"],
                "join": "any_succeeded",
                "args": {"v": {"$first": ["${a.x}", "${b.x}"]}},
            },
        ]
    }
    ta = FaultTool("ta", [{"x": "A"}])
    result = await run_plan(plan, [ta, FaultTool("tb", [{"x": "B"}]), FaultTool("tc", [ECHO])])
    assert result.steps["a"].status == "skipped"
    assert result.steps["a"].reason == "condition false"
    assert ta.call_count == 0
    assert result.steps["c"].output == {"v": "B"}
