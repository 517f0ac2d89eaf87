"""An audit of the streamed door (``Agent(stream=True)``, the default of ``planrail plan``) for
cases its own tests leave out: an interruption while the plan still streams, plans using
fan-out, loops, branches, stages, fallbacks, ``llm_call`` steps and ``output``, MCP
``resume_run`` of a streamed run waiting for approval, a budget spent while planning, and a
repair that rewrites an early step.

Each case is judged from what the tools saw (the call ledger of ``streamed_door_tools``) and
what the store holds. The model's stream is held after an early read-only step (a hold that
waits for the tool's call, never for time), so the run has provably started before its plan
is whole. Several cases found bugs, fixed with them (their docstrings say what happened).
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

import planrail
from interrupting import lines_until, watched
from planrail.agent import Agent, AgentResult, approve_all
from planrail.clock import SYSTEM_CLOCK
from planrail.engine import operations
from planrail.engine.owners import this_owner
from planrail.errors import PlanrailError, StoreError
from planrail.llm import Budget
from planrail.store import Store, open_store
from planrail.testing.llm import Scripted, ScriptedLLM
from planrail.testing.llm_server import LLMTestServer, Reply

from . import streamed_door_tools as T

PLANRAIL = str(Path(sys.executable).with_name("planrail"))
TOOLS_FILE = str(Path(T.__file__).resolve())
WAIT = 10.0
"""Safety bound (seconds) for a hold waiting for a tool's call; never reached when the code
is right (a wrong run fails an assertion instead of hanging)."""

Hold = Callable[[int, str], Awaitable[None]]


@pytest.fixture(autouse=True)
def _fresh_tools() -> Iterator[None]:
    T.reset()
    yield
    T.reset()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = open_store(f"sqlite:///{tmp_path / 'runs.db'}")
    try:
        yield opened
    finally:
        opened.close()


def _chunks(plan: dict[str, Any], before: str) -> tuple[str, list[str]]:
    """The plan's JSON text, in two chunks: up to the step ``before`` (excluded), the rest."""
    text = json.dumps(plan)
    cut = text.index(json.dumps({"id": before})[:-1]) - 2  # the "{" of that step, and ", "
    assert text[cut : cut + 2] == ", "
    return text, [text[: cut + 2], text[cut + 2 :]]


def _held_until(tool: str) -> Hold:
    """Deliver the second chunk once ``tool`` has been called (the run started meanwhile)."""

    async def hold(index: int, _chunk: str) -> None:
        if index == 1:
            assert await asyncio.to_thread(T.called(tool).wait, WAIT), f"{tool} never called"

    return hold


def _streamed(plan: dict[str, Any], before: str, tool: str, *more: Any) -> ScriptedLLM:
    """A model streaming ``plan`` in two chunks, the second held until ``tool`` is called."""
    text, chunks = _chunks(plan, before)
    return ScriptedLLM([Scripted(text, chunks=chunks), *more], on_chunk=_held_until(tool))


def _names(calls: list[tuple[str, Any]] | list[list[Any]]) -> list[str]:
    return [call[0] for call in calls]


def _early(result: AgentResult) -> list[str]:
    return [e.step_id for e in result.trace if e.type == "step_dispatched_early"]


FIND: dict[str, Any] = {"id": "find", "tool": "lookup", "args": {"query": "x"}}
"""The read-only first step of every plan here: it starts while the plan streams."""
ABOUT_EACH: dict[str, Any] = {
    "id": "about",
    "tool": "describe",
    "args": {"name": "${item}"},
    "for_each": "${find.names}",
    "depends_on": ["find"],
}
"""A read-only fan-out over what ``find`` found."""
ABOUT_TOP: dict[str, Any] = {
    "id": "about",
    "tool": "describe",
    "args": {"name": "${find.top}"},
    "depends_on": ["find"],
}
MAKE: dict[str, Any] = {
    "id": "make",
    "tool": "create",
    "args": {"name": "${find.top}"},
    "depends_on": ["find"],
}


CREATE_X: dict[str, Any] = {
    "goal": "Create an account for x",
    "steps": [
        FIND,
        MAKE,
        {
            "id": "tell",
            "tool": "notify",
            "args": {"user_id": "${make.user_id}", "text": "welcome"},
            "depends_on": ["make"],
        },
    ],
    "output": "${make.user_id}",
}
"""read-only ``find`` (starts early), then ``make`` (keyed) and ``tell`` (unsafe)."""


