"""A step a replan reuses is committed to the new run version's record (``RUN-rN``), before
any of its dependents calls anything: a resume of that version finds it succeeded and never
calls its tool again (it used to find no record, and call it again under ``RUN-rN:STEP``)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable

import pytest
from pydantic import BaseModel

import planrail
from planrail.agent import Agent, approve_all
from planrail.engine import operations
from planrail.engine.approval import defer
from planrail.engine.checkpoint import load_result
from planrail.engine.gate import REPLACES, RunReplannedError, replaces_of
from planrail.plan.tools import Tool
from planrail.store import Store, open_store
from planrail.testing import FakeClock, ScriptedLLM
from planrail.types import StepStatus

from .dying_store import WALL, DyingStore, resume_later, run_until

S = StepStatus
GOAL = "Charge Alice and tell her"


class Charge(BaseModel):
    charge_id: str


class Sent(BaseModel):
    sent: bool


@dataclasses.dataclass
class Ledger:
    """What the tools were called with, in order, as (tool, idempotency key)."""

    calls: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    notify_fails: int = 0
    """How many calls of ``notify`` fail (for good: no retry) before one succeeds."""
    kill_in: str | None = None
    """A run id: ``notify`` called in that run makes the store die and never returns (its
    runner is killed mid-call), after noting the run's records as the database holds them."""
    store: DyingStore | None = None
    seen_by_notify: list[dict[str, str]] = dataclasses.field(default_factory=list)
    died: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)

    def count(self, tool: str) -> int:
        return sum(1 for name, _ in self.calls if name == tool)

    async def maybe_die(self, run_id: str) -> None:
        if self.store is None or run_id != self.kill_in:
            return
        self.kill_in = None
        with open_store(self.store.url) as reader:
            records = reader.get_steps(run_id)
        self.seen_by_notify.append({sid: str(r.status) for sid, r in records.items()})
        self.store.die()
        self.died.set()
        await asyncio.Event().wait()  # the process is gone: this call never returns


def make_tools(ledger: Ledger) -> list[Tool]:
    @planrail.tool(side_effects="keyed")
    async def charge(ctx: planrail.StepContext, amount: int) -> Charge:
        """Charge a card (a side effect)."""
        ledger.calls.append(("charge", ctx.idempotency_key))
        return Charge(charge_id="ch_1")

    @planrail.tool(side_effects="keyed")
    async def notify(ctx: planrail.StepContext, charge_id: str) -> Sent:
        """Tell the customer."""
        ledger.calls.append(("notify", ctx.idempotency_key))
        await ledger.maybe_die(ctx.run_id)
        if ledger.notify_fails > 0:
            ledger.notify_fails -= 1
            raise ValueError("the mail server refused the message")
        return Sent(sent=True)

    return [charge, notify]


FIRST = {
    "goal": GOAL,
    "steps": [
        {"id": "a", "tool": "charge", "args": {"amount": 5}},
        {"id": "b", "tool": "notify", "args": {"charge_id": "${a.charge_id}"}, "depends_on": ["a"]},
    ],
}
REPLAN = {
    "goal": GOAL,
    "steps": [
        {"id": "c", "tool": "notify", "args": {"charge_id": "${a.charge_id}"}, "depends_on": ["a"]},
    ],
}


def agent(ledger: Ledger, store: Store, tools: list[Tool], clock: FakeClock) -> Agent:
    llm = ScriptedLLM([FIRST, REPLAN])
    return Agent(
        llm, tools, approval=approve_all, max_replans=1, store=store, run_id="RUN", clock=clock
    )


def resume_r1(tools: list[Tool], url: str) -> Awaitable[planrail.RunResult]:
    return resume_later("RUN-r1", tools, url)


async def test_a_failed_replan_resumed_does_not_call_its_reused_step_again(
    store_url: str,
) -> None:
    """``b`` fails, the replan reuses ``a`` and its ``c`` fails too. ``RUN-r1``'s record holds
    ``a`` succeeded (restored as it opened), and ``RUN`` names ``RUN-r1`` as its replacement;
    resuming ``RUN-r1`` runs ``c`` only: ``charge`` was called once, under the first run's
    key."""
    ledger = Ledger(notify_fails=2)
    tools = make_tools(ledger)
    store = open_store(store_url)
    result = await agent(ledger, store, tools, FakeClock(wall=WALL)).run(GOAL)
    assert result.status == "failed", result.reason
    assert [r.run_id for r in result.runs] == ["RUN", "RUN-r1"]
    store.close()
    with open_store(store_url) as reader:
        carried = reader.get_steps("RUN-r1")["a"]
        replaced = reader.get_run("RUN")
        restored = [e.step_id for e in reader.events("RUN-r1") if e.type == "step_restored"]
    assert (carried.status, carried.output) == (S.SUCCEEDED, {"charge_id": "ch_1"})
    assert replaced is not None
    assert replaced.metadata.get("replanned_as") == "RUN-r1"
    assert restored == ["a"]

    resumed = await resume_r1(tools, store_url)

    assert resumed.status == "succeeded", resumed.why
    assert ledger.calls == [
        ("charge", "RUN:a"),
        ("notify", "RUN:b"),
        ("notify", "RUN-r1:c"),
        ("notify", "RUN-r1:c"),
    ]
    assert ledger.count("charge") == 1
    assert resumed.steps["a"].output == {"charge_id": "ch_1"}
    with open_store(store_url) as reader:
        recorded = reader.get_steps("RUN-r1")
    assert (recorded["a"].status, recorded["a"].output) == (S.SUCCEEDED, {"charge_id": "ch_1"})
    assert {sid: r.status for sid, r in recorded.items()} == {"a": S.SUCCEEDED, "c": S.SUCCEEDED}


