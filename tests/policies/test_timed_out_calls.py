"""A timeout that cuts a call of a tool that does not honour idempotency keys leaves its effect
in doubt, whatever runs the call: an async call cancelled mid-call may have taken effect before
it stopped, as a sync call that runs on may yet take it (``engine/attempts.py``). It is not
retried; a key-honouring tool is, with the same key. A call cancelled before it began (waiting
for a thread) had no effect and is retried as any timeout is (``engine/runners.py``)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import planrail
from planrail.engine.executor import Execution
from planrail.engine.runners import LocalRunner
from planrail.testing import FaultTool, Hang

from .conftest import now, retry, run_plan


def _pay(side_effects: Any) -> FaultTool:
    """Hangs on its first call (past any timeout), answers on the next."""
    return FaultTool("pay", [Hang(), {"paid": True}], side_effects=side_effects)


def _plan(**limits: Any) -> dict[str, Any]:
    return {
        "steps": [
            {"id": "p", "tool": "pay", "args": {"amount": 5}, **limits},
            {"id": "after", "tool": "pay", "args": {"of": "${p.paid}"}, "depends_on": ["p"]},
        ]
    }


@pytest.mark.looptime
async def test_an_unsafe_async_call_cut_by_its_timeout_is_in_doubt_and_not_retried() -> None:
    tool = _pay("unsafe")
    result = await run_plan(_plan(timeout=3, retry=retry(3, 1)), [tool])
    step = result.steps["p"]
    assert step.status == "in_doubt"
    assert step.error is not None
    assert step.error["type"] == "CallCrashedError"
    assert "attempt 1 of step 'p' timed out after 3s" in step.error["message"]
    assert "cancelled mid-call" in step.error["message"]
    assert tool.call_count == 1, "the tool's own log: no second call"
    assert tool.active == 0, "the call was really cancelled"
    assert result.steps["after"].status != "succeeded"
    assert result.status == "failed"
    assert now() == 3


@pytest.mark.looptime
async def test_an_unsafe_call_cut_by_total_timeout_or_the_deadline_is_in_doubt() -> None:
    tool = _pay("unsafe")
    result = await run_plan(_plan(total_timeout=4, retry=retry(3, 1)), [tool])
    assert result.steps["p"].status == "in_doubt"
    assert tool.call_count == 1

    late = _pay("unsafe")
    result = await run_plan(_plan(retry=retry(3, 1)), [late], policy={"deadline": 2})
    assert result.steps["p"].status == "in_doubt"
    assert late.call_count == 1


@pytest.mark.looptime
@pytest.mark.parametrize("side_effects", ["keyed", "idempotent", "none"])
async def test_a_key_honouring_call_cut_by_its_timeout_is_retried_with_its_key(
    side_effects: str,
) -> None:
    tool = _pay(side_effects)
    result = await run_plan(_plan(timeout=3, retry=retry(3, 1)), [tool], run_id="r")
    assert result.steps["p"].status == "succeeded"
    assert [c.idempotency_key for c in tool.calls[:2]] == ["r:p", "r:p"]
    assert [c.attempt for c in tool.calls[:2]] == [1, 2]


async def test_an_unsafe_sync_call_still_waiting_for_a_thread_is_retried() -> None:
    """One thread, held by ``hold``: ``pay``'s first attempt times out before a thread takes
    it (it never ran), so it is retried as a timeout, not put in doubt; ``hold`` lets go of
    the thread once that attempt has failed, and the retry runs."""
    release = threading.Event()
    paid: list[int] = []

    @planrail.tool(side_effects="none")
    def hold() -> str:
        """Keeps the only thread until released."""
        release.wait(30)
        return "held"

    @planrail.tool(
        side_effects="unsafe",
        timeout=0.05,
        retry={"max_attempts": 2, "initial_delay": 0.01, "jitter": 0},
    )
    def pay(ctx: planrail.StepContext) -> str:
        """Records each call it really gets."""
        paid.append(ctx.attempt)
        return "paid"

    class Release:
        def on_event(self, event: Any) -> None:
            if event.step_id == "p" and str(event.type) == "attempt_failed":
                release.set()

    plan = planrail.validate(
        {
            "goal": "queued",
            "steps": [
                {"id": "h", "tool": "hold", "args": {}},
                {"id": "p", "tool": "pay", "args": {}},
            ],
        },
        [hold, pay],
    ).raise_for_errors()
    runner = LocalRunner(max_workers=1)
    try:
        result = await Execution(
            plan, [hold, pay], tool_runner=runner, approve=True, observers=[Release()]
        ).run()
    finally:
        release.set()
        await runner.aclose()
    assert result.steps["p"].status == "succeeded", result.steps["p"].error
    assert result.steps["p"].attempts == 2
    assert paid == [2], "the first attempt never reached the tool"
