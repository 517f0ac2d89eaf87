"""Budgets for a run's LLM use: calls, input and output tokens, and cost.

:class:`Budget` and :class:`PriceTable` are frozen values; :class:`BudgetMeter` is the tally of
one run, shared by every model call in it — planning, repairs, replans and ``llm_call`` steps.
:class:`MeteredLLM` wraps any client so each call is checked before it is made and charged
after it answers. Overspending raises :class:`~planrail.llm.errors.BudgetExceededError`, whose
``fatal`` flag tells the executor to stop the whole run, not just the step.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from planrail.llm.base import LLM, LLMResponse, LLMStream, Message, Usage
from planrail.llm.errors import BudgetExceededError

__all__ = ["Budget", "BudgetMeter", "MeteredLLM", "Price", "PriceTable"]


@dataclass(frozen=True, slots=True)
class Budget:
    """Most a run may spend on models; ``None`` means no limit."""

    max_llm_calls: int | None = None
    """Model calls in all (planning and repairs included)."""
    max_input_tokens: int | None = None
    """Prompt tokens in all."""
    max_output_tokens: int | None = None
    """Completion tokens in all."""
    max_cost: float | None = None
    """Money in all, in the unit of the :class:`PriceTable` (US dollars by default)."""

    def __post_init__(self) -> None:
        # A NaN limit is never exceeded and 1.5 calls is no count: refused, naming the field.
        for name in ("max_llm_calls", "max_input_tokens", "max_output_tokens"):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be a whole number >= 0 or None, got {value!r}")
            if value < 0:
                raise ValueError(f"{name} must be >= 0, got {value!r}")
        if self.max_cost is not None:
            if isinstance(self.max_cost, bool) or not isinstance(self.max_cost, int | float):
                raise TypeError(f"max_cost must be a number >= 0 or None, got {self.max_cost!r}")
            _at_least_zero(self.max_cost, "max_cost")


@dataclass(frozen=True, slots=True)
class Price:
    """What one million tokens cost."""

    input_per_million: float
    output_per_million: float


@dataclass(frozen=True, slots=True)
class PriceTable:
    """Prices by model name. A model not listed costs ``default`` (zero unless set)."""

    prices: Mapping[str, Price] = field(default_factory=dict)
    default: Price = Price(0.0, 0.0)

    def price(self, model: str) -> Price:
        """The price of ``model``, trying it with and without its ``provider:`` prefix."""
        bare = model.split(":", 1)[1] if ":" in model else model
        return self.prices.get(model) or self.prices.get(bare) or self.default

    def cost(self, model: str, usage: Usage) -> float:
        p = self.price(model)
        return (
            usage.input_tokens * p.input_per_million + usage.output_tokens * p.output_per_million
        ) / 1_000_000

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> PriceTable:
        """From ``{"model": {"input": 0.4, "output": 1.6}, ...}`` (per million tokens); a
        ValueError names a price that is not a finite number >= 0 (a NaN price made every
        cost NaN, and no budget can be exceeded by NaN)."""
        return cls({name: Price(_price(p, "input", name), _price(p, "output", name))
                    for name, p in data.items()})  # fmt: skip


def _price(entry: Any, key: str, model: str) -> float:
    return _at_least_zero(float(entry.get(key, 0.0)), f"the {key} price of {model!r}")


def _at_least_zero(value: float, what: str) -> float:
    """``value`` when it is a finite number >= 0, else a ValueError naming ``what``: NaN
    passes no comparison, so a NaN price or limit would let any spending through."""
    if not 0 <= value < math.inf:
        raise ValueError(f"{what} must be a number >= 0 (not NaN or infinite), got {value!r}")
    return value


class BudgetMeter:
    """One run's spending so far, checked against its :class:`Budget`."""

    def __init__(self, budget: Budget | None = None, prices: PriceTable | None = None) -> None:
        self.budget = budget or Budget()
        self.prices = prices or PriceTable()
        self.usage = Usage()
        self.cost = 0.0
        self.exceeded: BudgetExceededError | None = None
        """The first overspend, once there is one; every later call is refused with it."""

    def before_call(self) -> None:
        """Refuse a call the budget no longer allows (its calls spent, or a limit already
        passed: a resumed run's meter starts from what the run had spent)."""
        if self.exceeded is not None:
            raise self.exceeded
        limit = self.budget.max_llm_calls
        if limit is not None and self.usage.calls >= limit:
            self._stop("llm_calls", f"the LLM call budget is spent ({limit} calls)")
        self._check()

    def charge(self, model: str, usage: Usage) -> None:
        """Add one answered call; raises :class:`BudgetExceededError` if a limit is now passed."""
        self.usage += Usage(usage.input_tokens, usage.output_tokens, max(usage.calls, 1))
        self.cost += self.prices.cost(model, usage)
        self._check()

    def _check(self) -> None:
        b = self.budget
        if b.max_input_tokens is not None and self.usage.input_tokens > b.max_input_tokens:
            self._stop(
                "input_tokens",
                f"the input token budget is exceeded: {self.usage.input_tokens:,} tokens used,"
                f" the limit is {b.max_input_tokens:,}",
            )
        if b.max_output_tokens is not None and self.usage.output_tokens > b.max_output_tokens:
            self._stop(
                "output_tokens",
                f"the output token budget is exceeded: {self.usage.output_tokens:,} tokens"
                f" used, the limit is {b.max_output_tokens:,}",
            )
        if b.max_cost is not None and self.cost > b.max_cost:
            self._stop(
                "cost", f"the cost budget is exceeded: {self.cost:.4f} spent, limit {b.max_cost}"
            )

    def _stop(self, limit: str, message: str) -> None:
        self.exceeded = BudgetExceededError(message, limit=limit)
        raise self.exceeded

    def to_dict(self) -> dict[str, Any]:
        return {**self.usage.to_dict(), "cost": round(self.cost, 6)}

    @property
    def limited(self) -> bool:
        """Some limit is set (a meter without one has nothing to keep with a run)."""
        b = self.budget
        return any(
            v is not None
            for v in (b.max_llm_calls, b.max_input_tokens, b.max_output_tokens, b.max_cost)
        )

    def record(self) -> dict[str, Any]:
        """What a run stores to apply this budget again when it is resumed: the limits, the
        prices and what was spent so far (the run's own ``llm_call`` steps keep their usage
        in their records, so a run stores this when it opens, before any of them ran)."""
        b, p = self.budget, self.prices
        return {
            "limits": {
                "max_llm_calls": b.max_llm_calls,
                "max_input_tokens": b.max_input_tokens,
                "max_output_tokens": b.max_output_tokens,
                "max_cost": b.max_cost,
            },
            "prices": {m: [x.input_per_million, x.output_per_million] for m, x in p.prices.items()},
            "default_price": [p.default.input_per_million, p.default.output_per_million],
            "spent": {**self.usage.to_dict(), "cost": self.cost},
        }

    @classmethod
    def from_record(cls, data: Mapping[str, Any]) -> BudgetMeter:
        """The meter :meth:`record` stored, with its spend (a ValueError or TypeError if
        ``data`` is not such a record)."""
        prices = data["prices"]
        table = PriceTable(
            {m: Price(float(i), float(o)) for m, (i, o) in prices.items()},
            Price(*map(float, data["default_price"])),
        )
        meter = cls(Budget(**data["limits"]), table)
        spent = data["spent"]
        meter.usage = Usage(
            int(spent["input_tokens"]), int(spent["output_tokens"]), int(spent["calls"])
        )
        meter.cost = float(spent["cost"])
        return meter

    def add_spent(self, model: str, usage: Mapping[str, Any]) -> None:
        """Count a recorded ``llm_call`` step's usage (``StepResult.usage``) as spent, without
        checking it (it was checked when it was spent)."""
        used = Usage(
            int(usage.get("input_tokens", 0)),
            int(usage.get("output_tokens", 0)),
            int(usage.get("calls", 0)),
        )
        self.usage += used
        self.cost += self.prices.cost(model, used)


