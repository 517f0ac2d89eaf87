"""A streamed plan (the default of ``planrail plan``) is checkpointed from its first step,
before the plan is whole: once it is sealed, the run's record holds the whole plan, its
approval and its policies. It used to keep the plan as it was when the run opened (no step),
so a resume of a failed or crashed streamed run validated an empty plan and "succeeded" at
once, doing nothing of what was left."""

from __future__ import annotations

import json

import pytest

import planrail
from planrail.agent import Agent, approve_all
from planrail.store import open_store
from planrail.testing.llm import Scripted

from .conftest import Kit, streamed_good_plan
from .plans import GOAL, good_plan


@pytest.mark.parametrize("held", [True, False], ids=["sealed-after-opening", "sealed-first"])
async def test_a_failed_streamed_run_resumes_its_whole_plan(
    kit: Kit, store_url: str, held: bool
) -> None:
    """The plan streams in two chunks: the first ends with the read-only ``find`` step. Held,
    the second waits until ``find``'s tool is called, so the run has opened (and recorded
    itself) before the plan is whole. Not held, the plan is whole before the run has opened
    its checkpoint (which the seal used to open as well: a second runner of the same run,
    refused with ``RunBusyError``). The record holds the whole sealed plan and its approval;
    a new runner's resume runs what is left."""
    kit.fail_email = 1  # the mail step fails for good (no retry) the first time
    with open_store(store_url) as store:
        llm = streamed_good_plan(kit, Scripted("A summary."), held=held)
        agent = Agent(llm, kit.tools, approval=approve_all, store=store, stream=True)
        first = await agent.run(GOAL)
    assert first.status == "failed"
    assert first.run is not None
    run_id = first.run.run_id
    with open_store(store_url) as store:
        record = store.get_run(run_id)
        assert record is not None
        assert [s["id"] for s in record.plan["steps"]] == ["find", "summary", "acct", "mail"]
        assert record.approval is not None
        assert record.status == "failed"

        again = await planrail.resume(run_id, kit.tools, store=store).run()
        stored = {sid: r.status for sid, r in store.get_steps(run_id).items()}
    assert again.status == "succeeded", again.why
    assert set(again.steps) == {"find", "summary", "acct", "mail"}
    assert kit.names().count("send_email") == 2  # failed once, then sent on resume
    assert kit.names().count("search") == 1  # the finished steps were not run again
    assert kit.names().count("create_account") == 1
    assert stored == dict.fromkeys(("acct", "find", "mail", "summary"), "succeeded")


async def test_a_repaired_stream_with_a_store_runs_its_final_plan_once(
    kit: Kit, store_url: str
) -> None:
    """The first answer dispatches ``find`` early but names an unknown tool; the repair also
    changes ``find``'s arguments. The open execution is cancelled and the final plan runs under
    the same run id: it used to meet the record of the open plan (no step) and fail with
    ``PlanMismatchError`` raised out of ``Agent.run``, nothing of the final plan run. A new
    runner finds the final plan recorded, and resumed, calls nothing again."""
    bad = good_plan()
    bad["steps"][2]["tool"] = "create_acount"  # unknown: repaired
    good = good_plan()
    good["steps"][0]["args"]["query"] = "graph planning 2024"  # the early step rewritten

    with open_store(store_url) as store:
        llm = streamed_good_plan(kit, json.dumps(good), "A summary.", plan=bad)
        agent = Agent(llm, kit.tools, approval=approve_all, store=store, stream=True, run_id="R")
        result = await agent.run(GOAL)
    with open_store(store_url) as store:
        record = store.get_run("R")
        again = await planrail.resume("R", kit.tools, store=store).run()
    assert result.status == "succeeded", result.reason
    assert record is not None
    assert [s["id"] for s in record.plan["steps"]] == ["find", "summary", "acct", "mail"]
    assert record.plan["steps"][0]["args"] == {"query": "graph planning 2024"}
    assert again.status == "succeeded"
    assert [args["query"] for name, args in kit.calls if name == "search"] == [
        "graph planning",  # early, with the first answer's arguments
        "graph planning 2024",  # the final plan's
    ]
    assert kit.names().count("create_account") == 1
    assert kit.names().count("send_email") == 1
