"""Group commit: intents of steps that start in the same loop turn share one transaction.

The guarantee does not change (docs/durability.md, guarantee 2): every side-effecting call
starts only once its own intent is committed.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import planrail
from planrail.engine.approval import approve_all
from planrail.engine.executor import Execution
from planrail.engine.result import StepResult
from planrail.errors import ExecutionError, StoreError
from planrail.store import MemoryStore, SQLiteStore
from planrail.store.base import Intent

from .helpers import CommitLog

WIDTH = 20


def _recording(called: list[str]) -> Any:
    """A keyed ``write(step)`` tool that appends each step it is called for to ``called``."""

    @planrail.tool(side_effects="keyed")
    async def write(step: str) -> str:
        """Records that it was called."""
        called.append(step)
        return step

    return write


def _wide_plan(tool: str) -> dict[str, Any]:
    steps = [{"id": "root", "tool": tool, "args": {"step": "root"}}]
    steps += [
        {"id": f"s{i}", "tool": tool, "args": {"step": f"s{i}"}, "depends_on": ["root"]}
        for i in range(WIDTH)
    ]
    return {"goal": "group commit", "steps": steps}


async def test_a_wave_of_keyed_steps_commits_its_intents_together_and_each_before_its_call() -> (
    None
):
    """Twenty keyed steps that become ready together record their twenty intents in one
    commit, and each tool, when called, finds its own intent already in the store."""
    store = CommitLog(MemoryStore())
    seen: dict[str, bool] = {}

    @planrail.tool(side_effects="keyed")
    async def write(ctx: planrail.StepContext, step: str) -> str:
        """Checks that its intent is durable before doing anything."""
        keys = {i.idempotency_key for i in store.intents(ctx.run_id)}
        seen[step] = ctx.idempotency_key in keys
        return step

    plan = planrail.validate(_wide_plan("write"), [write]).raise_for_errors()
    result = await Execution(plan, [write], store=store, run_id="g1", approve=True).run()

    assert result.status == "succeeded"
    assert seen == {s.id: True for s in plan.steps}
    intents_per_commit = [len(c.intents) for c in store.commits]
    assert max(intents_per_commit) == WIDTH
    assert sum(1 for n in intents_per_commit if n) <= 3


async def test_a_conflicting_intent_in_a_group_fails_only_its_own_step() -> None:
    """One key of a wave was recorded before with other arguments: that step fails with
    IdempotencyConflictError and is not called; the rest of the wave runs."""
    store = MemoryStore()
    called: list[str] = []
    write = _recording(called)

    plan = planrail.validate(_wide_plan("write"), [write]).raise_for_errors()
    execution = Execution(plan, [write], store=store, run_id="g2", approve=True)
    original = store.create_run

    def create_and_forge(run: Any) -> None:
        original(run)
        store.commit(
            intents=[
                Intent(run_id="g2", step_key="s3", idempotency_key="g2:s3", args_hash="forged")
            ],
        )

    store.create_run = create_and_forge  # type: ignore[method-assign]
    result = await execution.run()

    assert result.steps["s3"].status == "failed"
    assert result.steps["s3"].error is not None
    assert result.steps["s3"].error["type"] == "IdempotencyConflictError"
    assert "s3" not in called
    assert sorted(called) == sorted(["root", *(f"s{i}" for i in range(WIDTH) if i != 3)])


@pytest.mark.parametrize("approved_by", ["approve=True", "an approver"])
async def test_a_durable_run_serialises_its_plan_once_for_its_records(
    monkeypatch: Any, approved_by: str
) -> None:
    """The run's record is written at its start, at its approval and at its end; the plan it
    stores is serialised once for all three (it never changes), plus the hashes that bind the
    approval: one when ``approve=True`` decides at once, two when an approver is awaited
    (before it is asked, and after: a plan changed meanwhile is refused). The stored plan is
    the approved one."""
    from planrail.plan.model import Plan

    dumps: list[int] = []
    real = Plan.to_json_data

    def counted(self: Plan) -> dict[str, Any]:
        dumps.append(1)
        return real(self)

    monkeypatch.setattr(Plan, "to_json_data", counted)

    @planrail.tool(side_effects="keyed")
    async def write(ctx: planrail.StepContext, step: str) -> str:
        return step

    store = MemoryStore()
    plan = _wide_plan("write")
    checked = planrail.validate(plan, [write]).raise_for_errors()
    how: dict[str, Any] = (
        {"approve": True} if approved_by == "approve=True" else {"approver": approve_all}
    )
    ex = Execution(checked, [write], store=store, **how)
    result = await ex.run()
    assert result.status == "succeeded"
    assert len(dumps) == (2 if approved_by == "approve=True" else 3)
    stored = store.get_run(result.run_id)
    assert stored is not None
    assert stored.plan == ex.plan.to_json_data()
    assert stored.plan_hash == ex.plan.hash == result.plan_hash


async def test_a_chain_commits_each_outcome_with_the_next_steps_intent() -> None:
    """On a chain of keyed steps, a step's outcome and the intent of the step it starts share
    one transaction: about one commit per step (two before), and never an intent committed
    before the outcome of the step it follows."""
    store = CommitLog(MemoryStore())

    @planrail.tool(side_effects="keyed")
    async def write(step: str, after: str = "") -> str:
        """Returns its step."""
        return step

    n = 12
    steps = [{"id": "s0", "tool": "write", "args": {"step": "s0"}}]
    steps += [
        {
            "id": f"s{i}",
            "tool": "write",
            "args": {"step": f"s{i}", "after": f"${{s{i - 1}}}"},
            "depends_on": [f"s{i - 1}"],
        }
        for i in range(1, n)
    ]
    plan = planrail.validate({"goal": "chain", "steps": steps}, [write]).raise_for_errors()
    result = await Execution(plan, [write], store=store, run_id="c1", approve=True).run()

    assert result.status == "succeeded"
    for i in range(1, n):
        carried = [k for k, c in enumerate(store.commits) if f"s{i}" in c.intents]
        done = [k for k, c in enumerate(store.commits) if c.steps.get(f"s{i - 1}") == "succeeded"]
        assert carried == done[:1], f"s{i}'s intent and s{i - 1}'s outcome: one commit"
    assert len(store.commits) <= n + 3  # + the approval, the first intent, the run's end


def _opened_checkpointer(store: Any, run_id: str) -> tuple[Any, Any]:
    """A checkpointer of run ``run_id`` over a wide plan of one keyed tool, opened."""
    from planrail.clock import SYSTEM_CLOCK
    from planrail.engine.checkpoint import Checkpointer

    @planrail.tool(side_effects="keyed")
    async def write(step: str) -> str:
        """Returns its step."""
        return step

    registry = planrail.ToolRegistry.of([write])
    plan = planrail.validate(_wide_plan("write"), registry).raise_for_errors()
    ckpt = Checkpointer(store, plan, registry, run_id, SYSTEM_CLOCK)
    ckpt.open()
    return ckpt, plan


async def test_intents_queued_while_outcomes_are_unsaved_wait_for_the_outcome_commit() -> None:
    """While the executor's outcomes are unsaved (applied, not committed yet), committing
    intents commits nothing; the outcome commit carries them, and only then is the call's wait
    over; ``saved`` then releases what waited on the outcomes."""
    store = CommitLog(MemoryStore())
    ckpt, plan = _opened_checkpointer(store, "h1")
    unsaved = ckpt.unsaved = asyncio.get_running_loop().create_future()
    root = plan.steps[0]
    waiting = ckpt.intent(StepResult(root.id), root, f"h1:{root.id}", 1, {"step": "root"})
    before = len(store.commits)
    ckpt.commit_intents()
    assert len(store.commits) == before
    assert not waiting.done()
    ckpt.record([], {})
    assert waiting.done()
    assert store.commits[-1].intents == {"root"}
    ckpt.saved()
    assert unsaved.done()
    assert ckpt.unsaved is None
    ckpt.release()


class FailsOnce(CommitLog):
    """Refuses, once, the first commit that carries a succeeded outcome with intents (a
    transient fault: the disk was busy); every commit after goes through."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.refused: list[Any] = []

    def commit(self, **parts: Any) -> Any:
        outcomes = any(s.status == "succeeded" for s in parts.get("steps", ()))
        if not self.refused and outcomes and parts.get("intents"):
            self.refused.append(parts)
            raise StoreError("disk busy")
        return super().commit(**parts)


