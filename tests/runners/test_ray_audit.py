"""Audit of the Ray door (``RayRunner``, ``--backend ray``): what the run path guarantees on the
local runner holds when the calls run on Ray.

Every test goes through the one run path (``planrail.runs.prepare`` / ``resume``) with the
session's ``runner`` fixture (the local runner, then the session's ``RayRunner`` on the one
shared local Ray runtime), and checks what the tools wrote to their own ledger and what the
store holds: fan-out items committed as they finish and not called again on resume, a
``repeat`` loop resumed after its last finished iteration, ``max_concurrency``, a call cut by
a cancellation recorded as the local runner records it, and the idempotency key each call
receives (the step's, a fallback's ``RUN:STEP:fallback``, an item's ``RUN:STEP:i``).

The tools are those of the contract suite (``runners.tools``, with their keyed and unsafe
variants) and, for what only this audit calls, defined here; all at module level, so that Ray
workers import them by path (``runners.test_ray_audit``; the tests folder is on the workers'
``sys.path``). A blocking tool tells the test it has begun through the ledger's ``started``
FIFO and waits on its ``release`` FIFO: no test sleeps or measures time, except that the one
waiting for a call that must not begin bounds that wait.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import planrail
from planrail import StepContext
from planrail.engine import operations
from planrail.engine.runners import still_running
from planrail.runs import prepare, resume
from planrail.store import SQLiteStore, Store
from planrail.types import StepStatus

from . import tools
from .ledger import Ledger, record
from .tools import await_released, stop_recorded, wait_released

S = StepStatus
NO_WAIT = {"initial_delay": 0, "jitter": 0}


# ------------------------------------------------------------------ tools (module level: Ray)


class Done(BaseModel):
    n: int


def _note(ledger: str, step: str, ctx: StepContext, **seen: Any) -> None:
    record(
        ledger,
        ev="start",
        step=step,
        key=ctx.idempotency_key,
        attempt=ctx.attempt,
        item=ctx.item,
        **seen,
    )


@planrail.tool(side_effects="keyed")
def charge(ctx: StepContext, ledger: str, step: str, x: int = 0, fail: bool = False) -> int:
    """Sync, honours its key: record the call, then fail for good or return ``10 * x``."""
    _note(ledger, step, ctx, x=x)
    if fail:
        raise ValueError(f"{step} failed for good")
    return 10 * x


@planrail.tool(side_effects="keyed")
async def acharge(ctx: StepContext, ledger: str, step: str, x: int = 0, fail: bool = False) -> int:
    """:func:`charge`, async (an actor call on Ray)."""
    _note(ledger, step, ctx, x=x)
    await asyncio.sleep(0)
    if fail:
        raise ValueError(f"{step} failed for good")
    return 10 * x


@planrail.tool(side_effects="keyed")
def item_or_wait(ctx: StepContext, ledger: str, step: str, x: int, wait_at: int) -> int:
    """One item of a fan-out (keyed, sync): item ``wait_at`` waits until the test lets go (or
    until Ray's graceful cancel: recorded)."""
    with stop_recorded(ledger, step):
        _note(ledger, step, ctx, x=x)
        if x == wait_at:
            wait_released(ledger)
    record(ledger, ev="end", step=step)
    return 10 * x


@planrail.tool(side_effects="keyed")
async def aitem_or_wait(ctx: StepContext, ledger: str, step: str, x: int, wait_at: int) -> int:
    """:func:`item_or_wait`, async."""
    _note(ledger, step, ctx, x=x)
    if x == wait_at:
        await await_released(ledger, step)
    record(ledger, ev="end", step=step)
    return 10 * x


@planrail.tool(side_effects="keyed")
def poll(ctx: StepContext, ledger: str, step: str, wait_at: int) -> Done:
    """One iteration of a ``repeat`` loop (keyed, sync): its number is one more than the
    iterations before it; iteration ``wait_at`` waits until the test lets go."""
    n = len(ctx.history) + 1
    with stop_recorded(ledger, step):
        _note(ledger, step, ctx, n=n, seen=[h["output"] for h in ctx.history])
        if n == wait_at:
            wait_released(ledger)
    return Done(n=n)


@planrail.tool(side_effects="keyed")
async def apoll(ctx: StepContext, ledger: str, step: str, wait_at: int) -> Done:
    """:func:`poll`, async."""
    n = len(ctx.history) + 1
    _note(ledger, step, ctx, n=n, seen=[h["output"] for h in ctx.history])
    if n == wait_at:
        await await_released(ledger, step)
    return Done(n=n)


@planrail.tool(side_effects="none")
async def agated(ctx: StepContext, ledger: str, step: str, x: int = 0) -> int:
    """Async: record the start, tell the test, wait until it lets go, record the end."""
    _note(ledger, step, ctx, x=x)
    await await_released(ledger, step)
    record(ledger, ev="end", step=step)
    return x


@planrail.tool(side_effects="none")
def gated(ctx: StepContext, ledger: str, step: str, x: int = 0) -> int:
    """:func:`agated`, sync (a Ray task)."""
    _note(ledger, step, ctx, x=x)
    wait_released(ledger)
    record(ledger, ev="end", step=step)
    return x


TOOLS = [
    charge,
    acharge,
    item_or_wait,
    aitem_or_wait,
    poll,
    apoll,
    agated,
    gated,
    tools.numbers,  # the list a fan-out goes over
    tools.backup_keyed,  # a keyed fallback
    tools.flaky_keyed,
    tools.block_keyed,
    tools.block_unsafe,
    tools.ablock_keyed,
    tools.ablock_unsafe,
]


# ------------------------------------------------------------------ helpers


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    found = SQLiteStore(tmp_path / "runs.db")
    yield found
    found.close()


@pytest.fixture(scope="module")
def _warm_ray(ray_runner: Any, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Once per module: the session's Ray workers import these tools and its async actor pool
    is up (a runner starts its pool for the first plan with an async tool), so that no test
    here counts that start-up as its own."""
    at = str(tmp_path_factory.mktemp("warm") / "ledger.jsonl")
    steps = [
        {"id": "s", "tool": "charge", "args": {"ledger": at, "step": "s"}},
        {"id": "a", "tool": "acharge", "args": {"ledger": at, "step": "a"}},
    ]
    result = asyncio.run(
        prepare({"steps": steps}, TOOLS, approve=True, tool_runner=ray_runner).run()
    )
    assert result.status == "succeeded", result.why


@pytest.fixture
def runner(runner: Any, request: pytest.FixtureRequest) -> Any:
    """The contract suite's ``runner`` (local, then Ray), the Ray one warmed for these tools."""
    if runner is not None:
        request.getfixturevalue("_warm_ray")
    return runner


def _start(plan: dict[str, Any], runner: Any, store: Store, run_id: str, **options: Any) -> Any:
    """The execution of ``plan`` through the run path, on ``runner`` (None: the local one)."""
    return prepare(
        plan, TOOLS, store=store, run_id=run_id, approve=True, tool_runner=runner, **options
    )


async def _cancelled(task: asyncio.Future[Any]) -> None:
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def _returned(key: str) -> None:
    """Until the calls made with ``key`` that this process abandoned have returned: a local
    sync call cut by a cancellation runs on in its thread (until the test lets go), and a
    resume here does not call its key again while it does (``CallStillRunningError``). On
    Ray nothing is abandoned: there is none to wait for."""
    await asyncio.gather(*map(asyncio.wrap_future, still_running(key)))


def _calls(ledger: Ledger, step: str) -> list[dict[str, Any]]:
    return [e for e in ledger.entries("start") if e["step"] == step]


def _in_flight_most(ledger: Ledger, steps: set[str]) -> int:
    """The most calls of ``steps`` begun and not ended at once, from the ledger's order."""
    running = most = 0
    for entry in ledger.entries():
        if entry["step"] not in steps or entry["ev"] not in ("start", "end"):
            continue
        running += 1 if entry["ev"] == "start" else -1
        most = max(most, running)
    return most


# ------------------------------------------------------------------ fan-out


@pytest.mark.parametrize("tool", ["item_or_wait", "aitem_or_wait"])
async def test_fan_out_items_are_committed_as_they_finish_and_not_called_again_on_resume(
    tool: str, runner: Any, ledger: Ledger, store: Store
) -> None:
    """Items 0 and 1 of a four-item fan-out (one at a time) finish; item 2's call is under way
    when the run is cancelled. The store held items 0 and 1 while item 2 ran; the resume calls
    items 2 and 3 only, each with its own key ``RUN:fan:i``, and the output keeps item order."""
    at = str(ledger)
    plan = {
        "steps": [
            {"id": "seed", "tool": "numbers", "args": {"ledger": at, "step": "seed", "n": 4}},
            {
                "id": "fan",
                "tool": tool,
                "for_each": "${seed}",
                "max_parallel": 1,
                "args": {"ledger": at, "step": "fan", "x": "${item}", "wait_at": 2},
                "depends_on": ["seed"],
            },
        ]
    }
    first = _start(plan, runner, store, "fan_run")
    task = asyncio.ensure_future(first.run())
    await ledger.wait_started()  # item 2 is under way
    midway = store.get_steps("fan_run")["fan"]
    await _cancelled(task)
    ledger.let_go()
    await _returned("fan_run:fan:2")
    cut = store.get_steps("fan_run")["fan"]

    again = await resume("fan_run", TOOLS, store=store, tool_runner=runner).run()

    assert (midway.status, sorted(midway.metadata["items"])) == (S.RUNNING, ["0", "1"])
    assert cut.status == S.CANCELLED
    assert sorted(cut.metadata["items"]) == ["0", "1"]
    assert again.status == "succeeded", again.why
    assert again.steps["fan"].output == [0, 10, 20, 30]
    calls = [(c["x"], c["key"]) for c in _calls(ledger, "fan")]
    assert calls == [(i, f"fan_run:fan:{i}") for i in (0, 1, 2, 2, 3)]
    assert len(_calls(ledger, "seed")) == 1


# ------------------------------------------------------------------ loops


@pytest.mark.parametrize("tool", ["poll", "apoll"])
async def test_a_loop_resumes_after_its_last_finished_iteration(
    tool: str, runner: Any, ledger: Ledger, store: Store
) -> None:
    """Iterations 1 and 2 finish and are committed; the run is cancelled inside iteration 3.
    The resume calls iteration 3 again (same key ``RUN:loop``: the tool honours keys) with
    the history of 1 and 2, then 4, where ``until`` holds; 1 and 2 are never called again."""
    at = str(ledger)
    plan = {
        "steps": [
            {
                "id": "loop",
                "tool": tool,
                "args": {"ledger": at, "step": "loop", "wait_at": 3},
                "repeat": {"until": {"ge": ["${self.n}", 4]}, "max_iterations": 6},
            }
        ]
    }
    first = _start(plan, runner, store, "loop_run")
    task = asyncio.ensure_future(first.run())
    await ledger.wait_started()  # iteration 3 is under way
    midway = store.get_steps("loop_run")["loop"]
    await _cancelled(task)
    ledger.let_go()
    await _returned("loop_run:loop")

    again = await resume("loop_run", TOOLS, store=store, tool_runner=runner).run()

    kept = midway.metadata["iterations"][""]
    assert [(e["iteration"], e["output"]) for e in kept] == [(1, {"n": 1}), (2, {"n": 2})]
    assert again.status == "succeeded", again.why
    assert again.steps["loop"].output == {"n": 4}
    calls = _calls(ledger, "loop")
    assert [c["n"] for c in calls] == [1, 2, 3, 3, 4]
    assert {c["key"] for c in calls} == {"loop_run:loop"}
    assert calls[3]["seen"] == [{"n": 1}, {"n": 2}], "the resumed loop kept its history"


# ------------------------------------------------------------------ max_concurrency


@pytest.mark.parametrize("tool", ["gated", "agated"])
async def test_max_concurrency_through_the_run_path_is_reached_and_never_exceeded(
    tool: str, runner: Any, ledger: Ledger, store: Store
) -> None:
    """Five independent steps under ``max_concurrency=2``: two calls begin and hold; only once
    the test lets go do the others run — never more than two at once, each step once."""
    at = str(ledger)
    steps = [
        {"id": f"s{i}", "tool": tool, "args": {"ledger": at, "step": f"s{i}", "x": i}}
        for i in range(5)
    ]
    execution = _start({"steps": steps}, runner, store, "cap_run", max_concurrency=2)
    task = asyncio.ensure_future(execution.run())
    await ledger.wait_started()
    await ledger.wait_started()  # the limit is reached
    ledger.let_go()
    result = await task
    assert result.status == "succeeded", result.why
    names = {f"s{i}" for i in range(5)}
    assert _in_flight_most(ledger, names) == 2
    assert sorted(c["step"] for c in ledger.entries("start")) == sorted(names)


@pytest.mark.ray
async def test_the_ray_runners_max_concurrency_bounds_the_async_calls_over_its_pool(
    ray_runtime: Any, ledger: Ledger
) -> None:
    """``RayRunner(max_concurrency=3)`` (what ``--backend ray --max-concurrency 3`` builds):
    at most three async calls in flight over the actor pool. A fan-out of four waiting items
    (``max_parallel`` 4) has three begun; a fourth must not begin before one ends."""
    from planrail.backends.ray import RayRunner

    at = str(ledger)
    plan = {
        "steps": [
            {"id": "seed", "tool": "numbers", "args": {"ledger": at, "step": "seed", "n": 4}},
            {
                "id": "fan",
                "tool": "agated",
                "for_each": "${seed}",
                "max_parallel": 4,
                "args": {"ledger": at, "step": "fan", "x": "${item}"},
                "depends_on": ["seed"],
            },
        ]
    }
    narrow = RayRunner(max_concurrency=3, actors=2)
    try:
        execution = prepare(plan, TOOLS, approve=True, tool_runner=narrow)
        task = asyncio.ensure_future(execution.run())
        for _ in range(3):
            await ledger.wait_started()
        fourth = asyncio.ensure_future(ledger.wait_started())
        # Bounded only so that a runner that keeps its limit ends the test: the fourth start,
        # if it comes, comes at once (it waits for nothing but a free slot). No event can stand
        # for "it cannot come any more": Ray holds the fourth call at its actor (each actor's
        # share of max_concurrency) and says nothing of it, and once one of the three ends its
        # start is allowed. The bound can only let a broken runner pass, never fail a good one.
        began, _ = await asyncio.wait({fourth}, timeout=0.5)
        fourth.cancel()
        ledger.let_go()
        result = await task
    finally:
        await narrow.aclose()
    assert result.status == "succeeded", result.why
    assert not began, "a fourth async call began while three were in flight"
    assert _in_flight_most(ledger, {"fan"}) == 3


# ------------------------------------------------------------------ cancellation mid-call


def _hang_plan(ledger: Ledger, tool: str) -> dict[str, Any]:
    at = str(ledger)
    return {
        "steps": [
            {"id": "first", "tool": "charge", "args": {"ledger": at, "step": "first", "x": 1}},
            {
                "id": "hang",
                "tool": tool,
                "args": {"ledger": at, "step": "hang"},
                "depends_on": ["first"],
            },
            {
                "id": "never",
                "tool": "charge",
                "args": {"ledger": at, "step": "never"},
                "depends_on": ["hang"],
            },
        ]
    }


CUT = [
    ("block_keyed", S.CANCELLED),
    ("ablock_keyed", S.CANCELLED),
    ("block_unsafe", S.IN_DOUBT),
    ("ablock_unsafe", S.IN_DOUBT),
]
"""A call under way when its run is cancelled: a keyed tool's step is ``cancelled`` (a resume
calls it again with its key), an unsafe one's ``in_doubt`` — the same on every runner."""


@pytest.mark.parametrize(("tool", "status"), CUT)
async def test_a_call_cut_by_a_cancelled_run_is_recorded_as_on_the_local_runner(
    tool: str, status: StepStatus, runner: Any, ledger: Ledger, store: Store
) -> None:
    """The run (its task) is cancelled while ``hang``'s call is under way: the store records
    ``hang`` as the local runner records it, the run ``cancelled``, ``never`` not called; the
    call itself was stopped (a local sync call excepted: its thread cannot be, it is
    abandoned)."""
    execution = _start(_hang_plan(ledger, tool), runner, store, "cut_run")
    task = asyncio.ensure_future(execution.run())
    await ledger.wait_started()
    await _cancelled(task)
    ledger.let_go()
    run = store.get_run("cut_run")
    steps = store.get_steps("cut_run")
    assert run is not None
    assert run.status == "cancelled"
    assert steps["first"].status == S.SUCCEEDED
    assert steps["hang"].status == status, steps["hang"].reason
    assert "while its call was under way" in (steps["hang"].reason or "")
    assert "never" not in steps or steps["never"].status in (S.CANCELLED, S.SKIPPED)
    assert _calls(ledger, "never") == []
    assert [c["key"] for c in _calls(ledger, "hang")] == ["cut_run:hang"]
    abandoned = runner is None and not tool.startswith("a")
    assert len(ledger.entries("stopped")) == (0 if abandoned else 1)


@pytest.mark.parametrize(("tool", "status"), [CUT[1], CUT[3]])
async def test_an_operators_cancel_mid_call_then_a_resume_as_on_the_local_runner(
    tool: str, status: StepStatus, runner: Any, ledger: Ledger, store: Store, tmp_path: Path
) -> None:
    """``planrail cancel`` (``operations.cancel`` on another store object, as another process
    would) while ``hang``'s async call is under way: the runner stops it; ``hang`` is recorded
    ``cancelled`` (keyed) or ``in_doubt`` (unsafe). A resume calls a keyed ``hang`` again with
    the same key and never calls an unsafe one again; ``first`` is never called twice."""
    execution = _start(_hang_plan(ledger, tool), runner, store, "op_run")
    execution.watch_interval = 0.02  # how often the runner reads operator requests
    task = asyncio.ensure_future(execution.run())
    await ledger.wait_started()
    other = SQLiteStore(tmp_path / "runs.db")
    try:
        assert operations.cancel(other, "op_run", by="alice") == "requested"
    finally:
        other.close()
    first = await task
    ledger.let_go()

    again = await resume("op_run", TOOLS, store=store, tool_runner=runner).run()

    assert first.status == "cancelled"
    assert first.steps["hang"].status == status
    assert len(ledger.entries("stopped")) == 1, "the call was stopped"
    assert len(_calls(ledger, "first")) == 1
    keys = [c["key"] for c in _calls(ledger, "hang")]
    if status == S.CANCELLED:
        assert again.status == "succeeded", again.why
        assert keys == ["op_run:hang", "op_run:hang"]
        assert [c["key"] for c in _calls(ledger, "never")] == ["op_run:never"]
    else:
        assert again.steps["hang"].status == S.IN_DOUBT
        assert keys == ["op_run:hang"], "an unsafe call in doubt is not made again"
        assert _calls(ledger, "never") == []


# ------------------------------------------------------------------ idempotency keys


def _keys_plan(ledger: Ledger) -> dict[str, Any]:
    at = str(ledger)

    def fb(step: str) -> dict[str, Any]:
        return {"tool": "backup_keyed", "args": {"ledger": at, "step": step, "value": -1}}

    return {
        "steps": [
            {"id": "k", "tool": "charge", "args": {"ledger": at, "step": "k", "x": 1}},
            {"id": "ak", "tool": "acharge", "args": {"ledger": at, "step": "ak", "x": 2}},
            {
                "id": "retried",
                "tool": "flaky_keyed",
                "args": {"ledger": at, "step": "retried", "failures": 1},
                "retry": {"max_attempts": 2, **NO_WAIT},
            },
            {
                "id": "fb",
                "tool": "charge",
                "args": {"ledger": at, "step": "fb", "fail": True},
                "fallback": fb("fb_fallback"),
            },
            {
                "id": "afb",
                "tool": "acharge",
                "args": {"ledger": at, "step": "afb", "fail": True},
                "fallback": fb("afb_fallback"),
            },
            {"id": "seed", "tool": "numbers", "args": {"ledger": at, "step": "seed", "n": 3}},
            {
                "id": "fan",
                "tool": "acharge",
                "for_each": "${seed}",
                "args": {"ledger": at, "step": "fan", "x": "${item}"},
                "depends_on": ["seed"],
            },
            {
                "id": "fanfb",
                "tool": "charge",
                "for_each": "${seed}",
                "args": {"ledger": at, "step": "fanfb", "x": "${item}", "fail": True},
                "fallback": fb("fanfb_fallback"),
                "depends_on": ["seed"],
            },
        ]
    }


EXPECTED_KEYS = {
    "k": ["R:k"],
    "ak": ["R:ak"],
    "retried": ["R:retried", "R:retried"],
    "fb": ["R:fb"],
    "fb_fallback": ["R:fb:fallback"],
    "afb": ["R:afb"],
    "afb_fallback": ["R:afb:fallback"],
    "seed": ["R:seed"],
    "fan": ["R:fan:0", "R:fan:1", "R:fan:2"],
    "fanfb": ["R:fanfb:0", "R:fanfb:1", "R:fanfb:2"],
    "fanfb_fallback": ["R:fanfb:0:fallback", "R:fanfb:1:fallback", "R:fanfb:2:fallback"],
}
"""The key each call receives (``StepContext.idempotency_key``) in run ``R``: what the local
runner gives; Ray must give the same."""


async def test_every_call_receives_the_key_the_local_runner_gives(
    runner: Any, ledger: Ledger, store: Store
) -> None:
    """A keyed step (sync and async), its retry, a fallback tool (``RUN:STEP:fallback``), a
    fan-out's items (``RUN:STEP:i``) and their fallbacks (``RUN:STEP:i:fallback``): each call
    receives exactly the key the local runner gives, and the store's intents name the same
    keys for the keyed calls."""
    result = await _start(_keys_plan(ledger), runner, store, "R").run()
    assert result.status == "succeeded", result.why
    seen: dict[str, list[str]] = {}
    for call in ledger.entries("start"):
        seen.setdefault(call["step"], []).append(call["key"])
    assert {step: sorted(keys) for step, keys in seen.items()} == EXPECTED_KEYS
    items = sorted((c["item"], c["key"]) for c in _calls(ledger, "fan"))
    assert items == [(i, f"R:fan:{i}") for i in range(3)]
    assert result.steps["fb"].output == result.steps["afb"].output == -1
    assert result.steps["fan"].output == [0, 10, 20]
    assert result.steps["fanfb"].output == [-1, -1, -1]
    intents = {i.step_key: i.idempotency_key for i in store.intents("R")}
    keyed = {k for step, keys in EXPECTED_KEYS.items() if step != "seed" for k in keys}
    assert set(intents.values()) == keyed
    assert intents["fb:fallback"] == "R:fb:fallback"
    assert intents["fanfb:1:fallback"] == "R:fanfb:1:fallback"
    assert intents["fan:2"] == "R:fan:2"
