"""Mapping the errors of the Stainless-built SDKs (``openai``, ``anthropic``) to planrail's.

Both SDKs share one error shape: ``APITimeoutError`` < ``APIConnectionError`` < ``APIError``,
and ``APIStatusError`` (with ``status_code`` and ``response.headers``). Retryable: timeouts,
connection errors, 408, 409, 429 and 5xx (``Retry-After`` honoured); anything else is final.
A body the SDK cannot read (not JSON, or not UTF-8: the SDKs raise ``json``'s own errors, not
theirs) is a retryable :class:`LLMAnswerError` (:data:`UNREADABLE_BODY`, :func:`unreadable_body`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from planrail.errors import PlanrailError
from planrail.llm.errors import LLMAnswerError, LLMRequestError, LLMUnavailableError

__all__ = [
    "RETRYABLE_STATUS",
    "UNREADABLE_BODY",
    "map_sdk_error",
    "retry_after_seconds",
    "unreadable_body",
]

RETRYABLE_STATUS = frozenset({408, 409, 429})
"""HTTP statuses worth another attempt besides every 5xx."""

_MAX_RETRY_AFTER = 3600.0

UNREADABLE_BODY = (json.JSONDecodeError, UnicodeDecodeError)
"""What an SDK raises for a response body it cannot read (``json.loads`` of the bytes)."""


def unreadable_body(
    exc: json.JSONDecodeError | UnicodeDecodeError, provider: str, where: str
) -> LLMAnswerError:
    """The bad answer that a body the SDK could not read is."""
    if isinstance(exc, UnicodeDecodeError):
        return LLMAnswerError(
            f"{provider}: the response from {where} is not UTF-8 text (byte {exc.start})"
        )
    return LLMAnswerError(f"{provider}: the response from {where} is not valid JSON ({exc.msg})")


def retry_after_seconds(headers: Mapping[str, str] | Any) -> float | None:
    """Seconds asked for by ``retry-after-ms`` or ``retry-after`` (a number), else ``None``.

    An HTTP-date ``Retry-After`` is ignored: reading it would need the wall clock, and the
    retry policy's own backoff is a sound default.
    """
    if headers is None:
        return None
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            seconds = float(raw) / divisor
        except (TypeError, ValueError):
            continue
        if 0 <= seconds <= _MAX_RETRY_AFTER:
            return seconds
    return None


def map_sdk_error(
    exc: BaseException, sdk: ModuleType, *, provider: str, where: str
) -> PlanrailError:
    """The planrail error for an SDK exception (``where`` names the endpoint for messages)."""
    if isinstance(exc, sdk.APITimeoutError):
        return LLMUnavailableError(f"{provider}: no answer from {where} in time (timeout)")
    if isinstance(exc, sdk.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        detail = f" ({type(cause).__name__}: {cause})" if cause else ""
        return LLMUnavailableError(f"{provider}: cannot reach {where}{detail}")
    if isinstance(exc, sdk.APIStatusError):
        status = int(exc.status_code)
        message = f"{provider} answered HTTP {status}: {_detail(exc)}"
        if status in RETRYABLE_STATUS or status >= 500:
            retry_after = retry_after_seconds(getattr(exc.response, "headers", None))
            return LLMUnavailableError(message, status=status, retry_after=retry_after)
        if status == 401:
            message += " (check the API key)"
        return LLMRequestError(message, status=status)
    if isinstance(exc, sdk.APIResponseValidationError):
        return LLMAnswerError(f"{provider}: the server's response is malformed: {exc}")
    if isinstance(exc, sdk.APIError):  # e.g. an error event in the middle of a stream
        return LLMUnavailableError(f"{provider}: {exc}")
    return LLMRequestError(f"{provider}: {type(exc).__name__}: {exc}")


def _detail(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return str(err["message"])[:300]
        if isinstance(err, str):
            return err[:300]
    return str(getattr(exc, "message", exc))[:300]