def _two_layers(tool: str) -> dict[str, Any]:
    """``root`` -> ``s0..s{WIDTH-1}`` -> ``sink``: the first outcome commit carries a wave."""
    plan = _wide_plan(tool)
    plan["steps"].append(
        {
            "id": "sink",
            "tool": tool,
            "args": {"step": "sink"},
            "depends_on": [f"s{i}" for i in range(WIDTH)],
        }
    )
    return plan


async def test_an_intent_under_a_key_outside_its_run_is_refused_before_it_is_queued() -> None:
    """The step key an intent records is what follows ``RUN_ID:`` in its idempotency key: a
    key of another run (or none of this run's form) is a planrail bug, stopped at once — by a
    check that ``python -O`` keeps (not an assert)."""
    store = CommitLog(MemoryStore())
    ckpt, plan = _opened_checkpointer(store, "h1")
    root = plan.steps[0]
    for key in (f"h2:{root.id}", f"h1{root.id}", "h1"):
        with pytest.raises(ExecutionError, match="outside run h1"):
            ckpt.intent(StepResult(root.id), root, key, 1, {"step": "root"})
    assert not ckpt._queued


@pytest.mark.parametrize("store_kind", ["memory", "sqlite"])
async def test_an_outcome_commit_that_fails_once_loses_no_intent_and_no_event(
    tmp_path: Any, store_kind: str
) -> None:
    """The commit carrying ``root``'s outcome and its dependents' intents fails once: the
    outcome is committed alone, then the intents and the events that waited. The run goes on
    as if nothing happened: every step called once, each after its own intent and the outcome
    it follows are durable, and every event the run emitted is in the store, in order."""
    inner = MemoryStore() if store_kind == "memory" else SQLiteStore(tmp_path / "runs.db")
    store = FailsOnce(inner)
    calls: list[tuple[str, bool, bool]] = []

    @planrail.tool(side_effects="keyed")
    async def write(ctx: planrail.StepContext, step: str) -> str:
        """Notes whether its intent and ``root``'s outcome were durable when it was called."""
        keys = {i.idempotency_key for i in inner.intents(ctx.run_id)}
        root = inner.get_steps(ctx.run_id).get("root")
        calls.append(
            (step, ctx.idempotency_key in keys, root is not None and root.status == "succeeded")
        )
        return step

    plan = planrail.validate(_two_layers("write"), [write]).raise_for_errors()
    execution = Execution(plan, [write], store=store, run_id="f1", approve=True)
    emitted = [(str(e.type), e.step_id) async for e in execution.iter()]

    assert store.refused, "the fault was injected"
    assert execution.result().status == "succeeded"
    assert sorted(s for s, _, _ in calls) == sorted(s.id for s in plan.steps)
    assert all(intent for _, intent, _ in calls), "each call after its own intent"
    assert all(after for s, _, after in calls if s != "root"), "after the outcome it follows"
    stored = [(e.type, e.step_id) for e in inner.events("f1")]
    steps_emitted = [e for e in emitted if e[0].startswith("step_")]
    assert [e for e in stored if e[0].startswith("step_")] == steps_emitted, "none lost"
    first_intent = next(k for k, c in enumerate(store.commits) if c.intents - {"root"})
    root_saved = next(k for k, c in enumerate(store.commits) if c.steps.get("root") == "succeeded")
    assert root_saved < first_intent
    inner.close()