def _with_first_tool(plan: dict[str, Any], tool: str) -> dict[str, Any]:
    changed = copy.deepcopy(plan)
    changed["steps"][0]["tool"] = tool
    return changed


async def _plans_afresh(store: Store) -> None:
    """Run ``R`` left nothing behind: the same run id plans (and runs) ``CREATE_X`` anew."""
    again = await Agent(
        ScriptedLLM([json.dumps(CREATE_X)]),
        T.TOOLS,
        approval=approve_all,
        store=store,
        stream=True,
        run_id="R",
    ).run(CREATE_X["goal"])
    assert again.status == "succeeded", again.reason


# ---------------------------------------------------------------- 1. Ctrl-C / cancellation


@pytest.mark.parametrize(
    ("tool", "seen"),
    [("lookup", "find succeeded"), ("stall", "find running")],
    ids=["early-step-finished", "early-step-running"],
)
def test_ctrl_c_while_the_plan_streams_exits_130_and_leaves_no_record(
    tmp_path: Path, tool: str, seen: str
) -> None:
    """``planrail plan`` (a real subprocess, the real SDK): the model's stream is held after
    the read-only ``find`` step, which has finished (or still runs); SIGINT then. The command
    exits 130 without a traceback, no world-changing tool was called, and the store holds
    nothing of the run: no record, no lease."""
    plan = _with_first_tool(CREATE_X, tool)
    text, chunks = _chunks(plan, "make")
    release = threading.Event()

    def hold(index: int) -> None:
        if index == 1:  # the rest of the plan never comes while the command lives
            release.wait(60)

    db, ledger = tmp_path / "runs.db", tmp_path / "ledger.jsonl"
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONIOENCODING="utf-8")
    env[T.LEDGER_ENV] = str(ledger)
    with LLMTestServer([Reply(text, chunks=chunks, before_chunk=hold)]) as server:
        args = [PLANRAIL, "plan", plan["goal"], "--tools", TOOLS_FILE, "--yes"]
        args += ["--model", "openai:test-model", "--base-url", server.url]
        args += ["--store", f"sqlite:///{db}", "--run-id", "R"]
        with watched(args, env=env) as proc:
            try:
                lines = lines_until(proc, seen, "find started")
                proc.send_signal(signal.SIGINT)
                rest, _ = proc.communicate(timeout=60)
            finally:
                release.set()  # a stream still held lets the server go
    output = "".join(lines) + rest
    assert proc.returncode == 130, output
    assert "Traceback" not in output
    assert "interrupted" in output
    assert _names(T.ledger(ledger)) in ([tool], []), "only the read-only step was called"
    after = open_store(f"sqlite:///{db}")
    try:
        assert after.get_run("R") is None, "a half record a resume would mis-run"
        assert after.get_lease("R") is None
    finally:
        after.close()


@pytest.mark.parametrize("tool", ["lookup", "stall"], ids=["finished", "running"])
async def test_cancelling_agent_run_while_the_plan_streams_leaves_no_record(
    store: Store, tool: str
) -> None:
    """``Agent.run`` cancelled while its stream is held after the early step: the
    cancellation propagates, the early step is stopped (if it still ran), nothing that changes
    the world was called, and the store holds no record and no lease — so there is nothing to
    resume, and the same run id plans afresh at once."""
    plan = _with_first_tool(CREATE_X, tool)
    text, chunks = _chunks(plan, "make")
    never = asyncio.Event()

    async def hold(index: int, _chunk: str) -> None:
        if index == 1:
            await never.wait()

    llm = ScriptedLLM([Scripted(text, chunks=chunks)], on_chunk=hold)
    agent = Agent(llm, T.TOOLS, approval=approve_all, store=store, stream=True, run_id="R")
    task = asyncio.create_task(agent.run(plan["goal"]))
    assert await asyncio.to_thread(T.called(tool).wait, WAIT)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert _names(T.CALLS) == [tool]
    assert store.get_run("R") is None
    assert store.get_lease("R") is None
    with pytest.raises(StoreError, match="no run 'R'"):
        planrail.resume("R", T.TOOLS, store=store)
    await _plans_afresh(store)
    assert _names(T.CALLS) == [tool, "lookup", "create", "notify"]