class MeteredLLM:
    """An :class:`LLM` whose every call is checked against, and charged to, a meter."""

    def __init__(self, llm: LLM, meter: BudgetMeter) -> None:
        self.llm = llm
        self.meter = meter
        self.model = llm.model
        self.supports_streaming = llm.supports_streaming
        self.context_window: int | None = getattr(llm, "context_window", None)
        """The wrapped model's context size, when it says (the planner's prompt choice)."""

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        schema: dict[str, Any] | None = None,
        schema_name: str = "answer",
        model: str | None = None,
    ) -> LLMResponse:
        self.meter.before_call()
        response = await self.llm.complete(
            messages, schema=schema, schema_name=schema_name, model=model
        )
        try:
            self.meter.charge(model or self.model, response.usage)
        except BudgetExceededError as exc:  # it says what the overspending answer used
            raise exc.spent_on(response.usage) from None
        return response

    def stream(
        self,
        messages: Sequence[Message],
        *,
        schema: dict[str, Any] | None = None,
        schema_name: str = "answer",
        model: str | None = None,
    ) -> LLMStream:
        self.meter.before_call()
        inner = self.llm.stream(messages, schema=schema, schema_name=schema_name, model=model)
        return _MeteredStream(inner, self.meter, model or self.model)


class _MeteredStream:
    def __init__(self, inner: LLMStream, meter: BudgetMeter, model: str) -> None:
        self.inner = inner
        self.meter = meter
        self.model = model
        self.response: LLMResponse | None = None

    async def __aiter__(self) -> AsyncIterator[str]:
        async for delta in self.inner:
            yield delta
        self.response = self.inner.response
        if self.response is not None:
            self.meter.charge(self.model, self.response.usage)
