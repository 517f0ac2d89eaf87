"""A side-effecting fallback tool on a run with a store: its call has a key of its own,
``RUN_ID:STEP:fallback`` (``RUN_ID:STEP:i:fallback`` for an item of a fan-out), so its intent
never conflicts with the step's own (the fallback's arguments differ), and a resume treats it
as any keyed call. It used to fail the step with ``IdempotencyConflictError`` (and a traceback
in the log) on every run with a store, while the same run without one succeeded degraded."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable
from typing import Any

import pytest
from pydantic import BaseModel

import planrail
from planrail.plan.tools import SideEffects, Tool
from planrail.store import Store, open_store
from planrail.testing import FakeClock
from planrail.types import StepStatus

from .dying_store import WALL, DyingStore, resume_later, run_until

S = StepStatus


class Ref(BaseModel):
    ref: str


@dataclasses.dataclass
class Ledger:
    """Every call, as (tool, idempotency key), and the effects made (a keyed tool makes one per
    key; an unsafe one, one per call)."""

    calls: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    effects: dict[str, str] = dataclasses.field(default_factory=dict)
    kill: dict[str, str] = dataclasses.field(default_factory=dict)
    """Tool -> a run id: that tool's first call in that run makes the store die after its
    effect and never returns (the runner is killed mid-call)."""
    store: DyingStore | None = None
    died: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)

    def keys(self, tool: str) -> list[str]:
        return [key for name, key in self.calls if name == tool]

    async def effect(self, tool: str, ctx: planrail.StepContext, keyed: bool) -> Ref:
        self.calls.append((tool, ctx.idempotency_key))
        key = ctx.idempotency_key if keyed else f"{ctx.idempotency_key}#{len(self.calls)}"
        ref = self.effects.setdefault(key, f"{tool}-{len(self.effects) + 1}")
        if self.kill.get(tool) == ctx.run_id and self.store is not None:
            del self.kill[tool]
            self.store.die()
            self.died.set()
            await asyncio.Event().wait()  # the process is gone: this call never returns
        return Ref(ref=ref)


def make_tools(ledger: Ledger, invoice_effects: SideEffects = "keyed") -> list[Tool]:
    @planrail.tool(side_effects="keyed")
    async def card(ctx: planrail.StepContext, amount: int) -> Ref:
        """Charge a card: the card is always declined."""
        ledger.calls.append(("card", ctx.idempotency_key))
        raise ValueError("card declined")

    @planrail.tool(side_effects=invoice_effects)
    async def invoice(ctx: planrail.StepContext, amount: int, late: bool) -> Ref:
        """Send an invoice instead (a side effect)."""
        return await ledger.effect("invoice", ctx, keyed=invoice_effects == "keyed")

    @planrail.tool(side_effects="keyed")
    async def receipt(ctx: planrail.StepContext, ref: str) -> Ref:
        """Mail a receipt for the payment."""
        return await ledger.effect("receipt", ctx, keyed=True)

    @planrail.tool(side_effects="none")
    async def amounts() -> list[int]:
        """What is owed (read-only)."""
        return [5, 7]

    return [card, invoice, receipt, amounts]


PLAN = {
    "goal": "get paid",
    "steps": [
        {
            "id": "pay",
            "tool": "card",
            "args": {"amount": 5},
            "fallback": {"tool": "invoice", "args": {"amount": 5, "late": True}},
        },
        {"id": "mail", "tool": "receipt", "args": {"ref": "${pay.ref}"}, "depends_on": ["pay"]},
    ],
}


def execution(tools: list[Tool], store: Store, plan: Any = PLAN) -> planrail.Execution:
    return planrail.prepare(
        plan, tools, store=store, run_id="RUN", approve=True, clock=FakeClock(wall=WALL)
    )


async def killed(ledger: Ledger, tools: list[Tool], url: str) -> None:
    """Run ``RUN`` until a ``ledger.kill`` call makes its store die, then stop the runner."""
    dying = ledger.store = DyingStore(url)
    await run_until(ledger.died, execution(tools, dying).run())
    dying.close()


def resumed(tools: list[Tool], url: str) -> Awaitable[planrail.RunResult]:
    return resume_later("RUN", tools, url)


async def test_a_side_effecting_fallback_succeeds_degraded_with_a_store(
    store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The card fails for good, the invoice (other arguments) is sent once, under its own key:
    the step succeeds degraded, as without a store, and nothing is logged as an error."""
    ledger = Ledger()
    tools = make_tools(ledger)
    store = open_store(store_url)
    with caplog.at_level(logging.WARNING, logger="planrail"):
        result = await execution(tools, store).run()

    assert result.status == "succeeded", result.why
    pay = result.steps["pay"]
    assert (pay.status, pay.degraded, pay.output) == (S.SUCCEEDED, True, {"ref": "invoice-1"})
    assert pay.reason == "used its fallback tool 'invoice' after: card declined"
    errors = [r.error["type"] for r in result.steps.values() if r.error is not None]
    assert "IdempotencyConflictError" not in errors
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    assert ledger.calls == [
        ("card", "RUN:pay"),
        ("invoice", "RUN:pay:fallback"),
        ("receipt", "RUN:mail"),
    ]
    intents = {i.step_key: i.idempotency_key for i in store.intents("RUN")}
    assert intents == {"pay": "RUN:pay", "pay:fallback": "RUN:pay:fallback", "mail": "RUN:mail"}
    stored = store.get_steps("RUN")["pay"]
    assert (stored.status, stored.degraded, stored.output) == (S.SUCCEEDED, True, pay.output)
    assert (stored.error or {}).get("type") != "IdempotencyConflictError"
    run = store.get_run("RUN")
    assert run is not None
    assert run.status == "succeeded"
    store.close()