async def _cancel_at_approval(store: Store, *, stream: bool) -> None:
    """Run CREATE_X (streamed or not) with an approver that never answers; cancel the run
    once it is asked."""
    asked = asyncio.Event()

    async def approver(_request: Any) -> bool:
        asked.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")  # pragma: no cover

    llm = _streamed(CREATE_X, "make", "lookup") if stream else ScriptedLLM([json.dumps(CREATE_X)])
    agent = Agent(llm, T.TOOLS, approval=approver, store=store, stream=stream, run_id="R")
    task = asyncio.create_task(agent.run(CREATE_X["goal"]))
    await asyncio.wait_for(asked.wait(), WAIT)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert "create" not in _names(T.CALLS)
    assert "notify" not in _names(T.CALLS)


async def test_cancelling_a_streamed_run_at_its_approval_leaves_no_record(store: Store) -> None:
    """Cancelled while the whole plan waits for its approver: nothing that changes the world
    ran, and nothing of the run is left in the store (no record, no lease)."""
    await _cancel_at_approval(store, stream=True)
    assert _names(T.CALLS) == ["lookup"]
    assert store.get_run("R") is None
    assert store.get_lease("R") is None


async def test_cancelling_an_unstreamed_run_at_its_approval_leaves_it_final(store: Store) -> None:
    """The same cancellation with ``stream=False``: the run's record (made before its approval
    is asked) should end ``cancelled`` with its lease released, as any cancelled run does."""
    await _cancel_at_approval(store, stream=False)
    record = store.get_run("R")
    assert record is None or record.status in ("cancelled", "awaiting_approval")
    assert store.get_lease("R") is None


# ---------------------------------------------------------------- 2. every kind of step

EVERY_KIND: dict[str, Any] = {
    "goal": "Find x, describe everyone, count, charge and create x, then tell them",
    "steps": [
        FIND,
        ABOUT_EACH,
        {
            "id": "never",
            "tool": "describe",
            "args": {"name": "${find.top}"},
            "when": {"eq": ["${find.top}", "nobody"]},
            "depends_on": ["find"],
        },
        {
            "id": "count",
            "tool": "bump",
            "args": {"name": "n"},
            "repeat": {"until": {"ge": ["${self.n}", 2]}, "max_iterations": 3},
        },
        {
            "id": "is_a",
            "action": "condition_check",
            "condition": {"eq": ["${find.top}", "x-a"]},
            "depends_on": ["find"],
        },
        {
            "id": "yes",
            "tool": "describe",
            "args": {"name": "${find.top}"},
            "when": "${is_a}",
            "depends_on": ["is_a"],
        },
        {
            "id": "pay",
            "tool": "charge",
            "args": {"name": "${find.top}"},
            "fallback": {"value": "not charged"},
            "depends_on": ["find"],
        },
        MAKE,
        {
            "id": "summary",
            "action": "llm_call",
            "prompt": "Summarise ${about} and ${yes}",
            "depends_on": ["about", "yes"],
        },
        {
            "id": "tell",
            "tool": "notify",
            "args": {"user_id": "${make.user_id}", "text": "${summary} / ${pay}"},
            "depends_on": ["make", "summary", "pay"],
        },
    ],
    "stages": [
        {"id": "research", "goal": "Know who x is", "steps": ["find", "about", "never", "is_a"]},
        {
            "id": "act",
            "goal": "Charge, create and tell x",
            "steps": ["count", "yes", "pay", "make", "summary", "tell"],
        },
    ],
    "output": {
        "who": "${make.user_id}",
        "paid": "${pay}",
        "loops": "${count.n}",
        "sent": "${tell}",
    },
}
"""Fan-out (read-only, early), a guard that is false (early, skipped), a loop, a condition
and the branch it guards, a fallback value, an ``llm_call``, stages and an ``output``."""


