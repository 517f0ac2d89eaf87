"""Budgets: model calls, tokens and cost over the whole run; overspending stops it cleanly."""

from __future__ import annotations

import json

import pytest

from planrail.agent import Agent, approve_all
from planrail.llm import Budget, BudgetMeter, Price, PriceTable, Usage
from planrail.llm.errors import BudgetExceededError
from planrail.testing.llm import Scripted, ScriptedLLM
from planrail.types import StepStatus

from .conftest import Kit
from .plans import FIRST_ANSWER_STEPS, GOAL, good_plan


async def test_token_budget_exceeded_stops_the_run(kit: Kit) -> None:
    """An llm_call step whose answer passes the input token budget stops the run: the step
    fails with the budget's reason, its dependent never runs, the run says why."""
    llm = ScriptedLLM(
        [
            Scripted(json.dumps(good_plan()), input_tokens=100, output_tokens=50),
            Scripted("A summary.", input_tokens=5_000, output_tokens=10),
        ]
    )
    budget = Budget(max_input_tokens=1_000)
    result = await Agent(llm, kit.tools, approval=approve_all, budget=budget).run(GOAL)

    assert result.status == "budget_exceeded"
    assert result.reason == (
        "the input token budget is exceeded: 5,100 tokens used, the limit is 1,000"
    )
    assert result.run is not None
    summary = result.run.steps["summary"]
    assert summary.status == StepStatus.FAILED
    assert summary.error is not None
    assert summary.error["type"] == "BudgetExceededError"
    assert result.run.steps["mail"].status != StepStatus.SUCCEEDED
    assert "send_email" not in kit.names()
    assert result.usage["input_tokens"] == 5_100
    assert any(e.type == "budget_exceeded" for e in result.trace)


async def test_call_budget_counts_planning_and_repairs(kit: Kit) -> None:
    """A plan that needs a repair cannot be made within a one-call budget; nothing runs."""
    llm = ScriptedLLM([{"goal": GOAL, "steps": FIRST_ANSWER_STEPS}, good_plan()])
    result = await Agent(llm, kit.tools, approval=approve_all, budget=Budget(max_llm_calls=1)).run(
        GOAL
    )
    assert result.status == "budget_exceeded"
    assert result.reason == "the LLM call budget is spent (1 calls)"
    assert kit.calls == []
    assert len(llm.requests) == 1


async def test_cost_budget_uses_the_price_table(kit: Kit) -> None:
    """Cost is priced per model from the table; passing the limit stops the run."""
    prices = PriceTable({"scripted": Price(1_000.0, 0.0)})  # $0.001 per input token
    llm = ScriptedLLM([Scripted(json.dumps(good_plan()), input_tokens=2_000)])
    result = await Agent(
        llm, kit.tools, approval=approve_all, budget=Budget(max_cost=1.0), prices=prices
    ).run(GOAL)
    assert result.status == "budget_exceeded"
    assert result.reason == "the cost budget is exceeded: 2.0000 spent, limit 1.0"
    assert result.usage["cost"] == 2.0


def test_meter_refuses_every_call_after_an_overspend() -> None:
    """Once exceeded, the meter refuses further calls with the same error."""
    meter = BudgetMeter(Budget(max_output_tokens=10))
    with pytest.raises(BudgetExceededError) as first:
        meter.charge("m", Usage(1, 11, 1))
    with pytest.raises(BudgetExceededError) as again:
        meter.before_call()
    assert again.value is first.value
    assert first.value.fatal
    assert first.value.limit == "output_tokens"


def test_budget_and_prices_are_validated_values() -> None:
    """Negative limits are refused; prices are looked up with or without the provider prefix."""
    with pytest.raises(ValueError, match="max_llm_calls"):
        Budget(max_llm_calls=-1)
    table = PriceTable.from_mapping({"gpt-4.1-mini": {"input": 0.4, "output": 1.6}})
    assert table.cost("openai:gpt-4.1-mini", Usage(1_000_000, 1_000_000)) == pytest.approx(2.0)
    assert table.cost("other", Usage(10, 10)) == 0.0


@pytest.mark.parametrize("price", [float("nan"), float("inf"), -0.5])
def test_a_price_that_is_not_a_finite_number_at_least_zero_is_refused(price: float) -> None:
    """A NaN price made every cost NaN, and a NaN cost never exceeds a budget."""
    from planrail.llm.budget import PriceTable

    with pytest.raises(ValueError, match="the output price of 'm' must be a number >= 0"):
        PriceTable.from_mapping({"m": {"input": 1.0, "output": price}})


def test_a_base_url_that_is_not_http_is_refused_when_the_client_is_made() -> None:
    """It failed on the first request, after planning had started, as a run failure."""
    from planrail.llm import open_llm
    from planrail.llm.errors import LLMRequestError

    with pytest.raises(LLMRequestError, match="base_url must be an http"):
        open_llm("openai:x", base_url="localhost:8080/v1")
