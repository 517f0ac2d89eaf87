"""The planner's own retry loop for model calls made outside any step.

Steps retry through the step's retry policy; planning, repairs and replans happen before or
between executions, so they carry this small policy instead. Delays go through the injected
clock; ``Retry-After`` is honoured; cancellation is never swallowed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from planrail.errors import RetryableError
from planrail.types import Clock

__all__ = ["LLMRetry", "call_with_retry"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class LLMRetry:
    """How often and how patiently the planner asks again after a transient model failure."""

    max_attempts: int = 4
    """Attempts in all for one request, the first included."""
    initial_delay: float = 1.0
    """Seconds before the first retry."""
    backoff: float = 2.0
    """Each delay is the previous one times this."""
    max_delay: float = 30.0
    """No backoff delay is longer than this (a longer ``Retry-After`` is still honoured)."""

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.initial_delay < 0 or self.max_delay < 0 or self.backoff < 1:
            raise ValueError("delays must be >= 0 and backoff >= 1")

    def delay_for(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after failed attempt ``attempt`` (1-based)."""
        delay = min(self.max_delay, self.initial_delay * self.backoff ** (attempt - 1))
        return max(delay, retry_after or 0.0)


async def call_with_retry(
    call: Callable[[], Awaitable[T]],
    policy: LLMRetry,
    clock: Clock,
    on_retry: Callable[[int, RetryableError, float], None] | None = None,
) -> T:
    """``await call()``, again after each :class:`RetryableError`, up to the policy's limit.

    The last error is raised as it is once attempts are used up; ``on_retry(attempt, error,
    delay)`` is told of each retry before its delay.
    """
    attempt = 1
    while True:
        try:
            return await call()
        except RetryableError as exc:
            if attempt >= policy.max_attempts:
                raise
            delay = policy.delay_for(attempt, exc.retry_after)
            if on_retry is not None:
                on_retry(attempt, exc, delay)
            await clock.sleep(delay)
            attempt += 1