async def _every_kind(store: Store, *, stream: bool) -> dict[str, Any]:
    """Run EVERY_KIND with ``create`` failing, then resume it with ``create`` fixed; what each
    part saw and what the store holds."""
    T.reset()
    T.FAILING.add("x-a")  # make fails (for good: no retry); pay's card is declined
    llm = _streamed(EVERY_KIND, "count", "describe", "A summary.")
    agent = Agent(llm, T.TOOLS, approval=approve_all, store=store, stream=stream, run_id="R")
    first = await agent.run(EVERY_KIND["goal"])
    stored = {sid: str(s.status) for sid, s in store.get_steps("R").items()}
    record = store.get_run("R")
    assert record is not None
    before = list(T.CALLS)
    T.FAILING.clear()
    again = await planrail.resume("R", T.TOOLS, store=store).run()
    return {
        "first": first,
        "stored": stored,
        "plan_steps": [s["id"] for s in record.plan["steps"]],
        "stages": record.plan.get("stages"),
        "before": before,
        "resumed": T.CALLS[len(before) :],
        "again": again,
        "stage_prompt": "Stage goal: Charge, create and tell x" in llm.requests[-1].text,
    }


async def test_a_streamed_plan_of_every_kind_runs_and_resumes_as_an_unstreamed_one(
    tmp_path: Path,
) -> None:
    """Streamed, the read-only fan-out and the false guard start early (the branch's steps,
    the loop and the rest wait for the seal); once sealed the run is recorded as the same plan
    unstreamed is — the same statuses, plan and stages — and a resume after ``make`` failed
    calls only what is left, ending with the same output."""
    runs = {}
    for stream in (True, False):
        opened = open_store(f"sqlite:///{tmp_path / f'{stream}.db'}")
        try:
            runs[stream] = await _every_kind(opened, stream=stream)
        finally:
            opened.close()
    streamed, plain = runs[True], runs[False]
    assert _early(streamed["first"]) == ["find", "about", "never"]
    assert streamed["first"].status == plain["first"].status == "failed"
    assert streamed["stored"] == plain["stored"]
    assert streamed["stored"]["never"] == "skipped"
    assert streamed["stored"]["make"] == "failed"
    assert streamed["plan_steps"] == plain["plan_steps"]
    assert streamed["stages"] == plain["stages"]
    assert sorted(map(tuple, streamed["before"])) == sorted(map(tuple, plain["before"]))
    assert streamed["stage_prompt"], "the llm_call step saw its stage's goal"
    assert plain["stage_prompt"]
    assert (
        streamed["resumed"]
        == plain["resumed"]
        == [
            ("create", "x-a"),
            ("notify", ["u_x-a", "A summary. / not charged"]),
        ]
    )
    assert streamed["again"].status == plain["again"].status == "succeeded"
    assert streamed["again"].output == plain["again"].output
    assert streamed["again"].output == {
        "who": "u_x-a",
        "paid": "not charged",
        "loops": 2,
        "sent": "sent to u_x-a",
    }


FAN_OUT: dict[str, Any] = {
    "goal": "Charge everyone found for x",
    "steps": [
        FIND,
        ABOUT_EACH,
        {
            "id": "pay",
            "tool": "charge",
            "args": {"name": "${item}"},
            "for_each": "${find.names}",
            "max_parallel": 1,
            "depends_on": ["find"],
        },
    ],
    "output": {"paid": "${pay}", "about": "${about}"},
}


@pytest.mark.parametrize(
    "stream",
    [False, True],
)
async def test_a_fan_out_resumes_only_the_items_that_did_not_succeed(
    store: Store, stream: bool
) -> None:
    """``about`` fans out read-only (early, when streamed); ``pay`` fans out an unsafe tool
    after the seal and its third item fails. The items that succeeded are committed one by one
    (docs/durability.md, guarantee 10), so the resume charges only ``x-c`` — streamed, it
    charged ``x-a`` and ``x-b`` a second time."""
    T.FAILING.add("x-c")
    llm = _streamed(FAN_OUT, "pay", "describe")
    agent = Agent(llm, T.TOOLS, approval=approve_all, store=store, stream=stream, run_id="R")
    first = await agent.run(FAN_OUT["goal"])
    assert first.status == "failed"
    if stream:
        assert _early(first) == ["find", "about"]
    steps = store.get_steps("R")
    assert steps["about"].status == "succeeded"
    T.FAILING.clear()
    before = len(T.CALLS)
    again = await planrail.resume("R", T.TOOLS, store=store).run()
    assert again.status == "succeeded", again.why
    assert again.output == {
        "paid": ["charged x-a", "charged x-b", "charged x-c"],
        "about": ["about x-a", "about x-b", "about x-c"],
    }
    assert T.CALLS[before:] == [("charge", "x-c")], "each card charged once"
    assert steps["pay"].metadata.get("items") is not None


