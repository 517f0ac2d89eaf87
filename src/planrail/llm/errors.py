"""Errors of the LLM layer, placed in planrail's one error tree::

    PlanrailError
    ├── LLMError                       a model call failed and trying again will not help
    │   ├── LLMRequestError            the provider refused the request (4xx: key, model, size)
    │   │   └── LLMContextLengthError  the request does not fit the model's context window
    │   └── BudgetExceededError        a run's budget is spent (``fatal``: the run stops)
    └── RetryableError
        ├── LLMUnavailableError        429, 5xx, timeout, connection error (``retry_after``)
        └── LLMAnswerError             the answer is empty, or not the JSON that was asked for

``MissingExtraError`` (a provider's package is not installed) is :mod:`planrail.errors`' one
class for every missing extra, re-exported here.

Retryable errors are handled by the retry policies (a step's, or the planner's own loop).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planrail.errors import MissingExtraError, PlanrailError, RetryableError

if TYPE_CHECKING:
    from planrail.llm.base import Usage

__all__ = [
    "BudgetExceededError",
    "LLMAnswerError",
    "LLMContextLengthError",
    "LLMError",
    "LLMRequestError",
    "LLMUnavailableError",
    "MissingExtraError",
]


class LLMError(PlanrailError):
    """A model call failed for a reason another attempt will not fix."""

    code = "llm_error"


class LLMRequestError(LLMError):
    """The provider refused the request (bad key, unknown model, malformed request...)."""

    code = "llm_request_error"

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class LLMContextLengthError(LLMRequestError):
    """The messages (plus ``max_tokens``) do not fit the model's context window. Not a refusal
    of the structured-output form: asking in a simpler form would not help, a shorter request
    would."""

    code = "llm_context_length"


class BudgetExceededError(LLMError):
    """A run's budget (calls, tokens or cost) is spent. ``fatal``: the whole run stops."""

    code = "budget_exceeded"
    fatal = True

    def __init__(self, message: str, *, limit: str, usage: Usage | None = None) -> None:
        super().__init__(message)
        self.limit = limit
        """Which budget: ``llm_calls``, ``input_tokens``, ``output_tokens`` or ``cost``."""
        self.usage = usage
        """What the answer that overspent used (charged: an ``llm_call`` step records it);
        None for a call refused before it was made."""

    def spent_on(self, usage: Usage) -> BudgetExceededError:
        """This error, raised for an answer that used ``usage``."""
        return BudgetExceededError(self.message, limit=self.limit, usage=usage)


class LLMUnavailableError(RetryableError):
    """The provider could not answer now: rate limit, server error, timeout, connection."""

    code = "llm_unavailable"

    def __init__(
        self, message: str, *, status: int | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message, retry_after=retry_after)
        self.status = status


class LLMAnswerError(RetryableError):
    """The model answered, but with nothing, or not with the JSON that was asked for."""

    code = "llm_bad_answer"

    def __init__(self, message: str, *, text: str = "") -> None:
        super().__init__(message)
        self.text = text
        """The answer as received (for traces)."""
