"""Per-resource concurrency and rate limits: never more than N at once, never above the rate,
and the longest remaining path is admitted first."""

from __future__ import annotations

import asyncio

import pytest

from planrail.engine.resources import ResourceGate, TokenBucket
from planrail.policies import ResourceLimit, RunPolicy
from planrail.testing import ECHO, FakeClock, FaultTool, Slow, probe, slow

from .conftest import now, run_plan


def fan(n: int, tool: str, **step: object) -> dict[str, object]:
    return {"steps": [{"id": f"s{i}", "tool": tool, "args": {"i": i}, **step} for i in range(n)]}


def max_in_window(times: list[float], window: float) -> int:
    """The most start times in any closed interval of length ``window``."""
    times = sorted(times)
    return max(sum(1 for t in times[i:] if t <= start + window) for i, start in enumerate(times))


@pytest.mark.looptime
@pytest.mark.parametrize("limit", [1, 2, 3])
async def test_a_probe_never_sees_more_than_max_concurrency(limit: int) -> None:
    """Ten 1s calls to a resource limited to N: at most N at once, makespan ceil(10/N)."""
    tool = probe("api_call", 1.0, resource="api")
    policy = {"resources": {"api": {"max_concurrency": limit}}}
    result = await run_plan(fan(10, "api_call"), [tool], policy=policy)
    assert result.status == "succeeded"
    assert tool.max_active == limit
    assert now() == -(-10 // limit)


@pytest.mark.looptime
async def test_the_observed_rate_never_exceeds_the_configured_rate() -> None:
    """rate 5/s: 20 instant calls start 0.2s apart; no 1s window holds more than 5."""
    tool = FaultTool("api_call", [ECHO], resource="api")
    result = await run_plan(fan(20, "api_call"), [tool], policy={"resources": {"api": {"rate": 5}}})
    assert result.status == "succeeded"
    assert max_in_window(tool.call_times, 1.0) <= 5
    assert all(g >= 0.2 for g in tool.gaps())
    assert tool.call_times[-1] == pytest.approx(19 * 0.2, abs=1e-3)


@pytest.mark.looptime
async def test_rate_per_minute_with_a_concurrency_cap_and_retries() -> None:
    """'30/min' and max 2 at once: every attempt (retries too) is admitted by both limits."""
    tool = FaultTool(
        "api_call",
        [Slow(5, RuntimeError("x")), Slow(5)],
        resource="api",
        retry={"max_attempts": 3, "initial_delay": 0, "jitter": 0, "retry_on": ["RuntimeError"]},
    )
    policy = {"resources": {"api": {"rate": "30/min", "max_concurrency": 2}}}
    result = await run_plan(fan(6, "api_call"), [tool], policy=policy)
    assert result.status == "succeeded"
    assert tool.max_active <= 2
    assert max_in_window(tool.call_times, 60.0) <= 30
    assert all(g >= 2.0 - 1e-9 for g in tool.gaps())


@pytest.mark.looptime
async def test_step_resource_overrides_the_tools() -> None:
    """A step naming resource 'slowapi' is limited by that resource, not the tool's."""
    tool = probe("api_call", 1.0, resource="fast")
    policy = {"resources": {"slowapi": {"max_concurrency": 1}}}
    await run_plan(fan(3, "api_call", resource="slowapi"), [tool], policy=policy)
    assert tool.max_active == 1
    assert now() == 3


@pytest.mark.looptime
async def test_fan_out_items_share_the_resource_limit() -> None:
    """Each for_each item is a call: 6 items with max_parallel 6 still run 2 at a time."""
    items = FaultTool("items", [[1, 2, 3, 4, 5, 6]], output_schema={"type": "array"})
    tool = probe("api_call", 1.0, resource="api")
    plan = {
        "steps": [
            {"id": "list", "tool": "items"},
            {
                "id": "each",
                "tool": "api_call",
                "for_each": "${list}",
                "max_parallel": 6,
                "args": {"n": "${item}"},
                "depends_on": ["list"],
            },
        ]
    }
    policy = {"resources": {"api": {"max_concurrency": 2}}}
    result = await run_plan(plan, [items, tool], policy=policy)
    assert result.steps["each"].output == [{"n": i} for i in range(1, 7)]
    assert tool.max_active == 2
    assert now() == 3


@pytest.mark.looptime
async def test_the_longest_remaining_path_is_admitted_first() -> None:
    """Three short steps queue for a 1-slot resource; a step with a long path behind it that
    becomes ready later is admitted next, ahead of the earlier but shorter ones."""
    tool = probe("api_call", 1.0, resource="api")
    plan = {
        "steps": [
            {"id": "short1", "tool": "api_call", "estimated_duration": 1},
            {"id": "short2", "tool": "api_call", "estimated_duration": 1},
            {"id": "short3", "tool": "api_call", "estimated_duration": 1},
            {"id": "prep", "tool": "prep", "estimated_duration": 0.5},
            {"id": "critical", "tool": "api_call", "depends_on": ["prep"], "estimated_duration": 1},
            {"id": "tail", "tool": "tail", "depends_on": ["critical"], "estimated_duration": 50},
        ]
    }
    tools = [tool, slow("prep", 0.5), slow("tail", 50)]
    # Four identical api_call probes: past the repeated-call guard's default, so it is off.
    policy = {"resources": {"api": {"max_concurrency": 1}}, "max_identical_calls": None}
    result = await run_plan(plan, tools, policy=policy)
    assert result.status == "succeeded"
    order = [(c.idempotency_key or "").rsplit(":", 1)[1] for c in tool.calls]
    assert order[1] == "critical"
    assert tool.call_times == [0, 1, 2, 3]
    assert now() == 52  # critical admitted at t=1, tail runs 2..52


async def test_gate_orders_waiters_by_priority_then_arrival() -> None:
    """With one slot, waiters are admitted highest priority first, ties in arrival order."""
    clock = FakeClock()
    gate = ResourceGate({"r": ResourceLimit(max_concurrency=1)}, clock)
    admitted: list[str] = []

    async def user(name: str, prio: float) -> None:
        async with gate.slot("r", prio):
            admitted.append(name)
            await clock.sleep(1)

    tasks = [
        asyncio.ensure_future(user(n, p))
        for n, p in [("first", 0), ("low", 1), ("high", 9), ("mid", 5), ("mid2", 5)]
    ]
    await clock.run(asyncio.gather(*tasks))
    assert admitted == ["first", "high", "mid", "mid2", "low"]
    assert clock.monotonic() == 5


async def test_a_cancelled_waiter_gives_up_its_place() -> None:
    """A waiter cancelled while queued is never admitted and does not hold a slot."""
    clock = FakeClock()
    gate = ResourceGate({"r": ResourceLimit(max_concurrency=1)}, clock)
    await gate.acquire("r")
    waiter = asyncio.ensure_future(gate.acquire("r"))
    await asyncio.sleep(0)
    assert gate.waiting("r") == 1
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    gate.release("r")
    assert gate.in_flight("r") == 0
    assert gate.waiting("r") == 0


async def test_token_bucket_spacing_and_burst() -> None:
    """rate 2/s with burst 3: three tokens at once, then one every 0.5s (in virtual time)."""
    clock = FakeClock()
    bucket = TokenBucket(rate=2, per=1.0, burst=3, clock=clock)
    times: list[float] = []

    async def take(n: int) -> None:
        for _ in range(n):
            await bucket.acquire()
            times.append(clock.monotonic())

    await clock.run(take(6))
    assert times[:3] == [0, 0, 0]
    assert times[3:] == pytest.approx([0.5, 1.0, 1.5], abs=1e-5)


async def test_resource_limits_parse_and_refuse_nonsense() -> None:
    """Rates parse from '10/s', '600/min', per='minute'; zero or negative limits raise."""
    assert ResourceLimit.parse({"rate": "600/min"}).interval == pytest.approx(0.1)
    assert ResourceLimit.parse({"rate": 2, "per": "minute"}).interval == 30
    for bad in (
        {"max_concurrency": 0},
        {"rate": -1},
        {"burst": 0},
        {"rate": "fast"},
        {"per": "fortnight"},
        {"limit": 3},
    ):
        with pytest.raises(ValueError):  # noqa: PT011 - each case has its own message
            ResourceLimit.parse(bad)
    with pytest.raises(ValueError, match="deadline"):
        RunPolicy(deadline=-1)
