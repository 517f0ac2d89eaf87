"""A run's LLM budget is stored with it: a resume (the API or ``planrail resume``) spends
from what the run had left, it does not start a new budget."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

import planrail
from planrail.agent import Agent, approve_all
from planrail.cli.app import app
from planrail.llm import Budget
from planrail.store import open_store
from planrail.testing.llm import Scripted, ScriptedLLM
from planrail.testing.llm_server import LLMTestServer, Reply

from .conftest import Kit
from .plans import GOAL, good_plan
from .test_cli_plan import _calls, _tools


async def _first_run(
    kit: Kit, url: str, budget: Budget, *answers: Scripted | dict[str, Any], ends: str
) -> str:
    """An Agent run under ``budget`` on the store ``url`` that ends ``ends``; its run id."""
    store = open_store(url)
    try:
        llm = ScriptedLLM(answers)
        agent = Agent(llm, kit.tools, approval=approve_all, budget=budget, store=store)
        result = await agent.run(GOAL)
    finally:
        store.close()
    assert result.status == ends, result.reason
    assert result.run is not None
    return result.run.run_id


async def _spent_run(kit: Kit, url: str, budget: Budget, *answers: Scripted) -> str:
    """An Agent run under ``budget`` that ends ``budget_exceeded``; its run id."""
    return await _first_run(kit, url, budget, *answers, ends="budget_exceeded")


async def _resumed(
    kit: Kit, url: str, run_id: str, *answers: Scripted
) -> tuple[planrail.RunResult, ScriptedLLM]:
    """``run_id`` resumed in a new runner (a new store object over ``url``) with a new model
    scripted with ``answers`` (one summary if none)."""
    fresh = ScriptedLLM(answers or [Scripted("A summary.", input_tokens=1, output_tokens=1)])
    store = open_store(url)
    try:
        result = await planrail.resume(run_id, kit.tools, store=store, llm=fresh).run()
    finally:
        store.close()
    return result, fresh


def _budget_kept(url: str, run_id: str, step_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The budget stored with the run (its limits and what was spent when it opened), and the
    usage stored with the step ``step_id``."""
    with open_store(url) as store:
        run = store.get_run(run_id)
        step = store.get_steps(run_id)[step_id]
    assert run is not None
    return run.metadata["policies"]["budget"], step.metadata.get("usage") or {}


async def test_a_resume_does_not_ask_the_model_once_the_token_budget_is_spent(
    kit: Kit, store_url: str
) -> None:
    """The step that overspent kept its usage, and the run's record says the budget stopped
    it: resumed, the run still has nothing to spend, so the model is not asked again and
    nothing downstream runs."""
    plan = Scripted(json.dumps(good_plan()), input_tokens=100, output_tokens=10)
    summary = Scripted("A summary.", input_tokens=5_000, output_tokens=10)
    run_id = await _spent_run(kit, store_url, Budget(max_input_tokens=1_000), plan, summary)
    with open_store(store_url) as store:
        record = store.get_run(run_id)
    assert record is not None
    assert record.status == "cancelled"
    assert record.error is not None  # the record says why (it said only "cancelled")
    assert "input token budget is exceeded" in record.error["message"]
    kept, usage = _budget_kept(store_url, run_id, "summary")
    assert (kept["limits"]["max_input_tokens"], kept["spent"]["input_tokens"]) == (1_000, 100)
    assert usage.get("input_tokens") == 5_000

    result, fresh = await _resumed(kit, store_url, run_id)

    assert fresh.requests == []  # the model was not asked
    assert result.status == "failed"
    error = result.steps["summary"].error
    assert error is not None
    assert error["type"] == "BudgetExceededError"
    assert "5,100 tokens used" in error["message"]
    assert "send_email" not in kit.names()


async def test_a_resume_counts_the_planning_calls_of_its_run(kit: Kit, store_url: str) -> None:
    """Planning spent the one call the budget allowed; the llm_call step was refused. A resume
    is refused the call too (a new budget would have allowed it)."""
    plan = Scripted(json.dumps(good_plan()), input_tokens=100, output_tokens=10)
    run_id = await _spent_run(kit, store_url, Budget(max_llm_calls=1), plan)

    result, fresh = await _resumed(kit, store_url, run_id)

    assert fresh.requests == []
    assert result.status == "failed"
    error = result.steps["summary"].error
    assert error is not None
    assert error["type"] == "BudgetExceededError"
    assert "send_email" not in kit.names()