LOOP: dict[str, Any] = {
    "goal": "Bump n until it reaches four",
    "steps": [
        FIND,
        {
            "id": "loop",
            "tool": "bump",
            "args": {"name": "n"},
            "repeat": {"until": {"ge": ["${self.n}", 4]}, "max_iterations": 2},
        },
    ],
    "output": "${loop.n}",
}


@pytest.mark.parametrize(
    "stream",
    [False, True],
)
async def test_a_loop_cut_off_resumes_after_its_last_finished_iteration(
    store: Store, stream: bool
) -> None:
    """The loop's second iteration never returns; the run is cancelled there. Its first
    iteration is committed (docs/durability.md, guarantee 11), so the resume runs iteration 2
    only and, out of iterations (``max_iterations`` counts the kept one), fails after one more
    call. Streamed, nothing was kept: the loop started over and made two more calls."""
    T.STALL_AT["n"] = 2
    agent = Agent(
        _streamed(LOOP, "loop", "lookup"),
        T.TOOLS,
        approval=approve_all,
        store=store,
        stream=stream,
        run_id="R",
    )
    task = asyncio.create_task(agent.run(LOOP["goal"]))
    assert await asyncio.to_thread(T.STALLED.wait, WAIT)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    cut_off = store.get_steps("R")["loop"]
    assert cut_off.status == "cancelled"
    T.STALL_AT.clear()
    before = len(T.CALLS)
    again = await planrail.resume("R", T.TOOLS, store=store).run()
    assert T.CALLS[before:] == [("bump", "n")], "finished iterations are not called again"
    assert again.status == "failed"
    assert cut_off.metadata.get("iterations") is not None


CONFIRMED: dict[str, Any] = {
    "goal": "Find x, then create y",
    "steps": [
        FIND,
        {"id": "make", "tool": "create", "args": {"name": "y"}},
    ],
    "stages": [
        {"id": "research", "goal": "Know who x is", "steps": ["find"]},
        {"id": "build", "goal": "Create y", "steps": ["make"], "confirm": True},
    ],
}
NOT_MET = json.dumps({"ok": False, "reason": "x is not known"})


@pytest.mark.parametrize(
    "stream",
    [False, True],
)
async def test_a_confirm_stage_is_checked_before_its_world_changing_step(
    store: Store, stream: bool
) -> None:
    """``make`` (keyed, no dependency) is in a ``confirm: true`` stage whose check answers no.
    Unstreamed, the check is asked and ``make`` is skipped. Streamed with the run started
    before the plan was whole, ``make`` was ready before the seal: the seal launched it, the
    check was never asked, the account was created and the run "succeeded"."""
    agent = Agent(
        _streamed(CONFIRMED, "make", "lookup", NOT_MET),
        T.TOOLS,
        approval=approve_all,
        store=store,
        stream=stream,
        run_id="R",
    )
    result = await agent.run(CONFIRMED["goal"])
    assert "create" not in _names(T.CALLS), "created before its stage was confirmed"
    assert result.status == "failed"
    assert result.run is not None
    assert result.run.rejected_stages == {"build": "x is not known"}
    record = store.get_run("R")
    assert record is not None
    assert record.status == "failed"


THREE_ACCOUNTS: dict[str, Any] = {
    "goal": "Find x, then create a, b and c",
    "steps": [
        FIND,
        {"id": "a", "tool": "create", "args": {"name": "a"}},
        {"id": "b", "tool": "create", "args": {"name": "b"}},
        {"id": "c", "tool": "create", "args": {"name": "c"}},
    ],
}