async def test_a_replan_killed_mid_call_keeps_its_reused_step(store_url: str) -> None:
    """The runner of ``RUN-r1`` dies while ``c`` (which depends on the reused ``a``) is being
    called: ``a``'s record was committed before that call, so the resume calls ``c`` again and
    never ``charge``."""
    ledger = Ledger(notify_fails=1, kill_in="RUN-r1")
    tools = make_tools(ledger)
    dying = ledger.store = DyingStore(store_url)
    await run_until(ledger.died, agent(ledger, dying, tools, FakeClock(wall=WALL)).run(GOAL))
    dying.close()

    resumed = await resume_r1(tools, store_url)

    assert resumed.status == "succeeded", resumed.why
    assert ledger.count("charge") == 1
    assert ledger.calls[-2:] == [("notify", "RUN-r1:c"), ("notify", "RUN-r1:c")]
    assert ledger.seen_by_notify == [{"a": "succeeded", "c": "running"}]
    with open_store(store_url) as reader:
        assert load_result(reader, "RUN-r1").status == "succeeded"


async def test_prepare_restored_steps_are_committed(store_url: str) -> None:
    """The public door: ``planrail.prepare(..., restored=...)`` with a store records the
    restored step in the run, so that ``planrail.resume`` does not call it."""
    ledger = Ledger(notify_fails=1)
    tools = make_tools(ledger)
    store = open_store(store_url)
    first = await planrail.arun(FIRST, tools, store=store, run_id="RUN", approve=True)
    assert first.status == "failed"
    plan = {"goal": GOAL, "steps": [FIRST["steps"][0], REPLAN["steps"][0]]}
    again = planrail.prepare(
        plan,
        tools,
        store=store,
        run_id="RUN-r1",
        approve=True,
        restored={"a": first.steps["a"]},
        clock=FakeClock(wall=WALL),
    )
    ledger.notify_fails = 1
    second = await again.run()
    assert second.status == "failed"
    assert [e.step_id for e in store.events("RUN-r1") if e.type == "step_restored"] == ["a"]
    store.close()

    resumed = await resume_r1(tools, store_url)

    assert resumed.status == "succeeded", resumed.why
    assert ledger.count("charge") == 1
    assert ledger.calls == [
        ("charge", "RUN:a"),
        ("notify", "RUN:b"),
        ("notify", "RUN-r1:c"),
        ("notify", "RUN-r1:c"),
    ]


async def test_a_replan_left_waiting_for_approval_keeps_its_reused_step(store_url: str) -> None:
    """A replanned run stored ``awaiting_approval`` (its approver deferred) holds its reused
    step already: approved by an operator and resumed, it calls only the new step."""
    ledger = Ledger(notify_fails=1)
    tools = make_tools(ledger)
    store = open_store(store_url)
    first = await planrail.arun(FIRST, tools, store=store, run_id="RUN", approve=True)
    plan = {"goal": GOAL, "steps": [FIRST["steps"][0], REPLAN["steps"][0]]}
    waiting = await planrail.prepare(
        plan,
        tools,
        store=store,
        run_id="RUN-r1",
        approver=defer,
        restored={"a": first.steps["a"]},
        clock=FakeClock(wall=WALL),
    ).run()
    assert waiting.status == "awaiting_approval"
    operations.approve(store, "RUN-r1", clock=FakeClock(wall=WALL + 50))
    store.close()

    resumed = await resume_r1(tools, store_url)

    assert resumed.status == "succeeded", resumed.why
    assert ledger.calls == [("charge", "RUN:a"), ("notify", "RUN:b"), ("notify", "RUN-r1:c")]


