"""Retries end to end, in virtual time: exact attempt counts and exact delays between attempts."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

import planrail
from planrail import StepContext
from planrail.engine.events import EventType
from planrail.errors import RetryableError
from planrail.policies import RetryPolicy
from planrail.runs import prepare
from planrail.testing import FaultTool, always_fail, fail_times, http_error

from .conftest import now, retry, run_plan


def one_step(tool: str, **fields: object) -> dict[str, object]:
    return {"steps": [{"id": "a", "tool": tool, **fields}]}


@pytest.mark.looptime
async def test_backoff_delays_are_exact() -> None:
    """Three failures, then success: attempts at t=0, 0.5, 1.5, 3.5 (initial 0.5, backoff 2)."""
    tool = fail_times("flaky", 3, value={"ok": True})
    result = await run_plan(one_step("flaky", retry=retry(4, 0.5)), [tool])
    assert result.status == "succeeded"
    assert result.steps["a"].attempts == 4
    assert tool.call_times == [0.0, 0.5, 1.5, 3.5]
    assert result.steps["a"].output == {"ok": True}


@pytest.mark.looptime
async def test_delays_are_capped_by_max_delay() -> None:
    """With backoff 3 and max_delay 4 the gaps are 1, 3, 4, 4."""
    tool = fail_times("flaky", 4)
    plan = one_step("flaky", retry=retry(5, 1, backoff=3, max_delay=4))
    result = await run_plan(plan, [tool])
    assert result.status == "succeeded"
    assert tool.gaps() == [1, 3, 4, 4]


@pytest.mark.looptime
async def test_exhausted_retries_fail_with_every_attempt_recorded() -> None:
    """max_attempts=3 against a tool that always fails: 3 calls, each attempt's error kept."""
    tool = always_fail("down", RetryableError("still down"))
    result = await run_plan(one_step("down", retry=retry(3, 2)), [tool])
    step = result.steps["a"]
    assert result.status == "failed"
    assert step.attempts == 3
    assert tool.call_count == 3
    assert tool.gaps() == [2, 4]
    assert [h["attempt"] for h in step.attempt_history] == [1, 2, 3]
    assert all(h["error"]["message"] == "still down" for h in step.attempt_history)
    assert [h.get("delay") for h in step.attempt_history] == [2, 4, None]
    assert step.error == {"type": "RetryableError", "message": "still down", "retryable": True}


@pytest.mark.looptime
@pytest.mark.parametrize(
    "error", [ValueError("bad input"), http_error(404), http_error(400), KeyError("x")]
)
async def test_non_retryable_errors_are_tried_once(error: Exception) -> None:
    """Validation errors, other 4xx and ordinary exceptions fail after one attempt, at once."""
    tool = always_fail("strict", error)
    result = await run_plan(one_step("strict", retry=retry(5)), [tool])
    assert result.status == "failed"
    assert tool.call_count == 1
    assert result.steps["a"].attempts == 1
    assert result.steps["a"].error["retryable"] is False
    assert now() == 0


@pytest.mark.looptime
async def test_argument_validation_errors_are_not_retried() -> None:
    """Arguments that do not fit the tool's input schema fail once, without a retry."""
    import planrail

    calls: list[int] = []

    @planrail.tool
    def typed(n: int) -> int:
        calls.append(n)
        return n

    plan = {
        "steps": [
            {"id": "s", "tool": "src"},
            {
                "id": "a",
                "tool": "typed",
                "args": {"n": "${s.v}"},
                "depends_on": ["s"],
                "retry": retry(4),
            },
        ]
    }
    src = FaultTool("src", [{"v": "not a number"}])
    result = await run_plan(plan, [typed, src])
    assert result.steps["a"].status == "failed"
    assert result.steps["a"].attempts == 1
    assert result.steps["a"].error["type"] == "ArgumentError"
    assert calls == []


