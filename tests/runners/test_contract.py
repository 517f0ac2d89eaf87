"""The executor's contract, on every tool runner: the same tests on the local runner and on Ray.

Ordering, real data flow, the concurrency limit, skips, joins, retries, fallbacks, fan-out,
timeouts, cancellation, fail-fast, resume, placement and kept outputs must not depend on where a
tool's function runs. The tools record into a ledger file (they may
run in other processes), so every check is about what the tools really saw — never about how
long anything took.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from engine.graphs import DIAMOND, DOUBLE_DIAMOND, FAN, Graph, random_dag
from planrail.engine.events import Event, EventType
from planrail.store import SQLiteStore
from planrail.types import StepStatus

from .ledger import Ledger
from .plans import NO_WAIT, execution, graph_plan, run

S = StepStatus
E = EventType


def _check_order_and_data(graph: Graph, ledger: Ledger) -> None:
    order = ledger.order()
    returned = {e["step"]: e["returned"] for e in ledger.entries("end") if "returned" in e}
    for step, deps in graph.deps.items():
        (call,) = ledger.calls(step)
        begun = order.index(("start", step))
        for d in deps:
            assert order.index(("end", d)) < begun, f"{step} started before {d} ended"
            assert call["inputs"][d] == returned[d]
            assert call["fields"][d] == returned[d]["token"]
            assert call["items"][d] == returned[d]["payload"]["items"]


@pytest.mark.parametrize(
    "graph",
    [DIAMOND, DOUBLE_DIAMOND, FAN, *(random_dag(seed, n=10, p=0.3) for seed in (3, 7, 11))],
    ids=lambda g: g.name,
)
async def test_every_step_runs_once_after_its_dependencies_with_their_real_outputs(
    graph: Graph, runner: Any, ledger: Ledger
) -> None:
    """Each step is called exactly once, only after every dependency's call has returned, and
    receives exactly what those calls returned (whole output, a field, a nested value)."""
    result = await run(graph_plan(graph, ledger), runner)
    assert result.status == "succeeded"
    _check_order_and_data(graph, ledger)
    for step in graph.steps:
        (call,) = ledger.calls(step)
        assert call["key"] == f"{result.run_id}:{step}"
        assert result.steps[step].output["token"] == f"{step}@{result.run_id}"


async def test_max_concurrency_bounds_the_calls_in_flight(runner: Any, ledger: Ledger) -> None:
    """With ``max_concurrency=2`` no more than two calls of the twelve-wide fan are ever in
    flight (counted from the ledger's start/end order), and every step still runs once."""
    result = await run(graph_plan(FAN, ledger), runner, max_concurrency=2)
    assert result.status == "succeeded"
    running = most = 0
    for ev, _ in ledger.order():
        running += 1 if ev == "start" else -1
        most = max(most, running)
    assert most <= 2
    assert sorted(step for ev, step in ledger.order() if ev == "start") == sorted(FAN.steps)


async def test_a_failure_skips_its_dependents_and_independent_branches_go_on(
    runner: Any, ledger: Ledger
) -> None:
    """In the double diamond, a failed ``b`` skips everything downstream of it (naming ``b``),
    while ``c`` — independent of ``b`` — still runs."""
    graph = DOUBLE_DIAMOND
    result = await run(graph_plan(graph, ledger, fail={"b"}), runner)
    assert result.status == "failed"
    assert result.steps["b"].status == S.FAILED
    assert result.steps["b"].error is not None
    assert result.steps["b"].error["type"] == "ValueError"
    for step in graph.descendants("b"):
        assert result.steps[step].status == S.SKIPPED
        assert ledger.calls(step) == []
    assert result.steps["c"].status == S.SUCCEEDED


async def test_retryable_errors_are_retried_with_the_same_key(runner: Any, ledger: Ledger) -> None:
    """A tool's RetryableError crosses the runner as itself: it is retried under the step's
    policy, each attempt numbered and given the same idempotency key."""
    plan = {
        "steps": [
            {
                "id": "f",
                "tool": "flaky",
                "args": {"ledger": str(ledger), "step": "f", "failures": 2},
                "retry": {"max_attempts": 3, **NO_WAIT},
            }
        ]
    }
    result = await run(plan, runner)
    assert result.status == "succeeded"
    assert result.steps["f"].output == 3
    calls = ledger.calls("f")
    assert [c["attempt"] for c in calls] == [1, 2, 3]
    assert {c["key"] for c in calls} == {f"{result.run_id}:f"}
    history = result.steps["f"].attempt_history
    assert [h["error"]["type"] if h["error"] else None for h in history] == [
        "RetryableError",
        "RetryableError",
        None,
    ]


async def test_a_permanent_failure_takes_the_fallback_tool_or_value(
    runner: Any, ledger: Ledger
) -> None:
    """A non-retryable error is not retried; the step's fallback tool (or value) supplies its
    output, and the dependents receive that output."""
    at = str(ledger)
    plan = {
        "steps": [
            {
                "id": "p",
                "tool": "broken",
                "args": {"ledger": at, "step": "p"},
                "retry": {"max_attempts": 3, **NO_WAIT},
                "fallback": {"tool": "backup", "args": {"ledger": at, "step": "p_fb", "value": 7}},
            },
            {
                "id": "v",
                "tool": "broken",
                "args": {"ledger": at, "step": "v"},
                "fallback": {"value": 5},
            },
            {
                "id": "use",
                "tool": "double",
                "args": {"ledger": at, "step": "use", "x": "${p}"},
                "depends_on": ["p", "v"],
            },
        ]
    }
    result = await run(plan, runner)
    assert result.status == "succeeded"
    assert len(ledger.calls("p")) == 1
    assert result.steps["p"].output == 7
    assert result.steps["v"].output == 5
    assert result.steps["p"].degraded
    assert result.steps["use"].output == 14


async def test_fan_out_keeps_item_order_and_gives_each_item_its_key(
    runner: Any, ledger: Ledger
) -> None:
    """``for_each`` calls the tool once per item (at most ``max_parallel`` at once), each with
    ``key:index``; the output lists the results in item order."""
    at = str(ledger)
    plan = {
        "steps": [
            {"id": "seed", "tool": "numbers", "args": {"ledger": at, "step": "seed", "n": 6}},
            {
                "id": "fan",
                "tool": "double",
                "for_each": "${seed}",
                "max_parallel": 2,
                "args": {"ledger": at, "step": "fan", "x": "${item}"},
                "depends_on": ["seed"],
            },
        ]
    }
    result = await run(plan, runner)
    assert result.status == "succeeded"
    assert result.steps["fan"].output == [2 * x for x in range(6)]
    keys = sorted(c["key"] for c in ledger.calls("fan"))
    assert keys == sorted(f"{result.run_id}:fan:{i}" for i in range(6))


@pytest.mark.parametrize("tool", ["ablock", "block"])
async def test_a_timed_out_call_is_recorded_and_stopped_where_it_can_be(
    tool: str, runner: Any, ledger: Ledger
) -> None:
    """An attempt that outlives its ``timeout`` fails with AttemptTimeoutError and its
    dependents are skipped. The call itself is stopped — except a sync call on the local
    runner, whose thread cannot be interrupted and is abandoned."""
    at = str(ledger)
    plan = {
        "steps": [
            {"id": "slow", "tool": tool, "args": {"ledger": at, "step": "slow"}, "timeout": 0.2},
            {
                "id": "after",
                "tool": "work",
                "args": {"ledger": at, "step": "after"},
                "depends_on": ["slow"],
            },
        ]
    }
    result = await run(plan, runner)
    assert result.steps["slow"].status == S.FAILED
    assert result.steps["slow"].error is not None
    assert result.steps["slow"].error["type"] == "AttemptTimeoutError"
    assert result.steps["after"].status == S.SKIPPED
    started = len(ledger.calls("slow"))
    stopped = len(ledger.entries("stopped"))
    if runner is None and tool == "block":
        assert stopped == 0  # abandoned: the ledger's release file ends it after the test
    else:
        assert stopped == started


async def test_an_unsafe_call_cut_by_its_timeout_is_in_doubt_and_called_once(
    runner: Any, ledger: Ledger
) -> None:
    """The payment reached the receiver before the timeout cut the call: retrying would pay
    twice, so the step is ``in_doubt`` after one call (its three attempts unused) and its
    dependent waits. The receiver's ledger holds one effect."""
    at = str(ledger)
    retry = {"max_attempts": 3, "initial_delay": 0, "jitter": 0}
    plan = {
        "steps": [
            {
                "id": "pay",
                "tool": "apay_then_wait",
                "args": {"ledger": at, "step": "pay"},
                "timeout": 1.0,
                "retry": retry,
            },
            {
                "id": "after",
                "tool": "work",
                "args": {"ledger": at, "step": "after"},
                "depends_on": ["pay"],
            },
        ]
    }
    result = await run(plan, runner)
    pay = result.steps["pay"]
    assert pay.status == S.IN_DOUBT, pay.error
    assert pay.attempts == 1
    assert pay.error is not None
    assert pay.error["type"] == "CallCrashedError"
    assert result.steps["after"].status == S.PENDING
    assert len(ledger.calls("pay")) == 1
    assert len(ledger.entries("effect")) == 1
    assert len(ledger.entries("stopped")) == 1, "the call was really stopped"


async def test_a_keyed_call_cut_by_its_timeout_is_retried_with_the_same_key(
    runner: Any, ledger: Ledger
) -> None:
    """The receiver honours the key: the retry after the timeout pays nothing twice."""
    at = str(ledger)
    retry = {"max_attempts": 3, "initial_delay": 0, "jitter": 0}
    step = {
        "id": "pay",
        "tool": "apay_keyed_then_wait",
        "args": {"ledger": at, "step": "pay"},
        "timeout": 1.0,
        "retry": retry,
    }
    result = await run({"steps": [step]}, runner)
    assert result.steps["pay"].status == S.SUCCEEDED
    calls = ledger.calls("pay")
    assert [c["key"] for c in calls] == [f"{result.run_id}:pay"] * 2
    assert len(ledger.entries("effect")) == 1


class _OnStarted:
    """An observer that sets an event when a given step starts."""

    def __init__(self, step: str) -> None:
        self.step = step
        self.started = asyncio.Event()

    def on_event(self, event: Event) -> None:
        if event.type == E.STEP_STARTED and event.step_id == self.step:
            self.started.set()


@pytest.mark.parametrize("tool", ["ablock", "block"])
async def test_cancelling_the_run_cancels_its_running_calls(
    tool: str, runner: Any, ledger: Ledger
) -> None:
    """Cancelling a run while a call is in flight records that step (and everything not yet
    started) as cancelled or skipped, marks the run cancelled, and stops every call that had
    begun (a local sync call excepted: it is abandoned)."""
    at = str(ledger)
    plan = {
        "steps": [
            {"id": "first", "tool": "work", "args": {"ledger": at, "step": "first"}},
            {
                "id": "hang",
                "tool": tool,
                "args": {"ledger": at, "step": "hang"},
                "depends_on": ["first"],
            },
            {
                "id": "never",
                "tool": "work",
                "args": {"ledger": at, "step": "never"},
                "depends_on": ["hang"],
            },
        ]
    }
    watch = _OnStarted("hang")
    ex = execution(plan, runner, observers=[watch])
    task = asyncio.create_task(ex.run())
    await watch.started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    result = ex.result()
    assert result.status == "cancelled"
    assert result.steps["first"].status == S.SUCCEEDED
    assert result.steps["hang"].status == S.CANCELLED
    assert result.steps["never"].status in (S.CANCELLED, S.SKIPPED)
    assert ledger.calls("never") == []
    if not (runner is None and tool == "block"):
        assert len(ledger.entries("stopped")) == len(ledger.calls("hang")), ledger.entries()


async def test_resume_reuses_succeeded_steps_and_reruns_the_rest(
    runner: Any, ledger: Ledger, tmp_path: Path
) -> None:
    """A run whose ``gate`` step failed is resumed (same run id, same store) once the gate
    opens: the succeeded step is restored, not called again; the gate and its dependent run."""
    at = str(ledger)
    unlock = tmp_path / "unlock"
    plan = {
        "steps": [
            {"id": "a", "tool": "work", "args": {"ledger": at, "step": "a"}},
            {
                "id": "g",
                "tool": "gate",
                "args": {"ledger": at, "step": "g", "unlock": str(unlock)},
                "depends_on": ["a"],
            },
            {
                "id": "z",
                "tool": "awork",
                "args": {"ledger": at, "step": "z", "inputs": {"a": "${a}"}},
                "depends_on": ["a", "g"],
            },
        ]
    }
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        first = await run(plan, runner, store=store, run_id="run_contract")
        assert first.status == "failed"
        assert first.steps["z"].status == S.SKIPPED
        unlock.touch()
        second = await run(plan, runner, store=store, run_id="run_contract")
    finally:
        store.close()
    assert second.status == "succeeded"
    assert len(ledger.calls("a")) == 1
    assert len(ledger.calls("g")) == 2
    (z,) = ledger.calls("z")
    assert z["inputs"]["a"] == first.steps["a"].output


async def test_compute_declared_on_the_tool_or_the_step_is_accepted(
    runner: Any, ledger: Ledger
) -> None:
    """A tool declaring ``compute`` (two CPUs) runs, and so does a step overriding it; the
    local runner ignores placement, Ray reserves it for the call."""
    at = str(ledger)
    plan = {
        "steps": [
            {"id": "w", "tool": "wide", "args": {"ledger": at, "step": "w"}},
            {
                "id": "narrow",
                "tool": "wide",
                "args": {"ledger": at, "step": "narrow"},
                "compute": {"num_cpus": 1},
            },
        ]
    }
    result = await run(plan, runner)
    assert result.status == "succeeded"
    assert len(ledger.calls("w")) == len(ledger.calls("narrow")) == 1


def _kept_plan(ledger: Ledger, n: int, **extra: Any) -> dict[str, Any]:
    at = str(ledger)
    return {
        "steps": [
            {
                "id": "big",
                "tool": "series",
                "args": {"ledger": at, "step": "big", "n": n},
                "remote_output": True,
            },
            {
                "id": "sum",
                "tool": "total",
                "args": {"ledger": at, "step": "sum", "values": "${big}"},
                "depends_on": ["big", *extra.get("also", [])],
            },
            *extra.get("steps", []),
        ]
    }


async def test_a_remote_output_reaches_its_consumer_as_the_real_value(
    runner: Any, ledger: Ledger
) -> None:
    """``remote_output``: on Ray the output stays in the object store and the step records a
    handle (digest, size, preview); the local runner keeps it inline. Either way the consumer's
    function receives the real list."""
    result = await run(_kept_plan(ledger, 1000), runner)
    assert result.status == "succeeded"
    assert result.steps["sum"].output == sum(range(1000))
    (call,) = ledger.calls("sum")
    assert call["kind"] == "list"
    big = result.steps["big"].output
    if runner is None:
        assert big == list(range(1000))
    else:
        assert set(big) == {"$ray_object", "digest", "bytes", "preview"}
        assert big["preview"].startswith("[0,1,2,3")


async def test_fail_fast_stops_the_calls_in_flight(runner: Any, ledger: Ledger) -> None:
    """Under ``fail_fast`` a failure cancels what is running (its calls stopped where they can
    be) and skips what has not started; the run fails."""
    at = str(ledger)
    plan = {
        "steps": [
            {"id": "hang", "tool": "ablock", "args": {"ledger": at, "step": "hang"}},
            {"id": "bad", "tool": "work", "args": {"ledger": at, "step": "bad", "fail": True}},
            {
                "id": "later",
                "tool": "work",
                "args": {"ledger": at, "step": "later"},
                "depends_on": ["hang"],
            },
        ]
    }
    result = await run(plan, runner, failure_mode="fail_fast")
    assert result.status == "failed"
    assert result.steps["bad"].status == S.FAILED
    assert result.steps["hang"].status == S.CANCELLED
    assert result.steps["later"].status == S.SKIPPED
    assert len(ledger.entries("stopped")) == len(ledger.calls("hang"))
    assert ledger.calls("later") == []


async def test_join_rules_hold_on_every_runner(runner: Any, ledger: Ledger) -> None:
    """``any_succeeded`` runs after one of two branches failed; ``all_succeeded`` is skipped
    naming the failed branch; ``all_finished`` runs once both are over."""
    at = str(ledger)

    def join(sid: str, rule: str) -> dict[str, Any]:
        return {
            "id": sid,
            "tool": "work",
            "args": {"ledger": at, "step": sid},
            "depends_on": ["ok", "bad"],
            "join": rule,
        }

    plan = {
        "steps": [
            {"id": "ok", "tool": "awork", "args": {"ledger": at, "step": "ok"}},
            {"id": "bad", "tool": "work", "args": {"ledger": at, "step": "bad", "fail": True}},
            join("any", "any_succeeded"),
            join("all", "all_succeeded"),
            join("fin", "all_finished"),
        ]
    }
    result = await run(plan, runner)
    assert result.steps["any"].status == S.SUCCEEDED
    assert result.steps["fin"].status == S.SUCCEEDED
    assert result.steps["all"].status == S.SKIPPED
    assert "bad" in (result.steps["all"].reason or "")
    assert ledger.calls("all") == []