async def test_an_outcome_that_cannot_be_recorded_drops_the_intents_that_waited() -> None:
    """The outcome commit fails and so does the outcome alone: the run stops, ``root`` is
    failed (could not be recorded), and none of its dependents' intents is ever committed nor
    any of them called."""

    class Full(CommitLog):
        def commit(self, **parts: Any) -> Any:
            if any(s.status == "succeeded" for s in parts.get("steps", ())):
                raise StoreError("disk full")
            return super().commit(**parts)

    store = Full(MemoryStore())
    called: list[str] = []
    write = _recording(called)

    plan = planrail.validate(_two_layers("write"), [write]).raise_for_errors()
    result = await Execution(plan, [write], store=store, run_id="f2", approve=True).run()

    assert called == ["root"]
    assert result.steps["root"].status == "failed"
    assert "could not be recorded" in (result.steps["root"].reason or "")
    assert {k for c in store.commits for k in c.intents} == {"root"}
    assert all(result.steps[f"s{i}"].status in ("cancelled", "skipped") for i in range(WIDTH))


def test_a_failed_commit_keeps_its_events_for_the_next() -> None:
    """Whatever commit fails (an outcome, a fan-out item's progress), the events it carried
    are not lost: the next commit stores them, before the ones queued since."""
    from planrail.clock import SYSTEM_CLOCK
    from planrail.engine.checkpoint import Checkpointer
    from planrail.engine.events import Event, EventType

    @planrail.tool(side_effects="keyed")
    async def write(step: str) -> str:
        """Returns its step."""
        return step

    class Flaky(CommitLog):
        fail = False

        def commit(self, **parts: Any) -> Any:
            if self.fail:
                self.fail = False
                raise StoreError("disk busy")
            return super().commit(**parts)

    store = Flaky(MemoryStore())
    registry = planrail.ToolRegistry.of([write])
    plan = planrail.validate(_wide_plan("write"), registry).raise_for_errors()
    ckpt = Checkpointer(store, plan, registry, "e1", SYSTEM_CLOCK)
    ckpt.open()
    root = StepResult("root", status="succeeded", output="root")
    for n, commit in enumerate(
        [lambda: ckpt.record([root], {}), lambda: ckpt.item_done(root, 0, "x", "y")]
    ):
        ckpt.event(Event(EventType.STEP_SUCCEEDED, "e1", 1.0, step_id=f"lost{n}"))
        store.fail = True
        with pytest.raises(StoreError):
            commit()
        ckpt.event(Event(EventType.STEP_SUCCEEDED, "e1", 2.0, step_id=f"later{n}"))
        ckpt.record([], {})
        assert store.commits[-1].events == [
            ("step_succeeded", f"lost{n}"),
            ("step_succeeded", f"later{n}"),
        ]
    ckpt.release()
