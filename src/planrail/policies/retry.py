"""Retry policy: how many attempts, how long to wait between them, and which errors are worth it.

:class:`RetryPolicy` is a frozen value with one pure method, :meth:`RetryPolicy.delay_for`; the
engine owns the loop and the sleeping. :func:`classify` decides whether an error is transient.
It recognises ``httpx`` and ``openai``/``anthropic`` errors by their class names and attributes
(``status_code``, ``response.status_code``, ``response.headers``), so planrail never imports them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any, Protocol

from planrail.errors import PlanrailError
from planrail.plan.model import RetrySpec

__all__ = ["NO_RETRY", "Random", "RetryPolicy", "classify", "retry_after_of", "status_code_of"]


class Random(Protocol):
    """Where jitter comes from: anything with ``random() -> float`` in ``[0, 1)``."""

    def random(self) -> float: ...


_RETRYABLE_NAMES = frozenset(
    {
        # httpx: timeouts (connect/read/write/pool), network errors, a peer that broke the protocol
        "TimeoutException",
        "ConnectTimeout",
        "ReadTimeout",
        "WriteTimeout",
        "PoolTimeout",
        "NetworkError",
        "ConnectError",
        "ReadError",
        "WriteError",
        "CloseError",
        "RemoteProtocolError",
        # openai / anthropic SDKs
        "APITimeoutError",
        "APIConnectionError",
        "RateLimitError",
        "InternalServerError",
        "OverloadedError",
        "ServiceUnavailableError",
    }
)
"""Exception class names (anywhere in the MRO) that mean "try again"."""

_NEVER_NAMES = frozenset(
    {
        # pydantic and SDK validation errors, and requests planrail itself built wrongly
        "ValidationError",
        "APIResponseValidationError",
        "LocalProtocolError",
        "UnsupportedProtocol",
        "InvalidURL",
    }
)
"""Exception class names that are never retried unless ``retry_on`` lists them."""


def _names(exc: BaseException) -> set[str]:
    out: set[str] = set()
    for cls in type(exc).__mro__:
        out.add(cls.__name__)
        out.add(f"{cls.__module__}.{cls.__qualname__}")
    return out


def _attr(obj: Any, name: str) -> Any:
    try:
        return getattr(obj, name, None)
    except Exception:  # a property that raises tells us nothing
        return None


def status_code_of(exc: BaseException) -> int | None:
    """The HTTP status an error carries (``status_code``, ``response.status_code``, ``status``)."""
    for holder, name in (
        (exc, "status_code"),
        (_attr(exc, "response"), "status_code"),
        (exc, "status"),
    ):
        value = _attr(holder, name) if holder is not None else None
        if type(value) is int and 100 <= value <= 599:
            return value
    return None


def classify(exc: BaseException, retry_on: Iterable[str] = ()) -> bool:
    """Whether ``exc`` is worth another attempt.

    In order: cancellation and other non-``Exception`` errors never retry; a class name or HTTP
    status listed in ``retry_on`` always does; a :class:`~planrail.PlanrailError` says so itself
    (``RetryableError`` and attempt timeouts do); HTTP 429 and 5xx retry, other 4xx do not;
    validation errors do not; httpx/openai timeout, connection and rate-limit errors,
    ``TimeoutError`` and ``ConnectionError`` do. Anything else does not.
    """
    if not isinstance(exc, Exception):
        return False
    listed = frozenset(retry_on)
    status = status_code_of(exc)
    if listed and (_names(exc) & listed or (status is not None and str(status) in listed)):
        return True
    if isinstance(exc, PlanrailError):
        return bool(exc.retryable)
    if status is not None:
        return status == 429 or status >= 500
    names = {cls.__name__ for cls in type(exc).__mro__}
    if names & _NEVER_NAMES:
        return False
    if names & _RETRYABLE_NAMES:
        return True
    return isinstance(exc, TimeoutError | ConnectionError)


def retry_after_of(exc: BaseException, now: float | None = None) -> float | None:
    """Seconds the error asks us to wait: ``exc.retry_after``, or a ``Retry-After-Ms`` /
    ``Retry-After`` header on ``exc.response`` (seconds, or an HTTP date when ``now`` — wall
    clock seconds — is given). ``None`` when there is no usable hint."""
    value = _attr(exc, "retry_after")
    if type(value) in (int, float) and math.isfinite(value):
        return max(0.0, float(value))
    headers = _attr(_attr(exc, "response"), "headers")
    if headers is None:
        headers = _attr(exc, "headers")
    if headers is None or not callable(_attr(headers, "get")):
        return None
    try:
        ms = headers.get("retry-after-ms") or headers.get("Retry-After-Ms")
        raw = headers.get("retry-after") or headers.get("Retry-After")
    except Exception:
        return None
    if ms is not None:
        seconds = _number(ms)
        if seconds is not None:
            return max(0.0, seconds / 1000)
    if raw is None:
        return None
    seconds = _number(raw)
    if seconds is not None:
        return max(0.0, seconds)
    if now is not None:
        try:
            return max(0.0, parsedate_to_datetime(str(raw)).timestamp() - now)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
    return None


def _number(raw: Any) -> float | None:
    try:
        value = float(str(raw).strip())
    except ValueError:
        return None
    return value if math.isfinite(value) else None


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a step retries: attempts, capped exponential backoff with jitter, what to retry.

    The delay after attempt ``n`` fails is ``min(initial_delay * backoff**(n-1), max_delay)``,
    multiplied by a random factor in ``[1 - jitter, 1 + jitter]``, and never less than the
    error's ``Retry-After``.
    """

    max_attempts: int = 1
    """Attempts in all, the first included (1 = no retry)."""
    initial_delay: float = 1.0
    """Seconds before the first retry."""
    backoff: float = 2.0
    """Each delay is the previous one times this (>= 1)."""
    max_delay: float = 60.0
    """No delay is longer than this before jitter (a ``Retry-After`` may be longer)."""
    jitter: float = 0.1
    """Each delay is multiplied by a random factor in ``[1 - jitter, 1 + jitter]`` (0..1)."""
    retry_on: frozenset[str] = field(default_factory=frozenset)
    """Extra exception class names (``"KeyError"``, ``"mylib.Busy"``) or HTTP statuses
    (``"409"``) to retry, besides those :func:`classify` finds retryable."""

    def __post_init__(self) -> None:
        if type(self.max_attempts) is not int or self.max_attempts < 1:
            raise ValueError(f"max_attempts must be an integer >= 1, got {self.max_attempts!r}")
        for name in ("initial_delay", "max_delay"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        if not math.isfinite(self.backoff) or self.backoff < 1:
            raise ValueError(f"backoff must be a finite number >= 1, got {self.backoff!r}")
        if not 0 <= self.jitter <= 1:
            raise ValueError(f"jitter must be between 0 and 1, got {self.jitter!r}")

    @classmethod
    def from_spec(cls, spec: RetrySpec | Mapping[str, Any] | None) -> RetryPolicy:
        """The policy a plan's ``retry`` object (or a tool's ``retry=`` mapping) describes."""
        if spec is None:
            return NO_RETRY
        if not isinstance(spec, RetrySpec):
            spec = RetrySpec.model_validate(dict(spec))
        return cls(
            max_attempts=spec.max_attempts,
            initial_delay=spec.initial_delay,
            backoff=spec.backoff,
            max_delay=spec.max_delay,
            jitter=spec.jitter,
            retry_on=frozenset(spec.retry_on),
        )

    def to_dict(self) -> dict[str, Any]:
        """The policy as plain JSON data (what :meth:`from_spec` reads back)."""
        return {
            "max_attempts": self.max_attempts,
            "initial_delay": self.initial_delay,
            "backoff": self.backoff,
            "max_delay": self.max_delay,
            "jitter": self.jitter,
            "retry_on": sorted(self.retry_on),
        }

    def base_delay(self, attempt: int) -> float:
        """The delay after attempt ``attempt`` (1-based) fails, before jitter and Retry-After."""
        if attempt < 1:
            raise ValueError("attempts are numbered from 1")
        if self.initial_delay == 0 or self.max_delay == 0:
            return 0.0
        # compare logarithms so that a large backoff**attempt can never overflow
        exponent = (attempt - 1) * math.log(self.backoff)
        if math.log(self.initial_delay) + exponent >= math.log(self.max_delay):
            return self.max_delay
        return float(self.initial_delay * self.backoff ** (attempt - 1))

    def delay_for(self, attempt: int, rng: Random, retry_after: float | None = None) -> float:
        """Seconds to wait after attempt ``attempt`` (1-based) failed, before the next one.

        ``rng`` supplies the jitter (only ``rng.random()`` is called, once, and only when
        ``jitter > 0``); ``retry_after`` is the error's own hint and is a lower bound.
        """
        delay = self.base_delay(attempt)
        if self.jitter and delay:
            delay *= 1 - self.jitter + 2 * self.jitter * rng.random()
        if retry_after is not None:
            delay = max(delay, retry_after)
        return delay

    def should_retry(self, exc: BaseException) -> bool:
        """Whether ``exc`` is retryable under this policy (see :func:`classify`)."""
        return classify(exc, self.retry_on)


NO_RETRY = RetryPolicy()
"""One attempt, no retry: the policy of a step that declares none."""
