"""Resume semantics (design §5, invariant 5) on every store backend.

A first runner "dies" at a chosen moment (``helpers.DyingStore``: nothing it does afterwards
reaches the store); a second runner resumes from the store, past the first one's lease.
"""

from __future__ import annotations

import dataclasses

import pytest

from planrail.engine.checkpoint import PlanMismatchError, args_hash, load_result
from planrail.engine.executor import Execution
from planrail.testing import FakeClock
from planrail.types import StepStatus

from .conftest import Opener
from .helpers import LEASE_TTL, WALL, Ledger, crash_run, make_plan, make_tools, resume

S = StepStatus


async def test_succeeded_steps_never_rerun_and_their_stored_outputs_feed_dependents(
    open_store: Opener,
) -> None:
    """Killed while ``c`` runs: on resume ``a`` and ``b`` are restored, not called again, and
    ``c`` receives the token ``b`` stored before the crash."""
    ledger = Ledger(crash={"c": "before_effect"})
    tools = make_tools(ledger)
    plan = make_plan(tools)
    await crash_run(plan, tools, ledger, open_store(), "r1")
    b_token = ledger.effects_of("b")[0].token

    result = await resume(plan, tools, open_store(), "r1")

    assert result.status == "succeeded"
    assert [len(ledger.called(s)) for s in "abfg"] == [1, 1, 1, 1]
    assert ledger.called("c")[-1].inputs == [b_token]
    assert result.steps["b"].output["token"] == b_token
    assert len(ledger.effects_of("c")) == 1


async def test_failed_and_skipped_steps_are_retried_on_resume(open_store: Opener) -> None:
    """A run that finished ``failed`` (``f`` failed, ``g`` skipped) resumes: ``f`` and ``g`` run,
    the succeeded ``a``, ``b``, ``c`` do not."""
    ledger = Ledger(fail_once={"f"})
    tools = make_tools(ledger)
    plan = make_plan(tools)
    first = await resume(plan, tools, open_store(), "r2", later=0.0)
    assert first.status == "failed"
    assert (first.steps["f"].status, first.steps["g"].status) == (S.FAILED, S.SKIPPED)
    stored = load_result(open_store(), "r2")
    assert (stored.steps["f"].status, stored.steps["g"].status) == (S.FAILED, S.SKIPPED)

    second = await resume(plan, tools, open_store(), "r2")

    assert second.status == "succeeded"
    assert [len(ledger.called(s)) for s in "abcfg"] == [1, 1, 1, 2, 1]
    assert load_result(open_store(), "r2").status == "succeeded"


@pytest.mark.parametrize("moment", ["before_effect", "after_effect"])
async def test_unfinished_keyed_step_reruns_with_the_same_key(
    open_store: Opener, moment: str
) -> None:
    """Killed inside ``b`` (a keyed tool) before or after its effect: the resumed run calls it
    again with the same idempotency key and arguments, so its effect happens exactly once."""
    ledger = Ledger(crash={"b": moment})  # type: ignore[dict-item]
    tools = make_tools(ledger)
    plan = make_plan(tools)
    await crash_run(plan, tools, ledger, open_store(), "r3")
    assert load_result(open_store(), "r3").steps["b"].status == S.RUNNING

    result = await resume(plan, tools, open_store(), "r3")

    assert result.status == "succeeded"
    first, second = ledger.called("b")
    assert first.key == second.key == "r3:b"
    assert first.inputs == second.inputs
    assert len(ledger.effects_of("b")) == 1
    assert ledger.called("c")[0].inputs == [ledger.effects_of("b")[0].token]