async def test_each_item_of_a_fan_out_has_its_own_fallback_key(store_url: str) -> None:
    """Inside a fan-out, item ``i``'s fallback call is keyed ``RUN:STEP:i:fallback``."""
    ledger = Ledger()
    tools = make_tools(ledger)
    plan = {
        "goal": "get paid twice",
        "steps": [
            {"id": "owed", "tool": "amounts"},
            {
                "id": "pay",
                "tool": "card",
                "for_each": "${owed}",
                "args": {"amount": "${item}"},
                "max_parallel": 1,
                "fallback": {"tool": "invoice", "args": {"amount": "${item}", "late": True}},
                "depends_on": ["owed"],
            },
        ],
    }
    store = open_store(store_url)
    result = await execution(tools, store, plan).run()

    assert result.status == "succeeded", result.why
    assert result.steps["pay"].degraded
    assert ledger.keys("invoice") == ["RUN:pay:0:fallback", "RUN:pay:1:fallback"]
    assert {i.step_key for i in store.intents("RUN")} == {
        "pay:0",
        "pay:1",
        "pay:0:fallback",
        "pay:1:fallback",
    }
    store.close()


async def test_a_resume_after_the_fallback_was_committed_does_not_call_it_again(
    store_url: str,
) -> None:
    """Killed while ``mail`` runs, after ``pay``'s degraded outcome was committed: the resume
    restores ``pay`` (neither the card nor the invoice is called again) and runs ``mail``."""
    ledger = Ledger(kill={"receipt": "RUN"})
    tools = make_tools(ledger)
    await killed(ledger, tools, store_url)

    result = await resumed(tools, store_url)

    assert result.status == "succeeded", result.why
    assert ledger.keys("invoice") == ["RUN:pay:fallback"]
    assert ledger.keys("card") == ["RUN:pay"]
    assert ledger.keys("receipt") == ["RUN:mail", "RUN:mail"]
    assert result.steps["pay"].degraded
    assert result.steps["mail"].output == {"ref": "receipt-2"}
    with open_store(store_url) as store:
        pay = store.get_steps("RUN")["pay"]
    assert (pay.status, pay.degraded, pay.output) == (S.SUCCEEDED, True, {"ref": "invoice-1"})


async def test_a_fallback_cut_off_mid_call_is_called_again_with_its_key(store_url: str) -> None:
    """Killed during the invoice's call (after its effect): the step reruns on resume, and its
    keyed fallback is called again with the same key, which the tool deduplicates on."""
    ledger = Ledger(kill={"invoice": "RUN"})
    tools = make_tools(ledger)
    await killed(ledger, tools, store_url)

    result = await resumed(tools, store_url)

    assert result.status == "succeeded", result.why
    assert ledger.keys("invoice") == ["RUN:pay:fallback", "RUN:pay:fallback"]
    assert [k for k in ledger.effects if k.startswith("RUN:pay")] == ["RUN:pay:fallback"]
    assert result.steps["pay"].output == {"ref": "invoice-1"}
    with open_store(store_url) as store:
        intents = sorted(i.step_key for i in store.intents("RUN"))
    assert intents == ["mail", "pay", "pay:fallback"]


async def test_an_unsafe_fallback_cut_off_mid_call_is_in_doubt(store_url: str) -> None:
    """The same with an ``unsafe`` invoice tool: the resume does not call it, the step is in
    doubt (for ``planrail resolve``), as any unsafe call cut off."""
    ledger = Ledger(kill={"invoice": "RUN"})
    tools = make_tools(ledger, invoice_effects="unsafe")
    await killed(ledger, tools, store_url)

    result = await resumed(tools, store_url)

    assert result.status == "failed"
    assert result.steps["pay"].status == S.IN_DOUBT
    assert ledger.keys("invoice") == ["RUN:pay:fallback"]
    assert ledger.keys("card") == ["RUN:pay"]
    with open_store(store_url) as store:
        assert store.get_steps("RUN")["pay"].status == S.IN_DOUBT
