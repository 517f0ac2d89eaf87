"""An agent's policies hold for the whole agent run and travel with its stored runs: the
tool-call limit counts over the plan and its replans, the approval policy's steps are asked
about again on resume, and a run an operator refused is a ``refused`` result, not an error."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

import planrail
from planrail.agent import Agent, every_step
from planrail.engine import operations
from planrail.engine.approval import ApprovalRequiredError, defer
from planrail.store import open_store
from planrail.store.base import RunRecord, Store
from planrail.testing import ScriptedLLM

GOAL = "look things up"
CALLS: list[str] = []
"""The tools' own ledger: every call made."""


@planrail.tool(side_effects="none")
def look(q: str) -> dict[str, str]:
    CALLS.append(q)
    return {"q": q}


@planrail.tool(side_effects="none")
def broken(q: str) -> dict[str, str]:
    CALLS.append(q)
    raise ValueError(f"{q}: the index is down")


TOOLS = [look, broken]


def plan(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"goal": GOAL, "steps": list(steps)}


READ = plan({"id": "a", "tool": "look", "args": {"q": "a"}})


@pytest.fixture(autouse=True)
def _fresh_ledger() -> None:
    CALLS.clear()


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.db'}"


async def test_the_tool_call_limit_counts_over_the_plan_and_its_replans(
    store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Limit 2: the plan's one call fails; the replan's first call is the second, so its
    next is refused — the run stops with the limit's error (stored with its type), no
    traceback is logged, and no further replan is asked for (each version's guard started
    from zero: the replan called both steps, three calls in all)."""
    llm = ScriptedLLM(
        [
            plan({"id": "a", "tool": "broken", "args": {"q": "a"}}),
            plan(
                {"id": "b", "tool": "look", "args": {"q": "b"}},
                {"id": "c", "tool": "look", "args": {"q": "c"}, "depends_on": ["b"]},
            ),
            plan({"id": "d", "tool": "look", "args": {"q": "d"}}),
        ]
    )
    caplog.set_level(logging.DEBUG)
    with open_store(store_url) as store:
        agent = Agent(
            llm,
            TOOLS,
            store=store,
            run_id="ag",
            max_replans=5,
            security=planrail.SecurityPolicy(max_tool_calls=2),
        )
        result = await agent.run(GOAL)
        assert CALLS == ["a", "b"], "the tools' own ledger"
        assert result.status == "failed"
        assert result.replans == 1
        assert llm.remaining == 1, "no replan after the limit"
        assert result.reason is not None
        assert "limit of 2 tool calls (SecurityPolicy.max_tool_calls)" in result.reason
        stored = store.get_steps("ag-r1")
        assert stored["b"].status == "succeeded"
        assert (stored["c"].error or {})["type"] == "ToolCallLimitError"
        run = store.get_run("ag-r1")
        assert run is not None
        assert run.error is not None
        assert "max_tool_calls" in run.error["message"]
    assert [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR] == []


async def test_a_limit_spent_by_a_failed_call_ends_the_agent_run_without_a_replan() -> None:
    """The second call fails and spends the limit: no replan is asked for (none of its calls
    would be admitted), and the reason says why."""
    llm = ScriptedLLM(
        [plan({"id": f"s{n}", "tool": "broken", "args": {"q": f"s{n}"}}) for n in range(4)]
    )
    agent = Agent(llm, TOOLS, max_replans=3, security=planrail.SecurityPolicy(max_tool_calls=2))
    result = await agent.run(GOAL)
    assert CALLS == ["s0", "s1"]
    assert result.status == "failed"
    assert result.replans == 1
    assert llm.remaining == 2
    assert "not replanned" in (result.reason or "")
    assert "max_tool_calls" in (result.reason or "")


def _refusing(request: Any) -> bool:
    return False


async def refused_run(store: Store, approval: Any) -> RunRecord:
    """Run ``READ`` under ``every_step`` as ``ag``, refused (``approval`` None: nobody to
    ask): it is stored waiting for approval, nothing called."""
    agent = Agent(
        ScriptedLLM([READ]),
        TOOLS,
        store=store,
        run_id="ag",
        approval_policy=every_step,
        approval=approval,
    )
    assert (await agent.run(GOAL)).status == "refused"
    run = store.get_run("ag")
    assert run is not None
    assert run.status == "awaiting_approval"
    assert CALLS == []
    return run


@pytest.mark.parametrize("approval", [_refusing, None], ids=["refused", "no-approver"])
async def test_the_approval_policys_steps_are_asked_about_again_on_resume(
    store_url: str, approval: Any
) -> None:
    """Under ``every_step`` a read-only plan needs a yes; refused (or with nobody to ask),
    the run is stored waiting. The steps the policy named are stored with the run's policies,
    so a resume — given no approval policy, as ``planrail resume`` and MCP's ``resume_run``
    are — asks about them again: with no approver it does not start, deferred it stays
    waiting, and only an operator's approval lets it run (it ran under the default policy,
    which names no read-only step)."""
    with open_store(store_url) as store:
        run = await refused_run(store, approval)
        assert run.metadata["policies"]["approval_steps"] == ["a"]

        with pytest.raises(ApprovalRequiredError, match="step 'a'"):
            await planrail.resume("ag", TOOLS, store=store).run()
        waiting = await planrail.resume("ag", TOOLS, store=store, approver=defer).run()
        assert waiting.status == "awaiting_approval"
        asked = [e.data["steps"] for e in store.events("ag") if e.type == "approval_requested"]
        assert asked[-1] == ["a"]
        assert CALLS == [], "nothing ran without a yes"
        kept = store.get_run("ag")
        assert kept is not None
        assert kept.metadata["policies"]["approval_steps"] == ["a"], "kept over resumes"

        operations.approve(store, "ag", by="alice")
        done = await planrail.resume("ag", TOOLS, store=store).run()
    assert done.status == "succeeded"
    assert CALLS == ["a"]


async def test_the_default_approval_policy_stores_no_approval_steps(store_url: str) -> None:
    """The default policy (``side_effecting_steps``) is re-derived on resume: nothing is
    stored for it."""
    with open_store(store_url) as store:
        result = await Agent(ScriptedLLM([READ]), TOOLS, store=store, run_id="ag").run(GOAL)
        assert result.status == "succeeded"
        run = store.get_run("ag")
        assert run is not None
        assert "approval_steps" not in run.metadata["policies"]


async def test_an_agent_on_a_run_an_operator_refused_returns_refused(store_url: str) -> None:
    """``Agent.run`` never raises for a refused run: given the id of a run an operator
    refused, it returns ``refused`` with the reason, before any model is asked (it raised
    ApprovalRefusedError after paying for a plan)."""
    with open_store(store_url) as store:
        await refused_run(store, _refusing)
        operations.refuse(store, "ag", by="ops")
        llm = ScriptedLLM([READ])
        again = Agent(llm, TOOLS, store=store, run_id="ag", approval=lambda request: True)
        result = await again.run(GOAL)
    assert result.status == "refused"
    assert "was refused" in (result.reason or "")
    assert result.run is not None
    assert result.run.status == "cancelled"
    assert llm.requests == []
    assert CALLS == []
