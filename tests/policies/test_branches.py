"""Branches: the predicate language (static checks, evaluation without eval), condition_check
steps and ``when`` guards; untaken branches are skipped with reason ``condition false``."""

from __future__ import annotations

from typing import Any

import pytest

from planrail.testing import ECHO, FaultTool

from .conftest import run_plan


def branch_plan(score_op: dict[str, Any]) -> dict[str, Any]:
    return {
        "steps": [
            {"id": "score", "tool": "scorer"},
            {
                "id": "is_high",
                "action": "condition_check",
                "condition": score_op,
                "depends_on": ["score"],
            },
            {"id": "vip", "tool": "vip", "when": "${is_high}", "depends_on": ["is_high"]},
            {"id": "std", "tool": "std", "when": {"not": "${is_high}"}, "depends_on": ["is_high"]},
            {
                "id": "done",
                "tool": "sink",
                "depends_on": ["vip", "std"],
                "join": "any_succeeded",
                "args": {"path": {"$first": ["${vip.path}", "${std.path}"]}},
            },
        ]
    }


@pytest.mark.looptime
@pytest.mark.parametrize(("score", "taken", "untaken"), [(90, "vip", "std"), (10, "std", "vip")])
async def test_condition_check_and_when_guards_pick_one_branch(
    score: int, taken: str, untaken: str
) -> None:
    """The condition's output is a boolean; the untaken branch is skipped 'condition false'
    and never called; the join takes the branch that ran."""
    tools = [
        FaultTool("scorer", [{"score": score}]),
        FaultTool("vip", [{"path": "vip"}]),
        FaultTool("std", [{"path": "std"}]),
        FaultTool("sink", [ECHO]),
    ]
    result = await run_plan(branch_plan({"ge": ["${score.score}", 50]}), tools)
    assert result.status == "succeeded"
    assert result.steps["is_high"].output is (score >= 50)
    assert result.steps[untaken].status == "skipped"
    assert result.steps[untaken].reason == "condition false"
    assert result.steps[taken].status == "succeeded"
    assert result.steps["done"].output == {"path": taken}
    assert {t.name: t.call_count for t in tools}[untaken] == 0


@pytest.mark.looptime
async def test_dependents_of_an_untaken_branch_are_skipped_too() -> None:
    """A step depending (all_succeeded) on a skipped branch is skipped, naming it."""
    plan = {
        "steps": [
            {"id": "a", "tool": "t", "when": {"eq": [1, 2]}},
            {"id": "b", "tool": "t", "depends_on": ["a"]},
        ]
    }
    result = await run_plan(plan, [FaultTool("t", [ECHO])])
    assert result.steps["a"].reason == "condition false"
    assert result.steps["b"].status == "skipped"
    assert "'a' skipped" in (result.steps["b"].reason or "")
    assert result.status == "succeeded"


@pytest.mark.looptime
async def test_a_guard_that_cannot_be_evaluated_fails_the_step() -> None:
    """A 'when' comparing a string with a number fails the step (it is not treated as false)."""
    plan = {
        "steps": [
            {"id": "a", "tool": "t"},
            {"id": "b", "tool": "t", "when": {"gt": ["${a.s}", 1]}, "depends_on": ["a"]},
        ]
    }
    result = await run_plan(plan, [FaultTool("t", [{"s": "text"}])])
    assert result.steps["b"].status == "failed"
    assert result.steps["b"].error["type"] == "PredicateError"
