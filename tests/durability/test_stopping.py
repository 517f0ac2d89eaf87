"""Stopping a run part-way — a lost lease, a store failure, fail-fast — must end the run, never
hang it. Found by the crash harness: a runner that lost its lease under load hung for ever.

Root cause (executor): a step task cancelled before its coroutine's first step never runs
``_run_step``'s handler, so it stays in ``Execution._tasks`` and the run waits for it for ever.
``_fail_fast`` cancels such tasks whenever a dependent was launched earlier in the same event-loop
turn (a batched flush, fail-fast, the heartbeat noticing a lost lease).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

import planrail
from planrail.engine.executor import Execution
from planrail.errors import StoreError
from planrail.store import Event, Intent, MemoryStore, RunRecord, StepRecord


class FailingOnOutcomes(MemoryStore):
    """Accepts the run, intents and lease renewals, but no step outcome: the disk is full."""

    def commit(
        self,
        *,
        run: RunRecord | None = None,
        steps: Sequence[StepRecord] = (),
        events: Sequence[Event] = (),
        intents: Sequence[Intent] = (),
    ) -> list[Event]:
        if run is None and any(s.status == "succeeded" for s in steps):
            raise StoreError("disk full")
        return super().commit(run=run, steps=steps, events=events, intents=intents)


@pytest.mark.looptime
async def test_fail_fast_with_a_dependent_launched_in_the_same_turn_ends_the_run() -> None:
    """Under fail-fast, ``a`` succeeds and ``f`` fails in the same event-loop turn: ``b`` (after
    ``a``) was just launched and is cancelled before it starts; the run still ends, failed."""

    @planrail.tool(side_effects="none")
    async def ok(x: str) -> str:
        """Returns at once."""
        return x

    @planrail.tool(side_effects="none")
    async def bad(x: str) -> str:
        """Fails at once."""
        raise ValueError(x)

    plan = planrail.validate(
        {
            "goal": "fail fast",
            "steps": [
                {"id": "a", "tool": "ok", "args": {"x": "a"}},
                {"id": "f", "tool": "bad", "args": {"x": "f"}},
                {"id": "b", "tool": "ok", "args": {"x": "${a}"}, "depends_on": ["a"]},
            ],
        },
        [ok, bad],
    ).raise_for_errors()
    execution = Execution(plan, [ok, bad], failure_mode="fail_fast", approve=True)

    # Virtual time (looptime): a hang shows up as this timeout at once.
    result = await asyncio.wait_for(execution.run(), timeout=600)

    assert result.status == "failed"
    assert result.steps["f"].status == "failed"
    assert result.steps["b"].status in ("cancelled", "skipped")


@pytest.mark.looptime
async def test_a_store_failure_when_recording_outcomes_stops_the_run() -> None:
    """``a`` succeeds but its outcome cannot be committed: ``a`` is recorded failed (its tool
    honours keys: a resume calls it again), the run ends failed saying the store failed, and
    ``b``, which depends on ``a``, is never called."""
    called: list[str] = []

    @planrail.tool(side_effects="keyed")
    async def work(x: str) -> str:
        """Records that it ran."""
        called.append(x)
        return x

    plan = planrail.validate(
        {
            "goal": "store failure",
            "steps": [
                {"id": "a", "tool": "work", "args": {"x": "a"}},
                {"id": "b", "tool": "work", "args": {"x": "${a}"}, "depends_on": ["a"]},
            ],
        },
        [work],
    ).raise_for_errors()
    execution = Execution(plan, [work], store=FailingOnOutcomes(), run_id="full", approve=True)

    # Virtual time (looptime): a hang shows up as this timeout at once, not after 10 minutes.
    result = await asyncio.wait_for(execution.run(), timeout=600)

    assert result.status in ("failed", "cancelled")
    assert "disk full" in (result.error or "")
    assert called == ["a"]
    assert result.steps["a"].status == "failed"
    assert "could not be recorded" in (result.steps["a"].reason or "")
