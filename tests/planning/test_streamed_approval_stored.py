"""A streamed plan (the default of ``planrail plan``) stopped at its approval is recorded as a
plan that did not stream is: ``awaiting_approval``, with the whole plan and the read-only steps
that ran while it streamed. It used to leave no record at all, so ``planrail plan`` with no
terminal to ask on printed ``planrail approve RUN_ID`` for a run nobody could find; and the
early steps' events — their ``policy_decision`` among them — were never stored, so a resume
counted fewer tool calls against ``SecurityPolicy.max_tool_calls`` than were made."""

from __future__ import annotations

import json

import pytest

import planrail
from planrail.agent import Agent, approve_all
from planrail.engine import operations
from planrail.policies.security import ToolCallLimitError
from planrail.store import open_store
from planrail.testing.llm import Scripted, ScriptedLLM

from .conftest import Kit, streamed_good_plan
from .plans import GOAL, good_plan


@pytest.mark.parametrize("answer", [None, False], ids=["deferred", "refused"])
async def test_a_streamed_plan_stopped_at_its_approval_is_stored_waiting(
    kit: Kit, store_url: str, answer: bool | None
) -> None:
    """Deferred or refused, the run is stored waiting with the whole plan; an operator's
    approval lets a resume run the rest, without calling the early read-only step again."""
    store = open_store(store_url)
    try:
        agent = Agent(
            streamed_good_plan(kit),
            kit.tools,
            approval=lambda _r: answer,
            store=store,
            stream=True,
            run_id="R",
        )
        first = await agent.run(GOAL)
        record = store.get_run("R")
        steps = store.get_steps("R")
        events = [e.type for e in store.events("R")]
        assert kit.names() == ["search"], "nothing that changes the world ran"

        operations.approve(store, "R", by="alice")
        done = await planrail.resume(
            "R", kit.tools, store=store, llm=ScriptedLLM(["A summary."])
        ).run()
    finally:
        store.close()
    assert first.status == "refused"
    assert first.run is not None
    assert first.run.status == "awaiting_approval"
    assert first.runs == [first.run]
    word = "deferred" if answer is None else "refused"
    assert first.reason is not None
    assert f"approval {word} for acct, mail" in first.reason
    assert record is not None
    assert record.status == "awaiting_approval"
    assert [s["id"] for s in record.plan["steps"]] == ["find", "summary", "acct", "mail"]
    assert record.approval is None
    assert steps["find"].status == "succeeded"
    decided = "approval_deferred" if answer is None else "approval_refused"
    assert events[-3:] == ["approval_requested", decided, "run_finished"]
    assert "policy_decision" not in events  # no security policy: nothing decided
    assert done.status == "succeeded", done.why
    assert kit.names() == ["search", "create_account", "send_email"]


async def test_a_streamed_deferral_without_a_store_is_refused_as_a_sealed_one_is(
    kit: Kit,
) -> None:
    """With no store to keep a deferral in, the streamed run says so, as a plan that did not
    stream does (it said "approval refused")."""
    agent = Agent(streamed_good_plan(kit), kit.tools, approval=lambda _r: None, stream=True)
    result = await agent.run(GOAL)
    assert result.status == "refused"
    assert result.reason == (
        "the approver deferred the decision, but this run has no store to keep it in"
    )
    assert kit.names() == ["search"]


async def test_a_resume_counts_the_tool_calls_a_stream_made_before_its_seal(
    kit: Kit, store_url: str
) -> None:
    """Three calls are allowed: ``find`` (early), ``acct`` and ``mail`` (which fails). The
    resume would make a fourth: refused, as the stored ``policy_decision`` events say three
    were admitted. The early one used to be missing from the store (and mail sent again)."""
    kit.fail_email = 1
    store = open_store(store_url)
    try:
        agent = Agent(
            streamed_good_plan(kit, Scripted("A summary.")),
            kit.tools,
            approval=approve_all,
            store=store,
            stream=True,
            run_id="R",
            security=planrail.SecurityPolicy(max_tool_calls=3),
        )
        first = await agent.run(GOAL)
        events = store.events("R")
        again = await planrail.resume("R", kit.tools, store=store).run()
    finally:
        store.close()
    assert first.status == "failed"
    decided = [e.step_id for e in events if e.type == "policy_decision"]
    assert decided == ["find", "acct", "mail"]
    types = [e.type for e in events]
    assert types.index("run_approved") < types.index("step_started", types.index("run_approved"))
    assert again.status == "failed"
    assert again.steps["mail"].error is not None
    assert again.steps["mail"].error["type"] == ToolCallLimitError.__name__
    assert kit.names() == ["search", "create_account", "send_email"], "not sent again"


async def test_a_plan_deferred_before_its_runner_started_is_stored_waiting(
    kit: Kit, store_url: str
) -> None:
    """The whole plan arrives in one chunk: its approval is deferred before the open run's
    runner has started anything. The run is stored waiting all the same (the seal makes the
    record, not the runner), its lease released, nothing called."""
    with open_store(store_url) as store:
        llm = ScriptedLLM([json.dumps(good_plan())])
        agent = Agent(
            llm, kit.tools, approval=lambda _r: None, store=store, stream=True, run_id="R"
        )
        first = await agent.run(GOAL)
        record = store.get_run("R")
        lease = store.get_lease("R")
    assert first.run is not None
    assert first.run.status == "awaiting_approval"
    assert record is not None
    assert record.status == "awaiting_approval"
    assert lease is None
    assert kit.names() == []