@pytest.mark.parametrize(
    "stream",
    [False, True],
)
async def test_max_concurrency_holds_for_the_steps_the_seal_releases(stream: bool) -> None:
    """``max_concurrency=1``: three independent world-changing steps, ready (and held) before
    the streamed plan is sealed, must still run one at a time."""
    agent = Agent(
        _streamed(THREE_ACCOUNTS, "a", "lookup"),
        T.TOOLS,
        approval=approve_all,
        stream=stream,
        max_concurrency=1,
    )
    result = await agent.run(THREE_ACCOUNTS["goal"])
    assert result.status == "succeeded", result.reason
    assert sorted(v for n, v in T.CALLS if n == "create") == ["a", "b", "c"]
    assert T.PEAK["peak"] == 1, f"{T.PEAK['peak']} calls at once"


@pytest.mark.parametrize(
    "stream",
    [False, True],
)
async def test_a_stored_run_id_given_again_with_its_own_plan_resumes_it(
    store: Store, stream: bool
) -> None:
    """A run stored ``failed`` (``make`` failed) is given again as ``run_id`` with the very
    plan it holds. Unstreamed, the agent resumes it: only ``make`` and ``tell`` are called.
    Streamed (the run started before the plan was whole), ``Agent.run`` raised
    ``PlanMismatchError`` naming the hash of an empty plan, having run nothing."""
    T.FAILING.add("x-a")
    first = await Agent(
        ScriptedLLM([json.dumps(CREATE_X)]), T.TOOLS, approval=approve_all, store=store, run_id="R"
    ).run(CREATE_X["goal"])
    assert first.status == "failed"
    T.FAILING.clear()
    before = len(T.CALLS)
    text, chunks = _chunks(CREATE_X, "make")

    async def one_turn(index: int, _chunk: str) -> None:
        if index == 1:  # one turn of the loop: the run started (and, streamed, opened) by now
            await asyncio.sleep(0)

    llm = ScriptedLLM([Scripted(text, chunks=chunks)], on_chunk=one_turn)
    agent = Agent(llm, T.TOOLS, approval=approve_all, store=store, stream=stream, run_id="R")
    try:
        again = await agent.run(CREATE_X["goal"])
    except PlanrailError as exc:
        raise AssertionError(f"Agent.run raised {type(exc).__name__}: {exc.message}") from None
    assert again.status == "succeeded", again.reason
    assert _names(T.CALLS[before:]) == ["create", "notify"]