async def test_unfinished_unsafe_step_is_in_doubt_and_reported(open_store: Opener) -> None:
    """Killed inside ``b`` whose tool is ``unsafe``: the resume does not call it again; it is
    ``in_doubt`` in the result and in the store, its dependent waits, the run is failed with an
    error that says how to decide, and the independent branch completes."""
    ledger = Ledger(crash={"b": "after_effect"})
    tools = make_tools(ledger)
    plan = make_plan(tools, b_tool="unsafe")
    await crash_run(plan, tools, ledger, open_store(), "r4")

    result = await resume(plan, tools, open_store(), "r4")

    assert len(ledger.called("b")) == 1
    assert ledger.called("c") == []
    assert result.status == "failed"
    assert result.steps["b"].status == S.IN_DOUBT
    assert "planrail resolve" in (result.error or "")
    assert result.steps["c"].status == S.PENDING
    assert (result.steps["f"].status, result.steps["g"].status) == (S.SUCCEEDED, S.SUCCEEDED)
    stored = load_result(open_store(), "r4")
    assert stored.status == "failed"
    assert stored.steps["b"].status == S.IN_DOUBT, "`planrail show` must report in_doubt too"

    again = await resume(plan, tools, open_store(), "r4", later=200.0)
    assert again.steps["b"].status == S.IN_DOUBT
    assert len(ledger.called("b")) == 1, "an in-doubt step is never re-run without a decision"


async def test_a_changed_plan_is_refused(open_store: Opener) -> None:
    """Resuming a run id with another plan raises PlanMismatchError and calls nothing."""
    ledger = Ledger(fail_once={"f"})
    tools = make_tools(ledger)
    await resume(make_plan(tools), tools, open_store(), "r5", later=0.0)
    calls = len(ledger.calls)
    other = make_plan(tools, c_arg="step")

    with pytest.raises(PlanMismatchError, match="another plan"):
        await resume(other, tools, open_store(), "r5")
    assert len(ledger.calls) == calls


async def test_a_key_reused_with_other_arguments_fails_the_step(open_store: Opener) -> None:
    """``b``'s intent (key ``r6:b``) is recorded, then the run dies; before the resume, ``a``'s
    stored output is changed (as an operator's edit or a restored backup would), so ``b``'s
    arguments differ under the same key: ``b`` fails with IdempotencyConflictError before its
    tool is called, and its dependent is skipped."""
    ledger = Ledger(crash={"b": "before_effect"})
    tools = make_tools(ledger)
    plan = make_plan(tools)
    await crash_run(plan, tools, ledger, open_store(), "r6")
    store = open_store()
    # b and g start in the same loop turn, so their intents share one commit (group commit).
    assert [i.idempotency_key for i in store.intents("r6")] == ["r6:a", "r6:b", "r6:f", "r6:g"]
    a = store.get_steps("r6")["a"]
    store.commit(steps=[dataclasses.replace(a, output={"step": "a", "token": "forged"})])
    calls = len(ledger.called("b"))

    result = await resume(plan, tools, open_store(), "r6")

    assert result.steps["b"].status == S.FAILED
    assert result.steps["b"].error["type"] == "IdempotencyConflictError"
    assert len(ledger.called("b")) == calls, "the tool must not be called with a reused key"
    assert result.steps["c"].status == S.SKIPPED
    assert result.status == "failed"
    (intent,) = [i for i in open_store().intents("r6") if i.idempotency_key == "r6:b"]
    assert intent.args_hash == args_hash({"step": "b", "inputs": [a.output["token"]]})


async def test_resuming_a_succeeded_run_calls_nothing(open_store: Opener) -> None:
    """A run that succeeded, resumed: every step restored, no tool called, same outputs."""
    ledger = Ledger()
    tools = make_tools(ledger)
    plan = make_plan(tools)
    first = await resume(plan, tools, open_store(), "r7", later=0.0)
    calls = len(ledger.calls)

    again = Execution(
        plan,
        tools,
        store=open_store(),
        run_id="r7",
        clock=FakeClock(wall=WALL + 1),
        lease_ttl=LEASE_TTL,
        approve=True,
    )
    second = await again.run()

    assert again.resumed
    assert len(ledger.calls) == calls
    assert second.status == "succeeded"
    assert {s: r.output for s, r in second.steps.items()} == {
        s: r.output for s, r in first.steps.items()
    }
