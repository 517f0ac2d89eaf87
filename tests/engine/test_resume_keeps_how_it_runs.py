"""A run started with ``max_concurrency`` or ``failure_mode="fail_fast"`` resumes so: both are
stored with its policies, and a resume that says nothing of them (``planrail resume`` given
neither option; MCP ``resume_run`` and the dashboard pass none) runs as it last ran. A resume
used to run with neither: up to 64 calls at once against an API the run was limited to one at
a time for, and on past a failure it was told to stop at."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import planrail
from planrail.engine import operations
from planrail.engine.approval import defer
from planrail.store import open_store

CALLS: list[str] = []
RUNNING: dict[str, int] = {"now": 0, "peak": 0}
FAILING = {"bad"}


@planrail.tool(side_effects="keyed")
async def call_api(name: str) -> str:
    """Records the calls under way at once; those in ``FAILING`` (``bad``) fail for good."""
    CALLS.append(name)
    RUNNING["now"] += 1
    RUNNING["peak"] = max(RUNNING["peak"], RUNNING["now"])
    try:
        await asyncio.sleep(0)  # the others may start meanwhile, if nothing holds them
        await asyncio.sleep(0)
        if name in FAILING:
            raise ValueError("the API said no")
        return name
    finally:
        RUNNING["now"] -= 1


def _plan(*names: str) -> dict[str, Any]:
    steps = [{"id": n, "tool": "call_api", "args": {"name": n}} for n in names]
    return {"goal": "call the API", "steps": steps}


async def _approved_waiting(store_url: str, plan: dict[str, Any], **options: Any) -> None:
    """Run ``R`` of ``plan`` started with ``options``, stored waiting for approval (nothing
    called), then approved by an operator: a resume runs every step."""
    with open_store(store_url) as store:
        first = planrail.prepare(
            plan, [call_api], store=store, run_id="R", approver=defer, **options
        )
        assert (await first.run()).status == "awaiting_approval"
        operations.approve(store, "R")


@pytest.mark.parametrize("resume_with", [{}, {"max_concurrency": 3}], ids=["stored", "given"])
async def test_a_resume_runs_with_the_runs_max_concurrency(
    store_url: str, resume_with: dict[str, Any]
) -> None:
    CALLS.clear()
    RUNNING.update(now=0, peak=0)
    plan = _plan("a", "b", "c")
    await _approved_waiting(store_url, plan, max_concurrency=1)
    with open_store(store_url) as store:  # another process's resume
        done = await planrail.resume("R", [call_api], store=store, **resume_with).run()
        kept = store.get_run("R")
    assert done.status == "succeeded"
    assert sorted(CALLS) == ["a", "b", "c"]
    assert RUNNING["peak"] == (1 if not resume_with else 3)
    assert kept is not None
    stored = kept.metadata["policies"]["execution"]
    assert stored == {"max_concurrency": resume_with.get("max_concurrency", 1)}


async def test_a_resume_of_a_fail_fast_run_stops_at_its_first_failure(store_url: str) -> None:
    """``bad`` fails first (one call at a time, in plan order): fail-fast, ``later`` is never
    called — on the resume as on the run it resumes."""
    CALLS.clear()
    plan = _plan("bad", "later")
    options: dict[str, Any] = {"max_concurrency": 1, "failure_mode": "fail_fast"}
    await _approved_waiting(store_url, plan, **options)
    with open_store(store_url) as store:
        done = await planrail.resume("R", [call_api], store=store).run()
    assert done.status == "failed"
    assert CALLS == ["bad"]
    assert done.steps["later"].status in ("skipped", "cancelled")


async def test_a_resume_given_continue_turns_fail_fast_off_from_then_on(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``failure_mode="continue"`` given to a resume is the run's from then on (``planrail
    resume --no-fail-fast``): ``bad`` fails and ``also_bad`` is called still, on that resume
    and on the next, given nothing. Only an unset ``failure_mode`` keeps the stored one;
    ``continue`` was taken for unset, so a fail-fast run could never go on past a failure."""
    monkeypatch.setattr(__name__ + ".FAILING", {"bad", "also_bad"})
    plan = _plan("bad", "also_bad")
    options: dict[str, Any] = {"max_concurrency": 1, "failure_mode": "fail_fast"}
    await _approved_waiting(store_url, plan, **options)
    for given in ({"failure_mode": "continue"}, {}):
        CALLS.clear()
        with open_store(store_url) as store:
            done = await planrail.resume("R", [call_api], store=store, **given).run()
            kept = store.get_run("R")
        assert done.status == "failed"
        assert CALLS == ["bad", "also_bad"]
        assert done.steps["also_bad"].status == "failed"
        assert kept is not None
        assert kept.metadata["policies"]["execution"] == {"max_concurrency": 1}
