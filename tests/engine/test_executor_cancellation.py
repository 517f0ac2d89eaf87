"""Cancelling a run (Ctrl-C in the CLI is this): running steps are cancelled, nothing else
starts, the run is ``cancelled`` and every record is consistent."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from planrail.engine.events import Event, EventType
from planrail.engine.executor import Execution
from planrail.plan.tools import ToolRegistry
from planrail.plan.validate import validate
from planrail.runs import prepare
from planrail.store import open_store
from planrail.types import StepStatus

from .graphs import Graph
from .probes import LoopClock, Recorder, probe_plan

S = StepStatus
E = EventType

# a (1 s) feeds b (10 s) which feeds d; c (10 s) is independent; e waits on a 50 s step.
GRAPH = Graph("cancel", {"a": (), "b": ("a",), "c": (), "d": ("b",), "slow": (), "e": ("slow",)})
DURATIONS = {"a": 1, "b": 10, "c": 10, "d": 1, "slow": 50, "e": 1}


class Capture:
    def __init__(self) -> None:
        self.events: list[Event] = []

    def on_event(self, event: Event) -> None:
        self.events.append(event)


def prepared(rec: Recorder, cap: Capture, **options: object) -> Execution:
    rec.t0 = asyncio.get_running_loop().time()
    plan = probe_plan(GRAPH, DURATIONS)
    return prepare(plan, [rec.tool()], clock=LoopClock(rec.t0), observers=[cap], **options)


def assert_consistent(ex: Execution, rec: Recorder) -> None:
    """Nothing half-written: no step is left pending or running; succeeded steps have their
    output recorded (and only they do); every started step has an end time; every step that
    did not succeed says why."""
    result = ex.result()
    assert result.status == "cancelled"
    for sid, res in result.steps.items():
        assert res.status in {S.SUCCEEDED, S.CANCELLED, S.SKIPPED}, (sid, res.status)
        if res.status == S.SUCCEEDED:
            assert res.output == rec.returned[sid] == ex.outputs[sid]
        else:
            assert res.output is None
            assert sid not in ex.outputs
            assert res.reason
        if res.started_at is not None:
            assert res.finished_at is not None
            assert res.finished_at >= res.started_at
    assert set(ex.outputs) == {s for s, r in result.steps.items() if r.status == S.SUCCEEDED}


@pytest.mark.looptime
async def test_cancelling_the_task_running_run_cancels_running_steps() -> None:
    """Cancelling the task that awaits ``Execution.run()`` while ``b`` and ``c`` run: both
    probes see the cancellation at that instant, ``a`` keeps its success, nothing else is ever
    called (even much later), the run is ``cancelled`` and ``run_finished`` says so."""
    rec, cap = Recorder(), Capture()
    ex = prepared(rec, cap)
    task = asyncio.create_task(ex.run())
    await rec.started_event("b").wait()
    assert rec.started_event("c").is_set()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    calls = rec.by_step()
    assert calls["a"].outcome == "returned"
    for sid in ("b", "c", "slow"):
        assert calls[sid].outcome == "cancelled"
        assert calls[sid].end == 1
        assert ex.results[sid].status == S.CANCELLED
        assert ex.results[sid].finished_at == 1
    assert ex.status == "cancelled"
    assert_consistent(ex, rec)

    await asyncio.sleep(100)  # long after: nothing was left running or scheduled
    assert set(rec.by_step()) == {"a", "b", "c", "slow"}
    assert cap.events[-1].type == E.RUN_FINISHED
    assert cap.events[-1].data["status"] == "cancelled"
    assert sum(e.type == E.RUN_FINISHED for e in cap.events) == 1


@pytest.mark.looptime
async def test_closing_iter_early_cancels_the_run() -> None:
    """A consumer that stops iterating (closing the ``iter()`` generator) cancels the run just
    like cancelling ``run()``: running steps are cancelled and the records are consistent."""
    rec, cap = Recorder(), Capture()
    ex = prepared(rec, cap)
    async with contextlib.aclosing(ex.iter()) as events:
        async for event in events:
            if event.type == E.STEP_STARTED and event.step_id == "b":
                break
    calls = rec.by_step()
    assert calls["c"].outcome == calls["slow"].outcome == "cancelled"
    # ``b``'s task was created but had not begun when the run was cancelled.
    assert "b" not in calls or calls["b"].outcome == "cancelled"
    assert ex.results["b"].status == S.CANCELLED
    assert_consistent(ex, rec)
    await asyncio.sleep(100)
    assert "d" not in rec.by_step()


@pytest.mark.looptime
async def test_cancelling_before_any_step_finishes_leaves_nothing_succeeded() -> None:
    """Cancelled at time 0, while the roots are running: every step ends cancelled or skipped,
    nothing has an output."""
    rec, cap = Recorder(), Capture()
    ex = prepared(rec, cap)
    task = asyncio.create_task(ex.run())
    await rec.started_event("a").wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert ex.outputs == {}
    assert_consistent(ex, rec)
    assert {c.step for c in rec.calls} == {"a", "c", "slow"}


@pytest.mark.looptime
async def test_cancelling_with_queued_steps_under_a_concurrency_limit() -> None:
    """With ``max_concurrency=1`` ready steps wait in the queue; cancelling then marks the
    queued and pending ones cancelled too, and none of them is ever started."""
    rec, cap = Recorder(), Capture()
    ex = prepared(rec, cap, max_concurrency=1)
    task = asyncio.create_task(ex.run())
    await asyncio.sleep(0.5)
    assert rec.running == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(rec.calls) == 1
    assert_consistent(ex, rec)
    await asyncio.sleep(100)
    assert len(rec.calls) == 1


# ---------------------------------------------------------------- with a store


@pytest.mark.looptime
async def test_a_cancelled_durable_run_records_every_step_final() -> None:
    """With a store, cancelling the run commits a final record for every step: the steps
    that were running are stored ``cancelled`` with an end time, like the in-memory result."""
    store = open_store("memory://")
    rec, _cap = Recorder(), Capture()
    rec.t0 = asyncio.get_running_loop().time()
    plan = validate(probe_plan(GRAPH, DURATIONS), ToolRegistry([rec.tool()])).raise_for_errors()
    ex = Execution(plan, [rec.tool()], store=store, clock=LoopClock(rec.t0), run_id="r1")
    task = asyncio.create_task(ex.run())
    await rec.started_event("b").wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    run = store.get_run("r1")
    assert run is not None
    assert run.status == "cancelled"
    stored = store.get_steps("r1")
    for sid, res in ex.results.items():
        assert stored[sid].status == res.status, sid
    assert stored["c"].status == S.CANCELLED
    assert stored["c"].finished_at is not None


@pytest.mark.looptime
async def test_fail_fast_durable_run_records_the_cancelled_steps() -> None:
    """With a store and fail-fast, the steps cancelled by the first failure are stored
    ``cancelled``, matching the run's result."""
    store = open_store("memory://")
    rec = Recorder()
    rec.t0 = asyncio.get_running_loop().time()
    plan = probe_plan(GRAPH, DURATIONS, fail={"a"})
    checked = validate(plan, ToolRegistry([rec.tool()])).raise_for_errors()
    ex = Execution(
        checked,
        [rec.tool()],
        store=store,
        clock=LoopClock(rec.t0),
        failure_mode="fail_fast",
        run_id="r2",
    )
    result = await ex.run()
    assert result.steps["c"].status == S.CANCELLED
    stored = store.get_steps("r2")
    for sid, res in result.steps.items():
        assert stored[sid].status == res.status, sid
