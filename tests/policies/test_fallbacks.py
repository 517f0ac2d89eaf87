"""Fallbacks: after retries are exhausted or for a non-retryable error, a value or another tool
stands in; the step succeeds ``degraded`` with the reason and its dependents use that output."""

from __future__ import annotations

import pytest

from planrail.engine.events import EventType
from planrail.errors import RetryableError
from planrail.runs import prepare
from planrail.testing import ECHO, FaultTool, always_fail, fail_times, http_error

from .conftest import retry, run_plan


def plan_with(fallback: dict[str, object], **step: object) -> dict[str, object]:
    return {
        "steps": [
            {"id": "src", "tool": "src"},
            {
                "id": "a",
                "tool": "primary",
                "args": {"q": "${src.q}"},
                "depends_on": ["src"],
                "fallback": fallback,
                **step,
            },
            {"id": "use", "tool": "sink", "args": {"got": "${a}"}, "depends_on": ["a"]},
        ]
    }


def tools(primary: FaultTool) -> list[FaultTool]:
    return [
        FaultTool("src", [{"q": "paris"}]),
        primary,
        FaultTool("sink", [ECHO]),
        FaultTool("backup", [ECHO]),
    ]


@pytest.mark.looptime
async def test_a_static_fallback_value_feeds_dependents() -> None:
    """Retries exhausted: the step succeeds degraded with the value, and 'use' receives it."""
    primary = always_fail("primary", RetryableError("down"))
    plan = plan_with({"value": {"hits": []}}, retry=retry(2))
    result = await run_plan(plan, tools(primary))
    a = result.steps["a"]
    assert result.status == "succeeded"
    assert primary.call_count == 2
    assert a.status == "succeeded"
    assert a.degraded
    assert a.output == {"hits": []}
    assert "fallback value" in (a.reason or "")
    assert "down" in (a.reason or "")
    assert result.steps["use"].output == {"got": {"hits": []}}


@pytest.mark.looptime
async def test_a_fallback_tool_gets_its_own_args_from_the_same_inputs() -> None:
    """A non-retryable error goes straight to the fallback tool, whose args use ${src.q}."""
    primary = always_fail("primary", http_error(404))
    plan = plan_with(
        {"tool": "backup", "args": {"query": "${src.q}", "cached": True}}, retry=retry(5)
    )
    all_tools = tools(primary)
    result = await run_plan(plan, all_tools)
    a = result.steps["a"]
    assert primary.call_count == 1
    assert a.degraded
    assert a.output == {"query": "paris", "cached": True}
    assert "fallback tool 'backup'" in (a.reason or "")
    assert result.steps["use"].output == {"got": {"query": "paris", "cached": True}}
    assert [h.get("fallback") for h in a.attempt_history] == [None, "backup"]


@pytest.mark.looptime
async def test_fallback_is_not_used_when_the_step_succeeds() -> None:
    """A retry that succeeds keeps the real output; the step is not degraded."""
    primary = fail_times("primary", 1, value={"real": True})
    result = await run_plan(plan_with({"value": "fake"}, retry=retry(2)), tools(primary))
    assert result.steps["a"].output == {"real": True}
    assert not result.steps["a"].degraded


@pytest.mark.looptime
async def test_a_failing_fallback_tool_fails_the_step_and_skips_dependents() -> None:
    """When the fallback tool fails as well, the step fails and says both failed."""
    primary = always_fail("primary", ValueError("bad"))
    all_tools = tools(primary)
    all_tools[-1] = always_fail("backup", ValueError("also bad"))
    result = await run_plan(plan_with({"tool": "backup", "args": {}}), all_tools)
    a = result.steps["a"]
    assert a.status == "failed"
    assert a.error["message"] == "also bad"
    assert "so did its fallback tool 'backup'" in (a.reason or "")
    assert result.steps["use"].status == "skipped"


@pytest.mark.looptime
async def test_a_degraded_step_emits_step_degraded() -> None:
    """The event stream marks the step degraded, with the reason."""
    primary = always_fail("primary", ValueError("bad"))
    execution = prepare(plan_with({"value": 0}), tools(primary), approve=True)
    events = [e async for e in execution.iter()]
    degraded = [e for e in events if e.type == EventType.STEP_DEGRADED]
    assert [e.step_id for e in degraded] == ["a"]
    assert execution.results["a"].degraded
