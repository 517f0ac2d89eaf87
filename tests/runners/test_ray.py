"""What only the Ray runner does: crashes of workers and actors, shipping tools, placement.

Kill tests: the tool applies its effect at a receiver (the ledger) and then its process exits
(``os._exit``) — a Ray task's worker, or the async actor in the middle of the call. A tool that
honours idempotency keys is retried with the same key and the receiver applies the effect
once; an unsafe one is ``in_doubt``, never retried, and the effect is applied once.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import planrail
from planrail.store import SQLiteStore
from planrail.types import StepStatus

from .ledger import Ledger
from .plans import NO_WAIT, execution, run

pytestmark = pytest.mark.ray

S = StepStatus


def _pay(tool: str, ledger: Ledger, **step: Any) -> dict[str, Any]:
    at = str(ledger)
    return {
        "steps": [
            {
                "id": "pay",
                "tool": tool,
                "args": {"ledger": at, "step": "pay"},
                "retry": {"max_attempts": 3, **NO_WAIT},
                **step,
            },
            {
                "id": "receipt",
                "tool": "work",
                "args": {"ledger": at, "step": "receipt"},
                "depends_on": ["pay"],
            },
        ]
    }


@pytest.mark.parametrize("tool", ["pay_keyed", "apay_keyed"])
async def test_a_keyed_call_whose_process_dies_is_retried_with_the_same_key(
    tool: str, ray_runner: Any, ledger: Ledger
) -> None:
    """The worker (task) or actor dies right after the receiver applied the payment: the
    attempt is a CallCrashedError, retried with the same idempotency key, and the receiver —
    which honours keys — applies the payment exactly once."""
    result = await run(_pay(tool, ledger), ray_runner)
    assert result.status == "succeeded"
    pay = result.steps["pay"]
    assert pay.output == "paid"
    assert pay.attempts == 2
    assert pay.attempt_history[0]["error"]["type"] == "CallCrashedError"
    assert pay.attempt_history[0]["error"]["retryable"] is True
    calls = ledger.calls("pay")
    assert [c["attempt"] for c in calls] == [1, 2]
    assert len({c["key"] for c in calls}) == 1
    assert calls[0]["pid"] != calls[1]["pid"]  # the second attempt ran in a fresh process
    assert len(ledger.entries("effect")) == 1
    assert result.steps["receipt"].status == S.SUCCEEDED


@pytest.mark.parametrize("tool", ["pay_unsafe", "apay_unsafe"])
async def test_an_unsafe_call_whose_process_dies_is_in_doubt_and_never_retried(
    tool: str, ray_runner: Any, ledger: Ledger, tmp_path: Path
) -> None:
    """The process dies after the unsafe payment was applied: the step is ``in_doubt`` (its
    retry policy and its fallback are not used), its dependent waits, the run fails saying how
    to decide — and a resume keeps it in doubt rather than paying twice."""
    plan = _pay(tool, ledger, fallback={"value": "refunded"})
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        result = await run(plan, ray_runner, store=store, run_id="run_doubt")
        again = await run(plan, ray_runner, store=store, run_id="run_doubt")
    finally:
        store.close()
    pay = result.steps["pay"]
    assert pay.status == S.IN_DOUBT
    assert pay.attempts == 1
    assert pay.error is not None
    assert pay.error["type"] == "CallCrashedError"
    assert pay.error["retryable"] is False
    assert "planrail resolve" in (pay.reason or "")
    assert result.steps["receipt"].status == S.PENDING
    assert result.status == "failed"
    assert again.steps["pay"].status == S.IN_DOUBT
    assert len(ledger.calls("pay")) == 1
    assert len(ledger.entries("effect")) == 1
    assert ledger.calls("receipt") == []


async def test_the_pool_replaces_a_dead_actor(ray_runner: Any, ledger: Ledger) -> None:
    """After an actor died mid-call, later async calls still run (on a fresh actor)."""
    await run(_pay("apay_keyed", ledger), ray_runner)
    at = str(ledger)
    plan = {
        "steps": [
            {"id": f"s{i}", "tool": "awork", "args": {"ledger": at, "step": f"s{i}"}}
            for i in range(4)
        ]
    }
    result = await run(plan, ray_runner)
    assert result.status == "succeeded"


def _closure_holding_a_lock() -> Any:
    lock = threading.Lock()

    @planrail.tool(side_effects="none")
    def locked(x: int) -> int:
        with lock:
            return x

    return locked


async def test_a_tool_that_cannot_be_shipped_is_refused_before_the_run(
    ray_runner: Any, ledger: Ledger, tmp_path: Path
) -> None:
    """A closure holding a lock cannot be imported by a worker nor pickled: the run is refused
    before any step starts — and before the store records it — with one line that says both."""
    locked = _closure_holding_a_lock()
    at = str(ledger)
    plan = {
        "steps": [
            {"id": "first", "tool": "work", "args": {"ledger": at, "step": "first"}},
            {"id": "l", "tool": "locked", "args": {"x": 1}, "depends_on": ["first"]},
        ]
    }
    from planrail.backends.ray import ToolShippingError
    from planrail.engine.executor import Execution
    from planrail.plan.validate import validate

    from . import tools

    registry = [*tools.ALL, locked]
    checked = validate(plan, registry).raise_for_errors()
    store = SQLiteStore(tmp_path / "runs.db")
    try:
        with pytest.raises(ToolShippingError) as info:
            await Execution(
                checked,
                registry,
                tool_runner=ray_runner,
                store=store,
                run_id="run_refused",
                approve=True,
            ).run()
        assert store.get_run("run_refused") is None  # nothing recorded, no lease held
    finally:
        store.close()
    message = info.value.message
    assert "\n" not in message
    assert "tool 'locked'" in message
    assert "closure (defined inside _closure_holding_a_lock())" in message
    assert "cannot pickle '_thread.lock' object" in message
    assert ledger.entries() == []


async def test_a_tool_the_workers_cannot_import_is_refused_before_the_run(
    ray_runner: Any, ledger: Ledger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A module this process imports but the workers cannot (it is not on their path): refused
    before the run, naming the tool and the workers' import error."""
    (tmp_path / "only_here_tools.py").write_text(
        "import planrail\n\n\n@planrail.tool(side_effects='none')\ndef here(x: int) -> int:\n"
        "    return x\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import only_here_tools  # type: ignore[import-not-found]

    try:
        plan = {"steps": [{"id": "h", "tool": "here", "args": {"x": 1}}]}
        with pytest.raises(
            planrail.ToolError, match=r"tool 'here' does not import on a Ray worker: Mod"
        ):
            await execution_of(plan, [only_here_tools.here], ray_runner).run()
    finally:
        sys.modules.pop("only_here_tools", None)


def execution_of(plan: dict[str, Any], registry: list[Any], runner: Any) -> Any:
    from planrail.engine.executor import Execution
    from planrail.plan.validate import validate

    return Execution(
        validate(plan, registry).raise_for_errors(), registry, tool_runner=runner, approve=True
    )


@pytest.mark.parametrize("tool", ["block_then_clean", "ablock_then_clean"])
async def test_a_cancelled_task_sees_one_interrupt_and_its_clean_up_finishes(
    tool: str, ray_runner: Any, ledger: Ledger
) -> None:
    """A task's graceful cancel is sent again every half second until the call ends (Ray drops
    one that reaches the worker while it starts the task); the tool sees only the first — a
    KeyboardInterrupt in a sync call, a CancelledError in an async one placed as a task — so a
    clean-up three times as long runs to its end, and nothing is forced."""
    at = str(ledger)
    plan = {"steps": [{"id": "slow", "tool": tool, "args": {"ledger": at, "step": "s"}}]}
    ex = execution(plan, ray_runner)
    task = asyncio.ensure_future(ex.run())
    await ledger.wait_started()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert ex.result().steps["slow"].status == S.CANCELLED
    assert [e["ev"] for e in ledger.entries()] == ["start", "cleaning", "cleaned"]


async def test_compute_places_calls_on_ray(ray_runner: Any, ledger: Ledger) -> None:
    """A call declaring two CPUs holds both CPUs of the test runtime: two such calls never
    overlap (the second starts after the first ended)."""
    at = str(ledger)
    plan = {
        "steps": [
            {"id": f"w{i}", "tool": "wide", "args": {"ledger": at, "step": f"w{i}"}}
            for i in range(2)
        ]
    }
    result = await execution(plan, ray_runner).run()
    assert result.status == "succeeded"
    order = ledger.order()
    assert order[0][1] == order[1][1]  # the first call ended before the second started
    assert [ev for ev, _ in order] == ["start", "end", "start", "end"]


async def test_a_kept_output_is_recorded_as_a_digest_and_cannot_outlive_its_runner(
    ray_runner: Any, ledger: Ledger, tmp_path: Path
) -> None:
    """The checkpoint of a ``remote_output`` step holds its digest (of the canonical JSON),
    size and a preview — not the data. A resume in another runner restores the step, but the
    object died with the runner that held it: the consumer fails, saying so (never a None)."""
    import hashlib
    import json

    from planrail.backends.ray import RayRunner

    from .test_contract import _kept_plan

    unlock = tmp_path / "unlock"
    at = str(ledger)
    gate = {"id": "g", "tool": "gate", "args": {"ledger": at, "step": "g", "unlock": str(unlock)}}
    plan = _kept_plan(ledger, 500, also=["g"], steps=[gate])
    store = SQLiteStore(tmp_path / "runs.db")
    later = RayRunner(actors=1)
    try:
        first = await run(plan, ray_runner, store=store, run_id="run_kept")
        stored = store.get_steps("run_kept")["big"].output
        unlock.touch()
        second = await run(plan, later, store=store, run_id="run_kept")
    finally:
        await later.aclose()
        store.close()
    text = json.dumps(list(range(500)), separators=(",", ":"))
    assert first.steps["sum"].status == S.SKIPPED
    assert stored["digest"] == "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    assert stored["bytes"] == len(text)
    assert text.startswith(stored["preview"])
    assert len(stored["preview"]) < len(text)
    assert second.steps["big"].status == S.SUCCEEDED  # restored, not run again
    assert len(ledger.calls("big")) == 1
    assert second.steps["sum"].status == S.FAILED
    assert "it is gone" in (second.steps["sum"].reason or second.steps["sum"].error["message"])


@pytest.mark.parametrize(("tool", "status"), [("pay_unsafe", S.IN_DOUBT), ("pay_keyed", S.FAILED)])
async def test_a_crash_of_a_step_with_no_policy(
    tool: str, status: StepStatus, ray_runner: Any, ledger: Ledger
) -> None:
    """On the plain path (no retry policy, no fallback): an unsafe tool's crash is ``in_doubt``;
    a keyed tool's crash fails the step, marked retryable (a resume runs it with its key)."""
    at = str(ledger)
    plan = {"steps": [{"id": "pay", "tool": tool, "args": {"ledger": at, "step": "pay"}}]}
    result = await run(plan, ray_runner)
    pay = result.steps["pay"]
    assert pay.status == status
    assert pay.error is not None
    assert pay.error["type"] == "CallCrashedError"
    assert pay.error["retryable"] is (status == S.FAILED)
    assert len(ledger.entries("effect")) == len(ledger.calls("pay")) == 1