async def test_a_resume_spends_what_the_run_has_left_of_its_calls(kit: Kit, store_url: str) -> None:
    """A budget of 3 LLM calls: planning spends one, ``summary`` a second, then the mail fails
    and the run stops. Resumed with a new model, ``second`` gets the one call left and
    ``third`` is refused before it is asked (a new budget would have allowed both)."""
    plan = good_plan()
    plan["steps"] += [
        {
            "id": "second",
            "action": "llm_call",
            "prompt": "Say more of ${mail.message_id}",
            "depends_on": ["mail"],
        },
        {
            "id": "third",
            "action": "llm_call",
            "prompt": "And more: ${second}",
            "depends_on": ["second"],
        },
    ]
    kit.fail_email = 1
    summary = Scripted("A summary.", input_tokens=1, output_tokens=1)
    run_id = await _first_run(kit, store_url, Budget(max_llm_calls=3), plan, summary, ends="failed")
    assert kit.names().count("send_email") == 1
    kept, usage = _budget_kept(store_url, run_id, "summary")
    assert (kept["limits"]["max_llm_calls"], kept["spent"]["calls"], usage.get("calls")) == (
        3,
        1,
        1,
    )

    more = [Scripted(text, input_tokens=1, output_tokens=1) for text in ("More.", "Even more.")]
    result, fresh = await _resumed(kit, store_url, run_id, *more)

    assert len(fresh.requests) == 1, "one call was left"
    assert kit.names().count("send_email") == 2
    assert result.status == "failed"
    assert result.steps["second"].status == "succeeded"
    assert (result.steps["third"].error or {}).get("type") == "BudgetExceededError"
    with open_store(store_url) as store:
        stored = store.get_steps(run_id)
    assert stored["second"].status == "succeeded"
    assert (stored["third"].error or {}).get("type") == "BudgetExceededError"


def test_planrail_resume_keeps_the_budget_of_planrail_plan(
    tmp_path: Path, server: LLMTestServer, store_url: str
) -> None:
    """``planrail plan --max-llm-calls 1`` spends its call on the plan; ``planrail resume
    --model`` of that run asks the model nothing (exit 1, the budget named)."""
    module, log = _tools(tmp_path)
    server.add(Reply.json(good_plan()))
    base = ["--tools", str(module), "--store", store_url]
    llm = ["--model", "openai:test-model", "--base-url", server.url]
    first = CliRunner().invoke(
        app, ["plan", GOAL, *base, *llm, "--yes", "--max-llm-calls", "1", "--run-id", "r1"]
    )
    assert first.exit_code == 1, first.output
    assert len(server.completions) == 1

    server.add("A summary.")
    again = CliRunner().invoke(app, ["resume", "r1", *base, *llm, "--yes"])

    assert again.exit_code == 1, again.output
    assert "LLM call budget is spent" in again.output
    assert "Traceback" not in again.output
    assert len(server.completions) == 1  # the server was not asked again
    assert "send_email" not in _calls(log)


async def test_running_the_plan_again_under_its_run_id_keeps_the_budget(
    kit: Kit, store_url: str
) -> None:
    """``prepare(plan, run_id=..., store=..., llm=...)`` — what ``planrail run PLAN --run-id``
    does — continues the stored run, and its budget with it."""
    plan = Scripted(json.dumps(good_plan()), input_tokens=100, output_tokens=10)
    run_id = await _spent_run(kit, store_url, Budget(max_llm_calls=1), plan)
    fresh = ScriptedLLM([Scripted("A summary.", input_tokens=1, output_tokens=1)])
    store = open_store(store_url)
    try:
        record = store.get_run(run_id)
        assert record is not None
        execution = planrail.prepare(record.plan, kit.tools, store=store, run_id=run_id, llm=fresh)
        result = await execution.run()
    finally:
        store.close()
    assert fresh.requests == []
    assert result.steps["summary"].status == "failed"
    assert "send_email" not in kit.names()
