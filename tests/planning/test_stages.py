"""Stages at run time: each llm_call sees its own stage's sub-goal; a confirm stage's check
that answers no stops the run at the boundary, and a replan keeps the finished stages. Also:
a replan that re-issues a finished identical call is caught by the repeated-call guard."""

from __future__ import annotations

import json
from typing import Any

from planrail.agent import Agent, approve_all
from planrail.engine.stages import VERDICT_SCHEMA
from planrail.testing.llm import ScriptedLLM
from planrail.types import StepStatus

from .conftest import Kit
from .plans import GOAL

RESEARCH = "Find the top paper on graph planning"
MAILING = "Email Alice about the top paper"

PLAN: dict[str, Any] = {
    "goal": GOAL,
    "steps": [
        {"id": "find", "tool": "search", "args": {"query": "graph planning"}},
        {"id": "pick", "action": "llm_call", "prompt": "Pick one of ${find.titles}",
         "depends_on": ["find"]},
        {"id": "acct", "tool": "create_account", "args": {"name": "Alice", "email": "a@x.org"}},
        {"id": "draft", "action": "llm_call", "prompt": "Write a note about ${pick}",
         "depends_on": ["pick"]},
        {"id": "mail", "tool": "send_email",
         "args": {"user_id": "${acct.user_id}", "subject": "Papers", "body": "${draft}"},
         "depends_on": ["acct", "draft"]},
    ],
    "stages": [
        {"id": "research", "goal": RESEARCH, "steps": ["find", "pick"]},
        {"id": "mailing", "goal": MAILING, "steps": ["acct", "draft", "mail"], "confirm": True},
    ],
}  # fmt: skip

REPLAN: dict[str, Any] = {
    "goal": GOAL,
    "steps": [
        {"id": "acct2", "tool": "create_account", "args": {"name": "Alice", "email": "a@x.org"}},
        {"id": "mail2", "tool": "send_email",
         "args": {"user_id": "${acct2.user_id}", "subject": "Papers", "body": "${pick}"},
         "depends_on": ["acct2", "pick"]},
    ],
    "stages": [{"id": "mailing2", "goal": MAILING, "steps": ["acct2", "mail2"], "confirm": True}],
}  # fmt: skip


def search_then_mail(find: str, mail: str) -> dict[str, Any]:
    """A search, then an email of its top hit, under the given step ids."""
    return {
        "goal": GOAL,
        "steps": [
            {"id": find, "tool": "search", "args": {"query": "graph planning"}},
            {"id": mail, "tool": "send_email",
             "args": {"user_id": "u_1", "subject": "Papers", "body": f"${{{find}.top}}"},
             "depends_on": [find]},
        ],
    }  # fmt: skip


def no_stages(plan: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in plan.items() if k != "stages"}


async def test_an_llm_step_sees_the_goal_anchor_and_only_its_own_stage_goal(kit: Kit) -> None:
    """Each llm_call's system message is the goal anchor, then its own stage's sub-goal; the
    other stage's sub-goal appears nowhere in its request."""
    plan = {**PLAN, "stages": [{**PLAN["stages"][0]}, {**PLAN["stages"][1], "confirm": False}]}
    llm = ScriptedLLM([plan, "graph planning 1", "Dear Alice"])
    result = await Agent(llm, kit.tools, approval=approve_all).run(GOAL)
    assert result.status == "succeeded", result.reason
    pick, draft = llm.requests[1], llm.requests[2]
    assert pick.messages[0].content.startswith(f"Goal: {GOAL}\nStage goal: {RESEARCH}\n\n")
    assert MAILING not in pick.text
    assert draft.messages[0].content.startswith(f"Goal: {GOAL}\nStage goal: {MAILING}\n\n")
    assert RESEARCH not in draft.text


async def test_an_unstaged_llm_step_sees_only_the_goal_anchor(kit: Kit) -> None:
    """Without stages the prompt is unchanged: the goal anchor, then the instructions."""
    llm = ScriptedLLM([no_stages(PLAN), "graph planning 1", "Dear Alice"])
    result = await Agent(llm, kit.tools, approval=approve_all).run(GOAL)
    assert result.status == "succeeded", result.reason
    assert "Stage goal" not in llm.requests[1].text


