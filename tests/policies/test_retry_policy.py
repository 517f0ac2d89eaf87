"""RetryPolicy as a value: exact delays, jitter bounds, Retry-After, and error classification."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from planrail.engine.actions import ArgumentError
from planrail.errors import RetryableError
from planrail.plan.model import RetrySpec
from planrail.policies import RetryPolicy, classify, retry_after_of
from planrail.policies.limits import AttemptTimeoutError, StepTimeoutError
from planrail.testing import http_error


class FixedRandom:
    """An RNG stub returning one value, to pin jitter to its bounds."""

    def __init__(self, value: float) -> None:
        self.value = value

    def random(self) -> float:
        return self.value


def test_delays_grow_exponentially_up_to_the_cap() -> None:
    """delay_for(n) is initial * backoff**(n-1), capped at max_delay (no jitter)."""
    policy = RetryPolicy(max_attempts=10, initial_delay=0.5, backoff=3, max_delay=10, jitter=0)
    rng = random.Random(0)
    assert [policy.delay_for(n, rng) for n in range(1, 6)] == [0.5, 1.5, 4.5, 10, 10]


def test_jitter_stays_within_its_bounds_at_both_extremes() -> None:
    """With jitter j the delay is base * [1 - j, 1 + j]: the RNG's 0 and ~1 give the bounds."""
    policy = RetryPolicy(max_attempts=3, initial_delay=2, backoff=2, jitter=0.25)
    assert policy.delay_for(2, FixedRandom(0.0)) == 3.0
    assert policy.delay_for(2, FixedRandom(0.5)) == 4.0
    assert policy.delay_for(2, FixedRandom(1.0)) == 5.0


@given(attempt=st.integers(1, 100), seed=st.integers(0, 2**32), jitter=st.floats(0, 1))
def test_every_jittered_delay_is_within_bounds(attempt: int, seed: int, jitter: float) -> None:
    """For any attempt and seed the delay is within the jitter band around the capped base."""
    policy = RetryPolicy(max_attempts=100, initial_delay=1, backoff=2, max_delay=30, jitter=jitter)
    base = min(2.0 ** (attempt - 1), 30.0)
    delay = policy.delay_for(attempt, random.Random(seed))
    assert base * (1 - jitter) - 1e-9 <= delay <= base * (1 + jitter) + 1e-9


def test_huge_backoff_never_overflows() -> None:
    """A large backoff at a late attempt gives max_delay, not an OverflowError."""
    policy = RetryPolicy(max_attempts=100, initial_delay=1, backoff=1e300, max_delay=7, jitter=0)
    assert policy.delay_for(99, random.Random()) == 7


def test_retry_after_is_a_lower_bound() -> None:
    """A Retry-After longer than the backoff wins; a shorter one does not shorten the wait."""
    policy = RetryPolicy(max_attempts=3, initial_delay=1, jitter=0)
    assert policy.delay_for(1, random.Random(), retry_after=30) == 30
    assert policy.delay_for(1, random.Random(), retry_after=0.2) == 1


@pytest.mark.parametrize(
    "bad",
    [
        {"max_attempts": 0},
        {"initial_delay": -1},
        {"max_delay": -0.5},
        {"backoff": 0.5},
        {"jitter": 1.5},
        {"initial_delay": float("inf")},
    ],
)
def test_invalid_values_are_refused(bad: dict[str, float]) -> None:
    """Negative delays, zero attempts, shrinking backoff and out-of-range jitter raise."""
    with pytest.raises(ValueError, match=next(iter(bad))):
        RetryPolicy(**bad)  # type: ignore[arg-type]