@pytest.mark.looptime
@pytest.mark.parametrize("status", [429, 500, 502, 503])
async def test_http_429_and_5xx_are_retried(status: int) -> None:
    """Transient HTTP statuses are retried with the policy's backoff."""
    tool = fail_times("api", 2, http_error(status))
    result = await run_plan(one_step("api", retry=retry(3, 1)), [tool])
    assert result.status == "succeeded"
    assert tool.call_times == [0, 1, 3]


@pytest.mark.looptime
async def test_retry_after_header_is_honoured() -> None:
    """A 429 with Retry-After: 30 delays the next attempt by 30s instead of the 1s backoff."""
    tool = fail_times("api", 1, http_error(429, retry_after=30))
    result = await run_plan(one_step("api", retry=retry(3, 1)), [tool])
    assert result.status == "succeeded"
    assert tool.call_times == [0, 30]


@pytest.mark.looptime
async def test_retryable_error_retry_after_is_honoured() -> None:
    """RetryableError(retry_after=12) waits 12s; a shorter hint than the backoff is ignored."""
    tool = FaultTool(
        "api",
        [
            RetryableError("slow down", retry_after=12),
            RetryableError("again", retry_after=0.1),
            {"ok": 1},
        ],
    )
    result = await run_plan(one_step("api", retry=retry(3, 5, backoff=1)), [tool])
    assert result.status == "succeeded"
    assert tool.call_times == [0, 12, 17]


@pytest.mark.looptime
async def test_jittered_delays_stay_within_bounds() -> None:
    """With jitter 0.5 every gap is within [0.5, 1.5] times the backoff delay."""
    tool = fail_times("flaky", 5)
    plan = one_step("flaky", retry={"max_attempts": 6, "initial_delay": 1, "jitter": 0.5})
    result = await run_plan(plan, [tool], policy={"seed": 7})
    assert result.status == "succeeded"
    for n, gap in enumerate(tool.gaps()):
        base = 2.0**n
        assert 0.5 * base <= gap <= 1.5 * base


@pytest.mark.looptime
async def test_jitter_is_drawn_from_the_injected_rng() -> None:
    """The same seed gives the same delays: jitter comes only from the run's RNG."""
    delays = []
    for _ in range(2):
        tool = fail_times("flaky", 3)
        plan = one_step("flaky", retry={"max_attempts": 4, "initial_delay": 1, "jitter": 1})
        start = now()
        await run_plan(plan, [tool], policy={"seed": 42})
        delays.append([t - start for t in tool.call_times])
    assert delays[0] == pytest.approx(delays[1], abs=1e-6)
    rng = random.Random(42)
    policy = RetryPolicy(max_attempts=4, initial_delay=1, jitter=1)
    expected = [policy.delay_for(n, rng) for n in (1, 2, 3)]
    assert delays[0][1:] == pytest.approx([sum(expected[:i]) for i in (1, 2, 3)], abs=1e-5)


@pytest.mark.looptime
async def test_retry_on_names_an_extra_error_type() -> None:
    """retry_on: [KeyError] makes KeyError retryable for that step."""
    tool = fail_times("lookup", 1, KeyError("missing"))
    result = await run_plan(one_step("lookup", retry=retry(2, 1, retry_on=["KeyError"])), [tool])
    assert result.status == "succeeded"
    assert tool.call_times == [0, 1]


@pytest.mark.looptime
async def test_tool_default_retry_and_run_default_retry() -> None:
    """A tool's own retry= applies when the step has none; else the run's default_retry."""
    by_tool = fail_times("t1", 1, retry={"max_attempts": 2, "initial_delay": 3, "jitter": 0})
    result = await run_plan(one_step("t1"), [by_tool])
    assert result.status == "succeeded"
    assert by_tool.gaps() == [3]
    by_run = fail_times("t2", 2)
    policy = {"default_retry": RetryPolicy(max_attempts=3, initial_delay=1, jitter=0)}
    result = await run_plan(one_step("t2"), [by_run], policy=policy)
    assert result.status == "succeeded"
    assert by_run.gaps() == [1, 2]


