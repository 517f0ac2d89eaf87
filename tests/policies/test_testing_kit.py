"""planrail.testing: the fake clock and the fault-injecting tools behave as documented."""

from __future__ import annotations

import asyncio

import pytest

import planrail.testing as kit
from planrail.errors import RetryableError
from planrail.testing import ECHO, FakeClock, FaultTool, Hang, Slow, fail_times, http_error


async def test_public_names_are_pinned() -> None:
    """The kit's public API is exactly this list (others append their doubles here)."""
    assert set(kit.__all__) >= {
        "FakeClock",
        "FaultTool",
        "fail_times",
        "always_fail",
        "hang",
        "slow",
        "probe",
        "http_error",
        "Hang",
        "Slow",
        "ECHO",
    }


async def test_fake_clock_advances_by_hand() -> None:
    """Sleepers wake exactly when advance() passes their time, in order."""
    clock = FakeClock()
    woke: list[tuple[str, float]] = []

    async def sleeper(name: str, s: float) -> None:
        await clock.sleep(s)
        woke.append((name, clock.monotonic()))

    tasks = [asyncio.ensure_future(sleeper("b", 2)), asyncio.ensure_future(sleeper("a", 1))]
    await clock.advance(0.5)
    assert woke == []
    assert clock.sleepers == 2
    await clock.advance(2)
    assert woke == [("a", 1), ("b", 2)]
    assert clock.monotonic() == 2.5
    assert clock.now() == 1_700_000_000.0 + 2.5
    await asyncio.gather(*tasks)


async def test_fake_clock_run_jumps_to_each_wakeup() -> None:
    """run() drives a coroutine to completion in virtual time, jumping between sleeps."""
    clock = FakeClock(start=10)

    async def work() -> float:
        await clock.sleep(3)
        await asyncio.gather(clock.sleep(5), clock.sleep(2))
        return clock.monotonic()

    assert await clock.run(work()) == 18


async def test_scripted_tool_follows_its_script_and_records_calls() -> None:
    """Entries run in order, the last repeats; each call is recorded with its arguments."""
    clock = FakeClock()
    tool = FaultTool("t", [RetryableError("one"), {"v": 1}, ECHO], clock=clock)
    with pytest.raises(RetryableError):
        await tool.fn(a=1)
    assert await tool.fn(a=2) == {"v": 1}
    assert await tool.fn(a=3) == {"a": 3}
    assert await tool.fn(a=4) == {"a": 4}
    assert [c.args for c in tool.calls] == [{"a": 1}, {"a": 2}, {"a": 3}, {"a": 4}]


async def test_fail_times_slow_and_hang() -> None:
    """fail_times fails k times; Slow takes clock time; Hang only ends when cancelled."""
    clock = FakeClock()
    flaky = fail_times("f", 2, value="ok", clock=clock)
    for _ in range(2):
        with pytest.raises(RetryableError):
            await flaky.fn()
    assert await flaky.fn() == "ok"
    slow_tool = FaultTool("s", [Slow(4, "done")], clock=clock)
    assert await clock.run(slow_tool.fn()) == "done"
    assert clock.monotonic() == 4
    stuck = FaultTool("h", [Hang()], clock=clock)
    task = asyncio.ensure_future(stuck.fn())
    await asyncio.sleep(0)
    assert stuck.active == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert stuck.active == 0


async def test_http_error_looks_like_httpx() -> None:
    """http_error carries response.status_code and a Retry-After header."""
    err = http_error(503, retry_after=5)
    assert type(err).__name__ == "HTTPStatusError"
    assert err.response.status_code == 503  # type: ignore[attr-defined]
    assert err.response.headers["retry-after"] == "5"  # type: ignore[attr-defined]
