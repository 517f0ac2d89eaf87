"""Stage boundaries in the executor: what a confirm stage waits for, what a "no" skips, and
the limits a boundary keeps (concurrency, fail-fast, no LLM when none is needed)."""

from __future__ import annotations

from typing import Any

import pytest

from planrail.agent.llm_step import LLMStepHandler
from planrail.engine.executor import Execution
from planrail.engine.result import RunResult
from planrail.plan.validate import load_plan
from planrail.testing import ECHO, FaultTool, always_fail, probe
from planrail.testing.llm import ScriptedLLM
from planrail.types import StepStatus

S = StepStatus


def two_stages(later: list[dict[str, Any]], later_ids: list[str]) -> dict[str, Any]:
    """Stage 'first' holds step a; stage 'second' (confirm) holds ``later``."""
    return {
        "goal": "G",
        "steps": [{"id": "a", "tool": "first_tool"}, *later],
        "stages": [
            {"id": "first", "goal": "A is done", "steps": ["a"]},
            {"id": "second", "goal": "The rest is done", "steps": later_ids, "confirm": True},
        ],
    }


async def run(
    plan: dict[str, Any], tools: list[Any], answers: list[Any] | None, **options: Any
) -> tuple[RunResult, ScriptedLLM]:
    llm = ScriptedLLM(answers or [])
    handlers = {} if answers is None else {"llm_call": LLMStepHandler(llm)}
    execution = Execution(load_plan(plan, tools), tools, handlers=handlers, **options)
    return await execution.run(), llm


@pytest.mark.looptime
async def test_released_steps_keep_max_concurrency() -> None:
    """Three independent steps held at the boundary start at most max_concurrency at a time
    once the check says yes."""
    worker = probe("work", 1.0)
    later = [{"id": f"w{i}", "tool": "work", "args": {"i": i}} for i in range(3)]
    plan = two_stages(later, ["w0", "w1", "w2"])
    tools = [FaultTool("first_tool", [ECHO]), worker]
    result, _ = await run(plan, tools, [{"ok": True, "reason": "ok"}], max_concurrency=1)
    assert result.status == "succeeded"
    assert worker.max_active == 1
    assert worker.call_count == 3


async def test_a_failed_earlier_step_rejects_the_boundary_without_a_model_call() -> None:
    """When a step of an earlier stage failed, the stage is not confirmed (saying which step)
    and the model is not asked."""
    plan = two_stages([{"id": "b", "tool": "second_tool"}], ["b"])
    tools = [always_fail("first_tool", ValueError("down")), FaultTool("second_tool", [ECHO])]
    result, llm = await run(plan, tools, [{"ok": True, "reason": "unused"}])
    assert llm.requests == []
    assert result.steps["b"].reason == (
        "stage 'second' was not confirmed: stage 'first' did not finish: step 'a' failed"
    )
    assert result.rejected_stages == {"second": "stage 'first' did not finish: step 'a' failed"}


async def test_without_an_llm_a_confirm_stage_is_not_confirmed() -> None:
    """A run with no llm_call handler cannot check: the boundary says so and the run fails."""
    plan = two_stages([{"id": "b", "tool": "second_tool"}], ["b"])
    tools = [FaultTool("first_tool", [ECHO]), FaultTool("second_tool", [ECHO])]
    result, _ = await run(plan, tools, None)
    assert result.status == "failed"
    assert "has confirm: true, but this run has no llm_call handler" in (result.error or "")
    assert tools[1].call_count == 0


async def test_a_stage_step_that_becomes_ready_after_a_no_is_skipped_too() -> None:
    """A later step of the stage with join all_finished (ready although its dependency was
    skipped) is skipped with the stage's reason; an unstaged step runs as usual."""
    later = [
        {"id": "b", "tool": "second_tool"},
        {"id": "c", "tool": "second_tool", "args": {"n": 2}, "depends_on": ["b"],
         "join": "all_finished"},
        {"id": "free", "tool": "second_tool", "args": {"n": 3}, "depends_on": ["a"]},
    ]  # fmt: skip
    plan = two_stages(later, ["b", "c"])
    tools = [FaultTool("first_tool", [ECHO]), FaultTool("second_tool", [ECHO])]
    result, _ = await run(plan, tools, [{"ok": False, "reason": "A is not done"}])
    reason = "stage 'second' was not confirmed: A is not done"
    assert [(result.steps[s].status, result.steps[s].reason) for s in ("b", "c")] == [
        (S.SKIPPED, reason),
        (S.SKIPPED, reason),
    ]
    assert result.steps["free"].status == S.SUCCEEDED


async def test_a_malformed_verdict_is_a_no() -> None:
    """An answer that does not fit the verdict schema is a check that could not be made."""
    plan = two_stages([{"id": "b", "tool": "second_tool"}], ["b"])
    tools = [FaultTool("first_tool", [ECHO]), FaultTool("second_tool", [ECHO])]
    result, _ = await run(plan, tools, [{"verdict": "yes"}])
    assert result.status == "failed"
    assert (result.error or "").startswith(
        "stage 'second' was not confirmed: the stage check could not be made: the answer"
        " does not follow the step's output_schema"
    )