@pytest.mark.looptime
async def test_attempts_share_the_idempotency_key_and_count_up() -> None:
    """Every attempt sees the same key (run_id:step_id) and attempt numbers 1, 2, 3."""
    tool = fail_times("flaky", 2)
    result = await run_plan(one_step("flaky", retry=retry(3)), [tool], run_id="run_x")
    assert result.status == "succeeded"
    assert [c.attempt for c in tool.calls] == [1, 2, 3]
    assert {c.idempotency_key for c in tool.calls} == {"run_x:a"}


@pytest.mark.looptime
async def test_retry_and_attempt_events_are_emitted() -> None:
    """Each failed attempt emits attempt_failed, each scheduled retry retry_scheduled (delay)."""
    tool = fail_times("flaky", 2)
    execution = prepare(one_step("flaky", retry=retry(3, 1)), [tool], approve=True)
    events = [e async for e in execution.iter()]
    failed = [e for e in events if e.type == EventType.ATTEMPT_FAILED]
    scheduled = [e for e in events if e.type == EventType.RETRY_SCHEDULED]
    assert [e.attempt for e in failed] == [1, 2]
    assert [e.data["delay"] for e in scheduled] == [1, 2]


@pytest.mark.looptime
@pytest.mark.parametrize("effects", ["unsafe", "keyed", "none"])
async def test_cancelling_the_run_during_a_backoff_is_not_swallowed(effects: str) -> None:
    """A run cancelled while a step waits to retry ends cancelled; no further attempt happens.
    Its call failed and nothing is under way while it waits: the step is ``cancelled``, never
    ``in_doubt``, whatever the tool's side effects (a resume calls it again, as the retry
    would have)."""
    tool = always_fail("down", RetryableError("down"), side_effects=effects)
    execution = prepare(one_step("down", retry=retry(5, 100)), [tool], approve=True)
    await _cancel_after(execution, 50)
    assert tool.call_count == 1
    assert execution.status == "cancelled"
    assert execution.results["a"].status == "cancelled"
    assert "waited to retry" in (execution.results["a"].reason or "")
    await asyncio.sleep(200)
    assert tool.call_count == 1


@pytest.mark.looptime
async def test_an_unsafe_step_cancelled_inside_its_retried_call_is_in_doubt() -> None:
    """The second call is under way when the run is cancelled: its effect is unknown."""
    calls: list[int] = []

    async def second_hangs(ctx: StepContext) -> int:
        calls.append(ctx.attempt)
        if ctx.attempt == 1:
            raise RetryableError("down")
        await asyncio.sleep(10_000)
        return 0

    tool = planrail.tool(name="flaky_then_hang", side_effects="unsafe")(second_hangs)
    execution = prepare(one_step("flaky_then_hang", retry=retry(5, 10)), [tool], approve=True)
    await _cancel_after(execution, 50)
    assert calls == [1, 2]
    assert execution.results["a"].status == "in_doubt"


@pytest.mark.looptime
async def test_cancelling_the_run_during_an_attempt_propagates() -> None:
    """Cancellation that arrives inside the tool call propagates; it is never retried."""
    from planrail.testing import hang

    tool = hang("stuck")
    execution = prepare(one_step("stuck", retry=retry(5, 1), timeout=1000), [tool], approve=True)
    await _cancel_after(execution, 10)
    assert tool.call_count == 1
    assert execution.results["a"].status == "cancelled"


async def _cancel_after(execution: Any, seconds: float) -> None:
    """Run ``execution`` and cancel it ``seconds`` of virtual time later: the cancellation
    reaches the caller (it is never swallowed)."""
    task = asyncio.ensure_future(execution.run())
    await asyncio.sleep(seconds)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
