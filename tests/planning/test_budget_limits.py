"""Budget limits are numbers a spend can pass: NaN (never exceeded), infinity, fractions of a
call and booleans are refused when the budget is made, naming the field."""

from __future__ import annotations

import math
from typing import Any

import pytest

from planrail.llm import Budget, BudgetMeter, Price, PriceTable, Usage
from planrail.llm.errors import BudgetExceededError

COUNTS = ("max_llm_calls", "max_input_tokens", "max_output_tokens")


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, -0.5])
def test_a_cost_limit_that_is_not_a_finite_number_at_least_zero_is_refused(value: float) -> None:
    with pytest.raises(ValueError, match=r"max_cost must be a number >= 0"):
        Budget(max_cost=value)


@pytest.mark.parametrize("value", [True, False, "1.0", [1]])
def test_a_cost_limit_that_is_not_a_number_is_a_type_error(value: Any) -> None:
    with pytest.raises(TypeError, match="max_cost"):
        Budget(max_cost=value)


@pytest.mark.parametrize("name", COUNTS)
@pytest.mark.parametrize("value", [math.nan, math.inf, 1.5, 2.0, True, False, "3"])
def test_a_call_or_token_limit_that_is_not_a_whole_number_is_a_type_error(
    name: str, value: Any
) -> None:
    with pytest.raises(TypeError, match=f"{name} must be a whole number >= 0"):
        Budget(**{name: value})


@pytest.mark.parametrize("name", COUNTS)
def test_a_negative_call_or_token_limit_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match=f"{name} must be >= 0"):
        Budget(**{name: -1})


def test_whole_and_finite_limits_are_kept_as_given() -> None:
    budget = Budget(max_llm_calls=0, max_input_tokens=10**12, max_output_tokens=5, max_cost=0)
    assert (budget.max_llm_calls, budget.max_input_tokens, budget.max_output_tokens) == (
        0,
        10**12,
        5,
    )
    assert Budget(max_cost=2.5).max_cost == 2.5
    assert Budget() == Budget(None, None, None, None)


def test_a_cost_limit_is_passed_once_spent() -> None:
    """What a NaN limit never allowed: the spend exceeds it."""
    meter = BudgetMeter(Budget(max_cost=0.01), PriceTable({"m": Price(1_000_000.0, 0.0)}))
    with pytest.raises(BudgetExceededError, match="cost budget is exceeded"):
        meter.charge("m", Usage(input_tokens=1, output_tokens=0))


@pytest.mark.parametrize("price", [math.nan, math.inf, -1.0])
def test_prices_share_the_same_check(price: float) -> None:
    with pytest.raises(ValueError, match=r"the input price of 'm' must be a number >= 0 \(not"):
        PriceTable.from_mapping({"m": {"input": price}})