async def test_a_streamed_run_whose_record_cannot_be_made_at_its_seal_changes_nothing(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    """Another runner holds the lease of run ``R`` when the streamed plan is sealed (the run
    is made only then): the record is made before any held step is released, so none of them
    is called, and the agent says why (``RunBusyError``, as the unstreamed door does). The
    seal used to release them first (stopped before their call only by the loop's order), and
    the runner then logged that it "could not record the end" of a run it never opened."""
    caplog.set_level(logging.DEBUG)
    assert store.acquire_lease("R", this_owner(), 30.0, SYSTEM_CLOCK.now())
    agent = Agent(
        _streamed(CREATE_X, "make", "lookup"),
        T.TOOLS,
        approval=approve_all,
        store=store,
        stream=True,
        run_id="R",
    )
    with pytest.raises(PlanrailError, match="is being run"):
        await agent.run(CREATE_X["goal"])
    assert _names(T.CALLS) == ["lookup"]
    assert store.get_run("R") is None
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


# ---------------------------------------------------------------- 3. MCP resume_run


def _serve(db: Path, ledger: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=PLANRAIL,
        args=["mcp", "serve", "--tools", TOOLS_FILE, "--store", f"sqlite:///{db}"],
        env={**os.environ, T.LEDGER_ENV: str(ledger)},
    )


async def test_mcp_resume_run_of_a_streamed_run_waiting_for_approval(tmp_path: Path) -> None:
    """A streamed run whose approval was deferred is stored ``awaiting_approval`` by the API;
    a served ``planrail mcp serve`` over the same SQLite file: ``resume_run`` before an
    operator's approval runs nothing and says how to approve; after ``planrail approve``
    (there is no ``approve_run`` tool, on purpose) it runs the rest — never the early step
    again — and ``get_run`` shows every step succeeded."""
    db, ledger = tmp_path / "runs.db", tmp_path / "ledger.jsonl"
    stored = open_store(f"sqlite:///{db}")
    try:
        first = await Agent(
            _streamed(CREATE_X, "make", "lookup"),
            T.TOOLS,
            approval=lambda _request: None,
            store=stored,
            stream=True,
            run_id="R",
        ).run(CREATE_X["goal"])
        assert first.status == "refused"
        record = stored.get_run("R")
        assert record is not None
        assert record.status == "awaiting_approval"
        async with Client(_serve(db, ledger)) as client:
            listed = {t.name for t in (await client.list_tools()).tools}
            assert "resume_run" in listed
            assert "approve_run" not in listed
            waiting = await client.call_tool("resume_run", {"run_id": "R"})
            assert not waiting.is_error, waiting.content
            assert waiting.structured_content is not None
            assert waiting.structured_content["status"] == "awaiting_approval"
            assert "planrail approve R" in waiting.structured_content["next"]
            assert T.ledger(ledger) == []
            operations.approve(stored, "R", by="alice")
            done = await client.call_tool("resume_run", {"run_id": "R"})
            assert done.structured_content is not None
            assert done.structured_content["status"] == "succeeded", done.structured_content
            assert done.structured_content["output"] == "u_x-a"
            shown = await client.call_tool("get_run", {"run_id": "R"})
            assert shown.structured_content is not None
            steps = {s["id"]: s["status"] for s in shown.structured_content["steps"]}
    finally:
        stored.close()
    assert steps == {"find": "succeeded", "make": "succeeded", "tell": "succeeded"}
    assert T.ledger(ledger) == [["create", "x-a"], ["notify", ["u_x-a", "welcome"]]]
    assert _names(T.CALLS) == ["lookup"], "the early step ran once, in the first process"


# ---------------------------------------------------------------- 4. budget, repair


@pytest.mark.parametrize("spent", ["output-tokens", "calls-at-repair"])
async def test_a_budget_spent_while_the_plan_streams_leaves_no_record(
    store: Store, spent: str
) -> None:
    """The streamed answer itself passes ``max_output_tokens`` (charged as the stream ends),
    or its repair is one call more than ``max_llm_calls``: the run is ``budget_exceeded``,
    only read-only steps ran, and nothing of it is stored (docs/planning.md); the same run id
    plans again at once."""
    plan = copy.deepcopy(CREATE_X)
    plan["steps"].insert(
        1,
        ABOUT_TOP,
    )
    if spent == "calls-at-repair":
        plan["steps"][2]["tool"] = "creat"  # unknown: a repair is asked for
    budget = Budget(max_output_tokens=5) if spent == "output-tokens" else Budget(max_llm_calls=1)
    text, chunks = _chunks(plan, "make")
    llm = ScriptedLLM(
        [Scripted(text, chunks=chunks, output_tokens=50), json.dumps(CREATE_X)],
        on_chunk=_held_until("describe"),
    )
    agent = Agent(
        llm, T.TOOLS, approval=approve_all, store=store, stream=True, run_id="R", budget=budget
    )
    result = await agent.run(CREATE_X["goal"])
    assert result.status == "budget_exceeded", result.reason
    assert len(llm.requests) == 1
    assert result.run is None
    assert _names(T.CALLS) == ["lookup", "describe"]
    assert store.get_run("R") is None
    assert store.get_lease("R") is None
    await _plans_afresh(store)


async def test_a_budget_spent_by_an_llm_step_after_the_seal_is_recorded_with_the_run(
    store: Store,
) -> None:
    """``max_llm_calls=1``: the streamed plan spends it; its ``llm_call`` step is refused after
    the seal. The run is recorded (``cancelled``) with its budget — the planning call counted
    — and a resume refuses the step again instead of calling the model or ``notify``."""
    plan = copy.deepcopy(CREATE_X)
    plan["steps"][2]["args"]["text"] = "${summary}"
    plan["steps"][2]["depends_on"] = ["summary"]
    plan["steps"].insert(
        2,
        {
            "id": "summary",
            "action": "llm_call",
            "prompt": "Welcome ${make.user_id}",
            "depends_on": ["make"],
        },
    )
    agent = Agent(
        _streamed(plan, "make", "lookup", "Hi"),
        T.TOOLS,
        approval=approve_all,
        store=store,
        stream=True,
        run_id="R",
        budget=Budget(max_llm_calls=1),
    )
    result = await agent.run(plan["goal"])
    assert result.status == "budget_exceeded"
    assert _names(T.CALLS) == ["lookup", "create"]
    record = store.get_run("R")
    assert record is not None
    assert record.status == "cancelled"
    assert record.metadata["policies"]["budget"]["spent"]["calls"] == 1
    assert store.get_steps("R")["summary"].status == "failed"
    model = ScriptedLLM(["Hi"])
    again = await planrail.resume("R", T.TOOLS, store=store, llm=model).run()
    assert again.status == "failed"
    assert "budget" in (again.why or "")
    assert model.requests == []
    assert "notify" not in _names(T.CALLS)


STAGED: dict[str, Any] = {
    "goal": "Find x, then create and tell them",
    "steps": [
        FIND,
        ABOUT_TOP,
        {"id": "make", "tool": "create", "args": {"name": "${find.top}"}, "depends_on": ["about"]},
        {
            "id": "tell",
            "tool": "notify",
            "args": {"user_id": "${make.user_id}", "text": "${about}"},
            "depends_on": ["make"],
        },
    ],
    "stages": [
        {"id": "research", "goal": "Know who x is", "steps": ["find", "about"]},
        {
            "id": "build",
            "goal": "Create x and tell them",
            "steps": ["make", "tell"],
            "confirm": True,
        },
    ],
    "output": "${tell}",
}
MET = json.dumps({"ok": True, "reason": "x is known"})


async def _repaired(store: Store) -> tuple[AgentResult, ScriptedLLM]:
    """STAGED streamed with an unknown tool in ``make``; the repair also rewrites the early
    step ``find`` (query ``y``). ``create`` fails for ``y-a`` the first time."""
    flawed = copy.deepcopy(STAGED)
    flawed["steps"][2]["tool"] = "creat"
    repaired = copy.deepcopy(STAGED)
    repaired["steps"][0]["args"]["query"] = "y"
    T.FAILING.add("y-a")
    llm = _streamed(flawed, "make", "describe", json.dumps(repaired), MET)
    agent = Agent(llm, T.TOOLS, approval=approve_all, store=store, stream=True, run_id="R")
    return await agent.run(STAGED["goal"]), llm


async def test_a_repair_rewriting_an_early_step_with_stages_and_a_store(store: Store) -> None:
    """The early ``find`` ran with the first answer's query; the repair rewrote it. The final
    plan runs under the same run id with its stages: the record holds the repaired plan and
    its stages, the confirm stage is checked (one model call), and after ``make`` failed a
    resume (with a model for the stage check) calls only what is left."""
    result, llm = await _repaired(store)
    assert result.status == "failed", result.reason
    assert [e.type for e in result.trace if e.type in ("stream_replaced", "plan_sealed")] == [
        "stream_replaced"
    ]
    assert len(llm.requests) == 3  # plan, repair, the stage check
    record = store.get_run("R")
    assert record is not None
    assert record.plan["steps"][0]["args"] == {"query": "y"}
    assert [s["id"] for s in record.plan["stages"]] == ["research", "build"]
    assert [v for n, v in T.CALLS if n == "lookup"] == ["x", "y"]
    assert store.get_steps("R")["make"].status == "failed"
    T.FAILING.clear()
    before = len(T.CALLS)
    again = await planrail.resume("R", T.TOOLS, store=store, llm=ScriptedLLM([MET])).run()
    assert again.status == "succeeded", again.why
    assert _names(T.CALLS[before:]) == ["create", "notify"]


async def test_a_repair_rewriting_an_early_step_runs_its_dependents_again(store: Store) -> None:
    """``about`` depends on the rewritten ``find``: its output from the first answer's ``find``
    (``about x-a``) no longer holds. It must run again (``describe y-a``), and ``tell`` must
    send what the final plan computes — it sent ``about x-a``."""
    result, _ = await _repaired(store)
    assert result.run is not None
    assert result.run.steps["about"].output == "about y-a"
    assert ("describe", "y-a") in T.CALLS
    T.FAILING.clear()
    await planrail.resume("R", T.TOOLS, store=store, llm=ScriptedLLM([MET])).run()
    assert ("notify", ["u_y-a", "about y-a"]) in T.CALLS
