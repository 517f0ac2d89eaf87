"""What a step cancelled by its run becomes, from which of its calls may be under way
(:class:`planrail.engine.under_way.CallsUnderWay`), without an event loop: the end-to-end
behaviour is pinned by ``test_executor_cancellation.py`` and the durability tests."""

from __future__ import annotations

import pytest

from planrail.engine.under_way import CallsUnderWay
from planrail.types import StepStatus as S

WHY = "the run was cancelled"


def _status(calls: CallsUnderWay, sid: str, may_rerun: bool) -> S:
    return calls.cancelled(sid, may_rerun, WHY).status


def test_a_call_under_way_of_a_tool_that_may_not_run_again_is_in_doubt() -> None:
    calls = CallsUnderWay()
    calls.began("a", None)
    outcome = calls.cancelled("a", False, WHY)
    assert outcome.status == S.IN_DOUBT
    assert outcome.reason is not None
    assert outcome.reason.startswith(WHY)
    assert "planrail resolve" in outcome.reason
    assert _status(calls, "a", True) == S.CANCELLED  # a keyed or idempotent tool: called again


def test_a_step_waiting_to_retry_or_never_called_is_cancelled() -> None:
    """A failed call whose retry is scheduled is over: nothing is under way while the step
    waits; a step never called says only why."""
    calls = CallsUnderWay()
    calls.began("a", None)
    calls.over("a", 1)
    waiting = calls.cancelled("a", False, WHY)
    assert (waiting.status, "none of its calls was under way" in (waiting.reason or "")) == (
        S.CANCELLED,
        True,
    )
    assert calls.cancelled("b", False, WHY).reason == WHY


def test_a_committed_item_stops_counting_its_calls_but_not_the_others() -> None:
    calls = CallsUnderWay()
    for item in (0, 1):
        calls.began("fan", item)
    calls.unit_recorded("fan", 0)
    assert _status(calls, "fan", False) == S.IN_DOUBT  # item 1's call is still under way
    calls.unit_recorded("fan", 1)
    assert _status(calls, "fan", False) == S.CANCELLED


def test_a_crashed_call_counts_until_the_step_ends_whatever_is_committed() -> None:
    calls = CallsUnderWay()
    calls.began("fan", 0)
    calls.crashed("fan", 0)
    calls.unit_recorded("fan", 0)
    assert _status(calls, "fan", False) == S.IN_DOUBT
    calls.ended("fan")
    assert calls.cancelled("fan", False, WHY).reason == WHY


def test_more_calls_ending_than_began_is_a_bug_that_raises() -> None:
    calls = CallsUnderWay()
    calls.began("a", 0)
    with pytest.raises(AssertionError, match="more calls ended than began"):
        calls.over("a", 2, 0)
