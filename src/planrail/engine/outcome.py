"""What running a step produced: the :class:`Outcome` the executor records, and how the
results of its units of work (a step, or the items of a fan-out) become one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from planrail.engine.attempts import Result, Tally
from planrail.engine.result import OneAttempt
from planrail.errors import CallCrashedError, error_dict, error_message
from planrail.plan.strict_json import escape_surrogates
from planrail.types import StepStatus

__all__ = ["Outcome", "failed", "fan_in", "in_doubt", "message", "outcome_of", "recordable"]

S = StepStatus


@dataclass(slots=True)
class Outcome:
    """What happened to one step."""

    status: StepStatus
    output: Any = None
    error: dict[str, Any] | None = None
    attempts: int = 0
    reason: str | None = None
    degraded: bool = False
    args: Any = None
    """The resolved arguments the action was performed with (for records and ``show --step``)."""
    history: list[dict[str, Any]] | OneAttempt | None = None
    """The attempt records (None: none; :class:`~.result.OneAttempt`: one plain attempt)."""
    usage: dict[str, int] | None = None
    """LLM token usage (``input_tokens``, ``output_tokens``, ``calls``); None: none."""
    fatal: bool = False
    """The whole run must stop (a budget or limit was exceeded), not just this step."""


def fan_in(results: list[Result | None], tallies: list[Tally]) -> Outcome:
    total = Tally()
    for t in tallies:
        total.attempts += t.attempts
        total.history.extend(t.history)
        total.add_usage(t.usage)
    bad = [(i, r) for i, r in enumerate(results) if r is not None and not r.ok]
    # The item that failed for good comes first: items in doubt were stopped because of it.
    failed = next(((i, r) for i, r in bad if not in_doubt(r)), bad[0] if bad else None)
    if failed is not None:
        i, res = failed
        error = error_dict(res.exc) if res.exc is not None else None
        if error is not None:
            error["message"] = f"item {i}: {error['message']}"
        reason = f"item {i} failed" + (f": {res.reason}" if res.reason else "")
        good = [str(k) for k, r in enumerate(results) if r is not None and r.ok]
        if good:
            reason += (
                f"; item(s) {', '.join(good)} succeeded (recorded with a store: a resume runs"
                " only the others)"
            )
        doubtful = [str(k) for k, r in enumerate(results) if r is not None and in_doubt(r)]
        if doubtful and not in_doubt(res):
            reason += (
                f"; item(s) {', '.join(doubtful)} stopped while their calls were under way:"
                " in doubt, decide with `planrail resolve --item`"
            )
        return Outcome(
            S.IN_DOUBT if doubtful else S.FAILED,
            error=error,
            attempts=total.attempts,
            reason=reason,
            history=total.history,
            usage=total.usage,
            fatal=res.fatal,
            args=[r.args if r else None for r in results],
        )
    done = [r for r in results if r is not None]
    degraded = [i for i, r in enumerate(done) if r.degraded]
    note: str | None = None
    if degraded:
        listed = ", ".join(map(str, degraded))
        note = f"item(s) {listed} used a fallback; item {degraded[0]} {done[degraded[0]].reason}"
    return Outcome(
        S.SUCCEEDED,
        output=[r.output for r in done],
        attempts=total.attempts,
        degraded=bool(degraded),
        reason=note,
        args=[r.args for r in done],
        history=total.history,
        usage=total.usage,
    )


def outcome_of(res: Result, tally: Tally) -> Outcome:
    if res.ok:
        return Outcome(
            S.SUCCEEDED,
            output=res.output,
            attempts=tally.attempts,
            args=res.args,
            degraded=res.degraded,
            reason=res.reason,
            history=tally.history,
            usage=tally.usage,
        )
    assert res.exc is not None
    return Outcome(
        S.IN_DOUBT if in_doubt(res) else S.FAILED,
        error=error_dict(res.exc, retryable=res.retryable),
        attempts=tally.attempts,
        args=res.args,
        history=tally.history,
        usage=tally.usage,
        fatal=res.fatal,
        reason=res.reason or (message(res.exc) if res.fatal or in_doubt(res) else None),
    )


def in_doubt(res: Result) -> bool:
    """Whether a unit of work ended in a crash that leaves its effect unknown
    (:class:`~planrail.errors.CallCrashedError` of a tool that does not honour keys)."""
    return isinstance(res.exc, CallCrashedError) and res.exc.in_doubt


def failed(exc: BaseException, reason: str) -> Outcome:
    return Outcome(S.FAILED, error=error_dict(exc), reason=reason)


def message(exc: BaseException | None) -> str:
    return "" if exc is None else error_message(exc)


def recordable(reason: str | None) -> str | None:
    """``reason`` as a store's text column can hold it, the same for the run's result and its
    record: a reason quotes error messages, which may hold NUL or a lone surrogate (a file name
    decoded with ``surrogateescape``); each is written as its escape (``\\x00``, ``\\udce9``)."""
    if reason is None or (reason.isascii() and "\x00" not in reason):
        return reason
    return escape_surrogates(reason.replace("\x00", "\\x00"))
