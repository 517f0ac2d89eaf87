"""A sync call that times out but cannot be stopped keeps its resource and its place under
``max_concurrency`` until its thread returns, and no retry overlaps it unless its (keyed) tool
allows that (``engine/runners.py``, ``engine/attempts.py``, ``plan/effects.py``)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from pathlib import Path
from typing import Any

import pytest

import planrail
from planrail.engine.executor import Execution
from planrail.engine.runners import LocalRunner, still_running
from planrail.errors import ToolDefinitionError
from planrail.plan.effects import step_effect
from planrail.plan.model import Step
from planrail.plan.tools import ToolRegistry
from planrail.policies.limits import RunPolicy
from planrail.store import SQLiteStore


async def test_a_timed_out_sync_call_holds_its_resource_until_its_thread_returns() -> None:
    """``stuck`` (keyed, ``timeout`` 0.05, three attempts) blocks its thread past its timeout
    on a resource limited to one call; ``after`` (same resource, runs once ``stuck`` has
    finished either way) starts only once ``stuck``'s thread has returned: it never sees the
    stuck call still running. ``stuck`` is not retried while its call runs, and the runner
    counts it abandoned until then."""
    running = threading.Event()
    release = threading.Event()
    starts: list[str] = []
    seen_running: list[bool] = []
    runner = LocalRunner()

    @planrail.tool(side_effects="keyed", timeout=0.05, resource="db", retry={"max_attempts": 3})
    def stuck() -> str:
        """Blocks until released, well past its timeout."""
        starts.append("stuck")
        running.set()
        release.wait(30)
        running.clear()
        return "late"

    @planrail.tool(side_effects="none", resource="db")
    def after() -> str:
        """Notes whether the stuck call was still running when it started."""
        seen_running.append(running.is_set())
        return "ok"

    abandoned: list[int] = []

    class Releaser:
        """Once the run has given up on ``s`` (its step failed), releases its thread."""

        def on_event(self, event: Any) -> None:
            if event.step_id == "s" and str(event.type) == "step_failed":
                abandoned.append(runner.abandoned)
                release.set()

    plan = planrail.validate(
        {
            "goal": "abandoned",
            "steps": [
                {"id": "s", "tool": "stuck", "args": {}},
                {
                    "id": "a",
                    "tool": "after",
                    "args": {},
                    "depends_on": ["s"],
                    "join": "all_finished",
                },
            ],
        },
        [stuck, after],
    ).raise_for_errors()
    policy = RunPolicy(resources={"db": {"max_concurrency": 1}})
    result = await Execution(
        plan,
        [stuck, after],
        policy=policy,
        tool_runner=runner,
        observers=[Releaser()],
        approve=True,
    ).run()
    await runner.aclose()

    assert result.steps["s"].status == "failed"
    assert result.steps["s"].error is not None
    assert result.steps["s"].error["type"] == "AttemptTimeoutError"
    assert starts == ["stuck"], "no retry overlapped the call still running"
    assert abandoned == [1], "counted abandoned while its thread ran"
    assert result.steps["a"].status == "succeeded"
    assert seen_running == [False]


async def test_a_keyed_tool_that_allows_it_is_retried_while_its_timed_out_call_runs() -> None:
    """``overlapping_retries=True`` on a keyed tool: its first call blocks past its timeout
    and cannot be stopped; the retry starts at once with the same idempotency key and its
    answer is the step's output, while the first call still runs (it returns only after the
    run is over)."""
    release = threading.Event()
    calls: list[tuple[int, str]] = []

    @planrail.tool(
        side_effects="keyed",
        timeout=0.05,
        retry={"max_attempts": 2, "initial_delay": 0, "jitter": 0},
        overlapping_retries=True,
    )
    def post(ctx: planrail.StepContext) -> str:
        """The first call blocks until released; the second answers at once."""
        calls.append((ctx.attempt, ctx.idempotency_key))
        if ctx.attempt == 1:
            release.wait(30)
            return "late"
        return "second"

    plan = planrail.validate(
        {"goal": "overlap", "steps": [{"id": "p", "tool": "post", "args": {}}]}, [post]
    ).raise_for_errors()
    runner = LocalRunner()
    result = await Execution(
        plan, [post], run_id="r", tool_runner=runner, approve=True, max_concurrency=2
    ).run()
    still_running = runner.abandoned
    release.set()
    await runner.aclose()

    assert result.steps["p"].status == "succeeded"
    assert result.steps["p"].output == "second"
    assert calls == [(1, "r:p"), (2, "r:p")], "the retry overlapped, with the same key"
    assert still_running == 1


def test_only_key_honouring_tools_may_allow_overlapping_retries() -> None:
    """An unsafe tool cannot opt in (two calls at once may both take effect), and the opt-in
    is what :mod:`planrail.plan.effects` reads; a step whose fallback tool did not opt in may
    not overlap."""
    with pytest.raises(ToolDefinitionError, match="overlapping_retries"):

        @planrail.tool(side_effects="unsafe", overlapping_retries=True)
        def pay() -> None:
            """Unsafe."""

    @planrail.tool(side_effects="keyed", overlapping_retries=True)
    def post() -> None:
        """Keyed, opts in."""

    @planrail.tool(side_effects="keyed")
    def plain() -> None:
        """Keyed, does not."""

    registry = ToolRegistry([post, plain])
    assert step_effect(Step(id="a", tool="post"), registry).retry_may_overlap
    assert not step_effect(Step(id="b", tool="plain"), registry).retry_may_overlap
    with_fallback = Step(id="c", tool="post", fallback={"tool": "plain", "args": {}})
    assert not step_effect(with_fallback, registry).retry_may_overlap


async def test_abandoned_calls_count_against_max_concurrency_until_their_thread_returns() -> None:
    """``max_concurrency: 1``: ``stuck`` (a sync keyed tool, ``timeout`` 0.05) is abandoned
    on its timeout while its thread still runs; the independent ``other`` (async) does not
    start while it runs — the run holds it until the thread returns — so the tools' own log
    never shows two calls at once."""
    release = threading.Event()
    log: list[str] = []
    lock = threading.Lock()

    def note(entry: str) -> None:
        with lock:
            log.append(entry)

    @planrail.tool(side_effects="keyed", timeout=0.05, estimated_duration=10)
    def stuck() -> str:
        """Blocks until released, well past its timeout."""
        note("stuck start")
        release.wait(30)
        note("stuck end")
        return "late"

    @planrail.tool(side_effects="none")
    async def other() -> str:
        """Independent of ``stuck``."""
        note("other start")
        note("other end")
        return "ok"

    plan = planrail.validate(
        {
            "goal": "limit",
            "steps": [
                {"id": "s", "tool": "stuck", "args": {}},
                {"id": "o", "tool": "other", "args": {}},
            ],
        },
        [stuck, other],
    ).raise_for_errors()
    runner = LocalRunner()
    execution = Execution(plan, [stuck, other], tool_runner=runner, max_concurrency=1, approve=True)
    seen_at_failure: list[tuple[str, int]] = []
    async for event in execution.iter():
        if event.step_id == "s" and str(event.type) == "step_failed":
            # The scheduler has decided what to start next by now: not ``o``.
            seen_at_failure.append((str(execution.results["o"].status), runner.abandoned))
            release.set()
    await runner.aclose()
    result = execution.result()

    assert result.steps["s"].status == "failed"
    assert result.steps["o"].status == "succeeded"
    assert seen_at_failure == [("pending", 1)]
    assert log == ["stuck start", "stuck end", "other start", "other end"]


async def test_a_resume_in_the_same_process_waits_for_the_call_its_key_still_runs(
    tmp_path: Path,
) -> None:
    """A long-lived process (``planrail mcp serve``) cancels a run while a keyed sync call runs
    in its thread, then resumes the run: the resume does not call that key again while the
    first call still runs (the step fails, ``CallStillRunningError``); once it has returned, a
    resume calls it again with the same key. From the tool's own log."""
    started, release = threading.Event(), threading.Event()
    calls: list[tuple[str, str]] = []

    @planrail.tool(side_effects="keyed")
    def post(ctx: planrail.StepContext) -> str:
        """Blocks its thread until released."""
        calls.append(("start", ctx.idempotency_key))
        started.set()
        release.wait(30)
        calls.append(("end", ctx.idempotency_key))
        return "posted"

    plan = {"goal": "post once at a time", "steps": [{"id": "p", "tool": "post", "args": {}}]}
    run_id = f"held-{tmp_path.name}"  # a key of its own: the process remembers it
    key = f"{run_id}:p"
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        first = asyncio.create_task(
            planrail.arun(plan, [post], store=store, run_id=run_id, approve=True)
        )
        assert await asyncio.to_thread(started.wait, 10)
        first.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await first
        assert store.get_run(run_id).status == "cancelled"  # type: ignore[union-attr]

        held = await planrail.resume(run_id, [post], store=store).run()
        error = held.steps["p"].error
        assert held.status == "failed"
        assert error is not None
        assert error["type"] == "CallStillRunningError"
        assert calls == [("start", key)], "not called while the first call runs"

        release.set()
        for call in still_running(key):
            await asyncio.wrap_future(call)
        again = await planrail.resume(run_id, [post], store=store).run()
    finally:
        release.set()
        store.close()
    assert again.status == "succeeded", again.why
    assert calls == [("start", key), ("end", key), ("start", key), ("end", key)]
