"""The repeated-call guard: the same tool, called again and again with the same arguments.

The most common failure of long-running agents is a tool called over and over with identical
arguments — a ``repeat`` body that never changes, a replan that re-issues what already ran, a
plan that asks for the same thing five times. :class:`CallGuard` counts the calls of a run per
``(tool, hash of the resolved arguments)``; once a key has been called
``RunPolicy.max_identical_calls`` times, the next call is refused with
:class:`~planrail.errors.RepeatedCallError` (naming the earlier calls) instead of being made.

What counts as a call: the first attempt of a unit of work — a step, a ``for_each`` item, a
``repeat`` iteration, a fallback call. Retries of that attempt are the retry policy's business
and are not counted. Only ``tool_call`` steps are guarded; tools in
``RunPolicy.repeatable_tools`` are left alone.

Across a replan (:meth:`CallGuard.new_plan`) the counts carry over, and a call identical to one
whose step succeeded before the replan — its output is kept and can be referenced — is refused
at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from planrail._json import canonical as canonical_json
from planrail.errors import RepeatedCallError
from planrail.plan.model import Step
from planrail.policies.limits import RunPolicy

__all__ = ["CallGuard", "CallSite", "canonical_json"]


class CallSite(NamedTuple):
    """Where a call was made: the step, and the item / iteration / fallback within it.

    (A named tuple: one is made per call, and it is the cheapest immutable record.)
    """

    step: str
    item: int | None = None
    iteration: int | None = None
    fallback: bool = False
    earlier_plan: bool = False

    def __str__(self) -> str:
        text = f"'{self.step}'"
        if self.item is not None:
            text += f" item {self.item}"
        if self.iteration is not None:
            text += f" iteration {self.iteration}"
        if self.fallback:
            text += " (its fallback)"
        if self.earlier_plan:
            text += " (before the replan)"
        return text


_SHOWN = 5
"""Earlier calls named in an error message (the count says how many there were)."""


class CallGuard:
    """Counts a run's tool calls per (tool, resolved arguments) and refuses one too many.

    ``limit`` is how many identical calls are allowed (``None``: any number); ``exempt`` are
    tools never counted. One guard may serve several executions (an agent's plan and its
    replans): see :meth:`new_plan`.
    """

    def __init__(self, limit: int | None = 3, exempt: Iterable[str] = ()) -> None:
        self.limit = limit
        self.exempt = frozenset(exempt)
        # A key called once (nearly every key) keeps its step's id (a plain call) or one
        # CallSite, a list once it repeats: a big run keeps one small object per call.
        self._calls: dict[int, str | CallSite | list[CallSite]] = {}
        self._kept: dict[int, str] = {}
        """Calls whose step succeeded before a replan (the new plan reuses their output)."""

    @classmethod
    def for_policy(cls, policy: RunPolicy) -> CallGuard | None:
        """The guard a run policy asks for, or ``None`` when it is off."""
        if policy.max_identical_calls is None:
            return None
        return cls(policy.max_identical_calls, policy.repeatable_tools)

    def check(
        self, step: Step, item: int | None, extra: Mapping[str, Any], args: Any
    ) -> RepeatedCallError | None:
        """Count the call ``step`` is about to make, or return the error refusing it.

        ``extra`` is the attempt's extra record fields (``iteration``, ``fallback``).
        """
        tool = step.tool
        if step.action != "tool_call" or not tool or tool in self.exempt:
            return None
        key = _key(tool, args)
        kept = self._kept.get(key) if self._kept else None
        if kept is not None:
            return RepeatedCallError(
                f"step '{step.id}' would call '{tool}' with the same arguments as step"
                f" '{kept}', which succeeded before the replan and whose output is kept;"
                f" reference ${{{kept}}} instead of calling it again",
                previous=(kept,),
                step_id=step.id,
            )
        earlier = self._calls.get(key)
        if earlier is None:
            self._calls[key] = (
                step.id if item is None and not extra else _site(step.id, item, extra)
            )
            return None
        site = _site(step.id, item, extra)
        sites = _sites(earlier)
        if self.limit is not None and len(sites) >= self.limit:
            shown = ", ".join(str(s) for s in sites[:_SHOWN])
            more = f" and {len(sites) - _SHOWN} more" if len(sites) > _SHOWN else ""
            return RepeatedCallError(
                f"{site} would call '{tool}' with the same arguments for the"
                f" {_ordinal(len(sites) + 1)} time in this run (earlier: {shown}{more});"
                f" RunPolicy.max_identical_calls is {self.limit}. Change the arguments, or"
                f" list '{tool}' in RunPolicy.repeatable_tools if calling it again is intended",
                previous=tuple(str(s) for s in sites),
                step_id=step.id,
            )
        sites.append(site)
        self._calls[key] = sites
        return None

    def new_plan(self, kept: Mapping[str, tuple[str, Any]]) -> None:
        """A replan starts: the calls so far were made before it.

        ``kept`` maps the ids of the steps whose outputs the new plan reuses to the tool they
        called and their resolved arguments; calling one of those again is refused at once.
        """
        for key, earlier in self._calls.items():
            sites = _sites(earlier)
            moved = [
                CallSite(s.step, s.item, s.iteration, s.fallback, earlier_plan=True) for s in sites
            ]
            self._calls[key] = moved if len(moved) > 1 else moved[0]
        for sid, (tool, args) in kept.items():
            if tool not in self.exempt:
                self._kept.setdefault(_key(tool, args), sid)


def _site(step: str, item: int | None, extra: Mapping[str, Any]) -> CallSite:
    return CallSite(step, item, extra.get("iteration"), "fallback" in extra)


def _sites(earlier: str | CallSite | list[CallSite]) -> list[CallSite]:
    if isinstance(earlier, str):
        return [CallSite(earlier)]
    return earlier if isinstance(earlier, list) else [earlier]


def _key(tool: str, args: Any) -> int:
    """A hash of the tool and the arguments' canonical JSON (sorted keys, no spaces): equal for
    arguments whose JSON is equal (key order does not matter; ``1``, ``1.0`` and ``true``
    differ; a tuple is the list it holds). A 64-bit hash, not a digest: the keys live in this
    process only, and a collision would merely count one call too many toward
    ``max_identical_calls``.
    """
    return hash((tool, canonical_json(args)))


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"
