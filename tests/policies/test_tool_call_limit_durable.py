"""``SecurityPolicy.max_tool_calls`` bounds a run, not one runner of it: a resume counts the
calls its earlier runners were admitted (their stored ``policy_decision`` events)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

import planrail
from planrail.engine.guard import admitted
from planrail.store import open_store

LIMIT = 2
CALLS: list[int] = []
"""The tools' own ledger: every call made, in every runner."""


def _call(n: int, *, stop_once: bool = True) -> dict[str, int]:
    """A call of stage ``n``: the first one fails (the run stops there, and is resumed)."""
    CALLS.append(n)
    if stop_once and CALLS.count(n) == 1:
        raise ValueError(f"stage {n} stops the run")
    return {"n": n}


@planrail.tool(side_effects="none")
def stage(n: int) -> dict[str, int]:
    return _call(n)


@planrail.tool(side_effects="keyed")
def charge(n: int) -> dict[str, int]:
    """Changes the world: its decision is committed with its intent, before the call."""
    return _call(n)


@planrail.tool(side_effects="none")
def fine(n: int) -> dict[str, int]:
    return _call(n, stop_once=False)


def chain(tool: str, length: int = 5) -> dict[str, Any]:
    steps: list[dict[str, Any]] = []
    for n in range(length):
        step: dict[str, Any] = {"id": f"s{n}", "tool": tool, "args": {"n": n}}
        if n:
            step["depends_on"] = [f"s{n - 1}"]
        steps.append(step)
    return {"goal": "five stages", "steps": steps}


@pytest.fixture(autouse=True)
def _fresh_ledger() -> None:
    CALLS.clear()


@pytest.mark.parametrize("tool", ["stage", "charge"])
async def test_the_limit_holds_over_resumes(store_url: str, tool: str) -> None:
    """A limit of 2 on a five-step chain whose every step stops the run once: over a first
    runner and four resumes (each a new guard, on a new store object over the same
    database), the tools are called twice in all, and every resume past the limit ends with
    the limit's error and calls nothing. (Each runner started from zero: two calls per
    runner, nine in all.)"""
    security = planrail.SecurityPolicy(max_tool_calls=LIMIT)
    with open_store(store_url) as store:
        first = await planrail.arun(
            chain(tool), [stage, charge], store=store, run_id="r", security=security, approve=True
        )
    assert first.status == "failed"
    assert CALLS == [0]
    results = []
    for _ in range(4):
        with open_store(store_url) as store:
            resumed = planrail.resume("r", [stage, charge], store=store, approve=True)
            results.append(await resumed.run())
    assert CALLS == [0, 0], "the tools' own ledger: two calls over five runners"
    last = results[-1]
    assert last.status == "failed"
    assert last.error is not None
    assert "the run reached its limit of 2 tool calls (SecurityPolicy.max_tool_calls)" in (
        last.error
    )
    with open_store(store_url) as store:
        stored = store.get_steps("r")
        run = store.get_run("r")
        decisions = [e.data for e in store.events("r") if e.type == "policy_decision"]
    assert stored["s0"].status == "succeeded"
    assert (stored["s1"].error or {})["type"] == "ToolCallLimitError"
    assert run is not None
    assert run.error is not None
    assert "max_tool_calls" in run.error["message"]
    assert sum(admitted(d) for d in decisions) == LIMIT
    assert all(r.steps["s1"].status == "failed" for r in results[1:])


async def test_the_limit_ends_the_run_without_a_logged_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Reaching the limit is how the run ends, not a bug: the refused step fails with
    ToolCallLimitError, the run stops with the limit's error, and nothing is logged with a
    traceback (it was logged as "error running step")."""
    caplog.set_level(logging.DEBUG)
    result = await planrail.arun(
        chain("fine", 3), [fine], security=planrail.SecurityPolicy(max_tool_calls=LIMIT)
    )
    assert CALLS == [0, 1]
    assert result.status == "failed"
    assert (result.steps["s2"].error or {})["type"] == "ToolCallLimitError"
    assert "SecurityPolicy.max_tool_calls" in (result.error or "")
    assert [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR] == []


def test_only_admitted_decisions_count() -> None:
    """What a resume counts: an allowed or approved call; not a denial (the limit's own
    included), nor a call that needed approval and did not get it."""
    assert admitted({"action": "allow", "tool": "t"})
    assert admitted({"action": "approve", "approved": True, "tool": "t"})
    assert not admitted({"action": "approve", "approved": False, "tool": "t"})
    assert not admitted({"action": "deny", "reason": "tool call limit"})
    assert not admitted({"action": "deny", "reason": "no payments", "tool": "t"})