async def test_a_confirmed_stage_starts_after_its_check(kit: Kit) -> None:
    """The check runs once every earlier stage's step has finished and before any step of
    the stage starts (acct depends on nothing, yet waits); it sees the finished stages'
    sub-goals and outputs, asks for the verdict schema, and "ok" lets the stage run."""
    called_before_check: list[list[str]] = []

    def verdict(_request: Any) -> dict[str, Any]:
        called_before_check.append(kit.names())
        return {"ok": True, "reason": "a paper was picked"}

    llm = ScriptedLLM([PLAN, "graph planning 1", verdict, "Dear Alice"])
    result = await Agent(llm, kit.tools, approval=approve_all).run(GOAL)
    assert result.status == "succeeded", result.reason
    assert called_before_check == [["search"]]
    assert kit.names() == ["search", "create_account", "send_email"]
    check = llm.requests[2]
    assert check.schema == VERDICT_SCHEMA
    assert check.messages[0].content.startswith(f"Goal: {GOAL}\nStage goal: {MAILING}\n\n")
    block = check.messages[1].content.split('<data name="inputs">\n', 1)[1]
    inputs = json.loads(block.split("\n</data>", 1)[0])
    assert inputs == {
        "finished_stages": [
            {
                "stage": "research",
                "sub_goal": RESEARCH,
                "steps": {"find": {"titles": ["graph planning 1", "graph planning 2"],
                                   "top": "graph planning 1"},
                          "pick": "graph planning 1"},
            }
        ]
    }  # fmt: skip
    checked = [e for e in result.trace if e.type == "stage_checked"]
    assert [e.data["ok"] for e in checked] == [True]


async def test_a_check_that_says_no_stops_the_run_at_the_boundary(kit: Kit) -> None:
    """ "no" fails the boundary: the stage's steps are skipped with the reason, nothing of the
    stage is called, the finished stage stays succeeded and the run fails saying why."""
    llm = ScriptedLLM([PLAN, "graph planning 1", {"ok": False, "reason": "no paper was picked"}])
    result = await Agent(llm, kit.tools, approval=approve_all).run(GOAL)
    assert result.status == "failed"
    assert kit.names() == ["search"]
    run = result.run
    assert run is not None
    assert run.rejected_stages == {"mailing": "no paper was picked"}
    assert run.error == "stage 'mailing' was not confirmed: no paper was picked"
    assert result.reason == run.error
    assert run.steps["pick"].status == StepStatus.SUCCEEDED
    for sid in ("acct", "draft"):
        assert run.steps[sid].status == StepStatus.SKIPPED
        assert run.steps[sid].reason == "stage 'mailing' was not confirmed: no paper was picked"
    assert run.steps["mail"].status == StepStatus.SKIPPED


async def test_with_replanning_a_rejected_stage_leads_to_a_replan_keeping_finished_stages(
    kit: Kit,
) -> None:
    """With max_replans, the "no" leads to a replan: the prompt says which stage was not
    confirmed and why, the finished stage is kept (its steps restored, not run again, its
    stage first in the new plan), and the new stage runs after its own check says yes."""
    llm = ScriptedLLM(
        [
            PLAN,
            "graph planning 1",
            {"ok": False, "reason": "the note must cite the paper"},
            REPLAN,
            {"ok": True, "reason": "a paper was picked"},
        ]
    )
    result = await Agent(llm, kit.tools, approval=approve_all, max_replans=1).run(GOAL)
    assert result.status == "succeeded", result.reason
    assert result.replans == 1
    assert kit.names() == ["search", "create_account", "send_email"]
    replan_prompt = llm.requests[3].messages[-1].content
    assert (
        f"- stage mailing (sub-goal: {MAILING}) was not confirmed before it started: the note"
        " must cite the paper. Its steps did not run: acct, draft, mail." in replan_prompt
    )
    assert f"Finished stages, kept as they are: research (sub-goal: {RESEARCH})" in replan_prompt
    assert result.plan is not None
    assert [(s.id, s.steps) for s in result.plan.stages] == [
        ("research", ("find", "pick")),
        ("mailing2", ("acct2", "mail2")),
    ]
    restored = {e.step_id for e in result.trace if e.type == "step_restored"}
    assert restored == {"find", "pick"}


async def test_a_replan_that_reissues_a_finished_identical_call_is_caught(kit: Kit) -> None:
    """The replan asks for the search that already succeeded, with the same arguments: the
    guard refuses it (reference the kept output instead) and search runs only once."""
    kit.fail_email = 1
    first, replan = search_then_mail("find", "mail"), search_then_mail("find_again", "mail_again")
    llm = ScriptedLLM([first, replan])
    result = await Agent(llm, kit.tools, approval=approve_all, max_replans=1).run(GOAL)
    assert result.status == "failed"
    assert kit.names().count("search") == 1
    run = result.run
    assert run is not None
    error = run.steps["find_again"].error
    assert error is not None
    assert error["type"] == "RepeatedCallError"
    assert "same arguments as step 'find', which succeeded before the replan" in error["message"]
    assert run.steps["mail_again"].status == StepStatus.SKIPPED
