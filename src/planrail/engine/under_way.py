"""Which calls of a run's steps may be under way right now: the one answer to what a step
cancelled by its run becomes — ``in_doubt`` when a call of a tool that may not run again was
under way (it may or may not have happened), ``cancelled`` otherwise (a resume calls it again).

The executor counts each call as it is made (:meth:`CallsUnderWay.began`, from the step
runner's ``before_attempt``) and as it stops counting: its attempt failed and a retry was
scheduled, its fan-out item's output or its loop iteration was committed, or the step's outcome
was (:meth:`CallsUnderWay.ended`). A call that crashed with its effect in doubt counts until the
step ends, whatever is committed after it.
"""

from __future__ import annotations

from planrail.engine.outcome import Outcome
from planrail.types import StepStatus

__all__ = ["CallsUnderWay"]

S = StepStatus


class CallsUnderWay:
    """The calls that may be under way, per step and per fan-out item."""

    __slots__ = ("_calling", "_crashed", "_item_calls")

    def __init__(self) -> None:
        self._calling: dict[str, int] = {}
        """Per step whose action has been called: the calls that may be under way."""
        self._item_calls: dict[str, dict[int, int]] = {}
        """The same per fan-out item (of the steps that fan out), so that an item's calls stop
        counting once its output is committed."""
        self._crashed: dict[str, set[int | None]] = {}
        """The items (``None``: the step itself) with a call that crashed with its effect in
        doubt: their calls count until the step ends."""

    def began(self, sid: str, item: int | None) -> None:
        """A call of step ``sid`` (of its fan-out item ``item``, if not None) is being made."""
        self._calling[sid] = self._calling.get(sid, 0) + 1
        if item is not None:
            items = self._item_calls.setdefault(sid, {})
            items[item] = items.get(item, 0) + 1

    def crashed(self, sid: str, item: int | None) -> None:
        """A call of ``sid`` (``item``) crashed with its effect in doubt: its unit's calls count
        until the step ends (:class:`~planrail.errors.CallCrashedError`)."""
        self._crashed.setdefault(sid, set()).add(item)

    def unit_recorded(self, sid: str, item: int | None) -> None:
        """A finished unit of ``sid`` is committed — an item's output, or an iteration of the
        step (``item`` None) or of an item: none of its calls is under way any more."""
        if item in self._crashed.get(sid, ()):
            return
        if item is None:  # the step's own calls, one after another: none is under way now
            self.over(sid, self._calling.get(sid, 0))
        else:
            self.over(sid, self._item_calls.get(sid, {}).pop(item, 0))

    def over(self, sid: str, calls: int, item: int | None = None) -> None:
        """``calls`` calls of ``sid`` (of its fan-out item ``item``, if given) that
        :meth:`began` counted are no longer under way."""
        if not calls:  # a unit that ended before any call (a time limit, an unresolved argument)
            return
        left = self._calling[sid] - calls
        assert left >= 0, f"step '{sid}': more calls ended than began"
        self._calling[sid] = left
        if item is not None:
            items = self._item_calls[sid]
            items[item] -= calls
            assert items[item] >= 0, f"step '{sid}' item {item}: more calls ended than began"

    def ended(self, sid: str) -> None:
        """Step ``sid``'s outcome is known: none of its calls counts any more."""
        self._calling.pop(sid, None)
        self._item_calls.pop(sid, None)
        self._crashed.pop(sid, None)

    def cancelled(self, sid: str, may_rerun: bool, why: str) -> Outcome:
        """The outcome of step ``sid``, cancelled by the run for ``why``: if its call was under
        way and may not be made again (``may_rerun`` false: an unsafe tool), its outcome is
        unknown — ``in_doubt``, for an operator to resolve; otherwise ``cancelled`` (a resume
        runs it again, with the same idempotency key). A step waiting to retry a failed call, or
        a fan-out or loop whose finished items or iterations are committed and whose others wait
        (to retry, or to start), has none under way: ``cancelled``."""
        calling = self._calling.get(sid, 0) > 0
        if calling and not may_rerun:
            return Outcome(
                S.IN_DOUBT,
                reason=f"{why} while its call was under way: it may or may not"
                " have happened; decide with `planrail resolve`",
            )
        if calling:
            return Outcome(
                S.CANCELLED,
                reason=f"{why} while its call was under way; its tool honours"
                " idempotency keys: a resume calls it again with the same key",
            )
        if sid in self._calling:  # called, but none of its calls is under way now
            return Outcome(
                S.CANCELLED,
                reason=f"{why} while none of its calls was under way (it waited"
                " to retry a failed call, or for an item or iteration to start; what finished"
                " is recorded): a resume calls it again",
            )
        return Outcome(S.CANCELLED, reason=why)