def test_from_spec_copies_the_plan_fields() -> None:
    """A plan's RetrySpec (or a tool's mapping) becomes the equivalent policy."""
    spec = RetrySpec(
        max_attempts=4, initial_delay=0.1, backoff=3, max_delay=2, jitter=0, retry_on=("KeyError",)
    )
    policy = RetryPolicy.from_spec(spec)
    assert policy == RetryPolicy(4, 0.1, 3, 2, 0, frozenset({"KeyError"}))
    assert RetryPolicy.from_spec({"max_attempts": 2}).max_attempts == 2
    assert RetryPolicy.from_spec(None).max_attempts == 1


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (RetryableError("busy"), True),
        (AttemptTimeoutError("slow"), True),
        (StepTimeoutError("out of time"), False),
        (TimeoutError(), True),
        (ConnectionResetError(), True),
        (ArgumentError("bad args"), False),
        (ValueError("nope"), False),
        (KeyError("k"), False),
        (http_error(429), True),
        (http_error(500), True),
        (http_error(503), True),
        (http_error(400), False),
        (http_error(404), False),
        (http_error(422), False),
    ],
)
def test_classification(exc: Exception, expected: bool) -> None:
    """Transient errors (own, timeouts, connection, 429, 5xx) retry; validation and 4xx do not."""
    assert classify(exc) is expected


def test_cancellation_is_never_retryable() -> None:
    """CancelledError and KeyboardInterrupt are not Exceptions and never retry."""
    import asyncio

    assert classify(asyncio.CancelledError()) is False
    assert classify(KeyboardInterrupt(), retry_on=("KeyboardInterrupt",)) is False


def test_retry_on_lists_extra_types_and_statuses() -> None:
    """retry_on names exception classes (short or qualified) or HTTP statuses to retry too."""
    assert classify(KeyError("x"), ("KeyError",)) is True
    assert classify(KeyError("x"), ("builtins.KeyError",)) is True
    assert classify(http_error(409), ("409",)) is True
    assert classify(http_error(409), ("408",)) is False


def test_duck_typed_sdk_errors_by_class_name() -> None:
    """Errors named like httpx/openai ones are recognised without importing those libraries."""
    names = {
        "ReadTimeout": True,
        "ConnectError": True,
        "APIConnectionError": True,
        "RateLimitError": True,
        "ValidationError": False,
    }
    for name, expected in names.items():
        cls = type(name, (Exception,), {})
        assert classify(cls()) is expected, name
    timeout_cls = type("TimeoutException", (Exception,), {})
    assert classify(type("ConnectTimeout", (timeout_cls,), {})()) is True


def test_real_httpx_and_openai_errors() -> None:
    """The real httpx and openai exception classes are classified as documented."""
    httpx = pytest.importorskip("httpx")
    openai = pytest.importorskip("openai")
    request = httpx.Request("GET", "https://example.invalid")
    assert classify(httpx.ReadTimeout("slow", request=request)) is True
    assert classify(httpx.ConnectError("refused", request=request)) is True
    for status, expected in ((429, True), (502, True), (401, False), (404, False)):
        response = httpx.Response(status, request=request, headers={"retry-after": "7"})
        err = httpx.HTTPStatusError("x", request=request, response=response)
        assert classify(err) is expected, status
        assert retry_after_of(err) == 7
        api_err = openai.APIStatusError("x", response=response, body=None)
        assert classify(api_err) is expected, status
    assert classify(openai.APITimeoutError(request=request)) is True
    assert classify(openai.APIConnectionError(request=request)) is True


def test_retry_after_hints() -> None:
    """Hints come from retry_after, Retry-After-Ms, Retry-After seconds or an HTTP date."""
    assert retry_after_of(RetryableError("x", retry_after=2.5)) == 2.5
    assert retry_after_of(http_error(429, retry_after=12)) == 12
    assert retry_after_of(http_error(429)) is None
    assert retry_after_of(ValueError()) is None
    dated = http_error(503, retry_after="Wed, 21 Oct 2015 07:28:30 GMT")
    assert retry_after_of(dated, now=1445412500.0) == 10.0
    assert retry_after_of(dated) is None