async def test_the_version_a_replan_replaced_is_not_resumed(store_url: str) -> None:
    """``RUN`` failed and was replanned as ``RUN-r1``, which finished the work: resuming
    ``RUN`` (any door) in a new runner is refused, naming ``RUN-r1`` — it used to run
    ``RUN``'s failed step again, a second effect beside the one the replan made. ``RUN``'s
    record stays as it was: failed, replaced by ``RUN-r1``."""
    ledger = Ledger(notify_fails=1)
    tools = make_tools(ledger)
    with open_store(store_url) as store:
        result = await agent(ledger, store, tools, FakeClock(wall=WALL)).run(GOAL)
    assert result.status == "succeeded", result.reason
    calls = list(ledger.calls)
    assert calls == [("charge", "RUN:a"), ("notify", "RUN:b"), ("notify", "RUN-r1:c")]
    with open_store(store_url) as store:
        with pytest.raises(RunReplannedError, match="resume 'RUN-r1' instead"):
            planrail.resume("RUN", tools, store=store)
        record = store.get_run("RUN")
    assert ledger.calls == calls  # nothing called again
    assert record is not None
    assert (record.status, record.metadata.get("replanned_as")) == ("failed", "RUN-r1")


async def test_an_agent_given_the_replaced_run_id_says_so_before_planning(
    store_url: str,
) -> None:
    """The Agent door asks what every door asks of a stored run: ``Agent(run_id="RUN")`` in a
    new runner after ``RUN`` was replanned ends ``error`` naming ``RUN-r1``, no model asked."""
    ledger = Ledger(notify_fails=1)
    tools = make_tools(ledger)
    with open_store(store_url) as store:
        first = await agent(ledger, store, tools, FakeClock(wall=WALL)).run(GOAL)
    assert first.status == "succeeded", first.reason
    calls = list(ledger.calls)
    llm = ScriptedLLM([])
    with open_store(store_url) as store:
        again = await Agent(llm, tools, approval=approve_all, store=store, run_id="RUN").run(GOAL)
    assert again.status == "error"
    assert again.reason is not None
    assert "resume 'RUN-r1' instead" in again.reason
    assert llm.requests == []
    assert ledger.calls == calls  # nothing called again


async def test_a_reused_step_is_recorded_as_the_version_it_comes_from_recorded_it(
    store_url: str,
) -> None:
    """``RUN-r1`` reuses ``a``, whose call was ``charge`` under ``RUN:a``: its record in
    ``RUN-r1`` holds that key, the arguments and their hash, as ``RUN``'s does (it held
    ``RUN-r1:a``, a key no call was made with, and no arguments). Replanned again, ``RUN-r2``
    still holds ``RUN:a``: the key is the call's, however often the step is carried."""
    ledger = Ledger(notify_fails=3)
    tools = make_tools(ledger)
    llm = ScriptedLLM([FIRST, REPLAN, REPLAN])
    with open_store(store_url) as store:
        result = await Agent(
            llm,
            tools,
            approval=approve_all,
            max_replans=2,
            store=store,
            run_id="RUN",
            clock=FakeClock(wall=WALL),
        ).run(GOAL)
        assert [r.run_id for r in result.runs] == ["RUN", "RUN-r1", "RUN-r2"]
        first = store.get_steps("RUN")["a"]
        carried = [store.get_steps(rid)["a"] for rid in ("RUN-r1", "RUN-r2")]
    assert [c for c in ledger.calls if c[0] == "charge"] == [("charge", "RUN:a")]
    assert first.idempotency_key == "RUN:a"
    for rid, rec in zip(("RUN-r1", "RUN-r2"), carried, strict=True):
        assert rec.run_id == rid
        assert rec.status == S.SUCCEEDED
        assert rec.idempotency_key == "RUN:a"
        assert (rec.args, rec.args_hash) == ({"amount": 5}, first.args_hash)
        assert rec.attempt_history == first.attempt_history


async def test_a_replans_record_names_the_version_it_replaced_and_its_resume_keeps_it(
    store_url: str,
) -> None:
    """``RUN-r1``'s record says it replaced ``RUN`` (:data:`~planrail.engine.gate.REPLACES`,
    from the ``replaces`` the agent gives its execution) as it is created; a resume, which is
    given no ``replaces``, rewrites the record and keeps the fact."""
    ledger = Ledger(notify_fails=2)
    tools = make_tools(ledger)
    with open_store(store_url) as store:
        result = await agent(ledger, store, tools, FakeClock(wall=WALL)).run(GOAL)
        assert result.status == "failed", result.reason
        failed = store.get_run("RUN-r1")
    assert failed is not None
    assert (failed.status, replaces_of(failed)) == ("failed", "RUN")

    assert (await resume_r1(tools, store_url)).status == "succeeded"

    with open_store(store_url) as reader:
        resumed, first = reader.get_run("RUN-r1"), reader.get_run("RUN")
    assert resumed is not None
    assert first is not None
    assert (resumed.status, resumed.metadata.get(REPLACES)) == ("succeeded", "RUN")
    assert replaces_of(first) is None
