"""The sans-I/O scheduler: given what has happened, which steps may run and which must be skipped.

No asyncio, no clock, no store: a plain state machine over ``{step: dependencies}`` that the
executor (or a test, or the Ray backend) drives with method calls. It accepts steps
incrementally (:meth:`Scheduler.add`) so a streamed or replanned plan can grow while it runs;
:meth:`Scheduler.close` says no more will come.

Every step moves through the states of :class:`~planrail.types.StepStatus`; ``LEGAL`` lists the
allowed moves and anything else raises :class:`IllegalTransition` (a bug, never a user error).
Work per event is proportional to the number of edges it touches, so a whole run is linear in
the size of the graph (plus a heap for priorities).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from planrail.types import StepStatus

__all__ = ["LEGAL", "IllegalTransition", "Node", "Scheduler", "Skip"]

S = StepStatus

READY = "ready"
"""Internal state between ``pending`` and ``running``: all dependencies are satisfied."""

LEGAL: dict[str, frozenset[str]] = {
    S.PENDING: frozenset({READY, S.SKIPPED, S.CANCELLED}),
    READY: frozenset({S.RUNNING, S.SKIPPED, S.CANCELLED, S.SUCCEEDED}),
    S.RUNNING: frozenset({S.SUCCEEDED, S.FAILED, S.CANCELLED, S.SKIPPED, S.IN_DOUBT}),
    S.IN_DOUBT: frozenset({S.SUCCEEDED, S.FAILED, READY}),
    S.SUCCEEDED: frozenset(),
    S.FAILED: frozenset(),
    S.SKIPPED: frozenset(),
    S.CANCELLED: frozenset(),
}
"""Allowed moves. ``ready → succeeded`` is a step restored from a checkpoint; ``in_doubt`` waits
for an operator, who may declare it succeeded or failed, or retry it (back to ``ready``)."""

_DONE = frozenset({S.SUCCEEDED, S.FAILED, S.SKIPPED, S.CANCELLED})
_ACTIVE = frozenset({READY, S.RUNNING})
_ACTIVE_CHANGE = {
    (old, new): (new in _ACTIVE) - (old in _ACTIVE) for old, moves in LEGAL.items() for new in moves
}
"""Every legal move, and how it changes the count of ready-or-running steps."""


class IllegalTransition(RuntimeError):
    """A move the state table does not allow: a bug in the caller."""


@dataclass(frozen=True, slots=True)
class Node:
    """A step as the scheduler sees it."""

    id: str
    depends_on: Sequence[str] = ()
    join: str = "all_succeeded"
    """``all_succeeded`` (default), ``all_finished`` or ``any_succeeded``."""
    priority: float = 0.0
    """Higher starts first among ready steps (the executor uses the remaining critical path)."""


@dataclass(frozen=True, slots=True)
class Skip:
    """A step the scheduler skipped, and why (naming the step that caused it)."""

    step: str
    reason: str


@dataclass(slots=True)
class _Entry:
    """A step's scheduling state. It keeps what it needs of the :class:`Node` rather than the
    node itself (one object per step, not two: a plan may have 100,000 steps)."""

    depends_on: Sequence[str]
    join: str
    priority: float
    state: str = S.PENDING
    waiting: int = 0
    """Dependencies that have not finished yet."""
    succeeded: int = 0
    dependents: list[str] | None = None
    """The steps waiting for this one to be final (None: none, or it is final and told them)."""
    cause: str | None = None
    """The step whose failure led to this one being skipped (the root, through skipped steps)."""

    @classmethod
    def of(cls, node: Node) -> _Entry:
        return cls(node.depends_on, node.join, node.priority)


class Scheduler:
    """Decides order only; the caller runs steps and reports what happened to each.

    Typical driving loop::

        sched = Scheduler(nodes); sched.close()
        while not sched.finished:
            for step in sched.take_ready():
                ...start it...
            ...on completion: sched.succeeded(step) / sched.failed(step) -> newly skipped
    """

    def __init__(self, nodes: Iterable[Node] = ()) -> None:
        self._entries: dict[str, _Entry] = {}
        self._ready: list[tuple[float, int, str]] = []
        self._seq = 0
        self._closed = False
        self._active = 0
        """Steps ``ready`` or ``running``: while there are none, nothing can happen any more."""
        self.add(nodes)

    # ------------------------------------------------------------------ building

    def check_batch(self, batch: list[Node]) -> None:
        """ValueError unless :meth:`add` can take ``batch`` whole — ids new (to the schedule
        and within the batch), every dependency known or in the batch, none on itself — so
        that a refused batch leaves nothing of it behind."""
        ids = set()
        for node in batch:
            if node.id in self._entries or node.id in ids:
                raise ValueError(f"step {node.id!r} is already scheduled")
            ids.add(node.id)
        for node in batch:
            for dep in node.depends_on:
                if dep == node.id:
                    raise ValueError(f"step {node.id!r} depends on itself")
                if dep not in self._entries and dep not in ids:
                    raise ValueError(f"step {node.id!r} depends on unknown step {dep!r}")

    def add(self, nodes: Iterable[Node]) -> list[Skip]:
        """Add steps; their dependencies must already be known or be in the same batch.

        Returns the steps skipped at once (a dependency already failed).
        """
        if self._closed:
            raise IllegalTransition("cannot add steps after close()")
        batch = list(nodes)
        self.check_batch(batch)
        for node in batch:
            self._entries[node.id] = _Entry.of(node)
        skips: list[Skip] = []
        decided: list[str] = []  # the steps whose join may be decided now (the others wait)
        for node in batch:
            entry = self._entries[node.id]
            failed = False
            for dep in node.depends_on:
                dep_entry = self._entries[dep]
                if dep_entry.state in _DONE:
                    if dep_entry.state == S.SUCCEEDED:
                        entry.succeeded += 1
                    else:
                        failed = True
                    continue
                entry.waiting += 1
                if dep_entry.dependents is None:
                    dep_entry.dependents = [node.id]
                else:
                    dep_entry.dependents.append(node.id)
            # Waiting for a dependency, none final without success: no join rule is decided
            # yet (what _settle would find), and the dependencies will settle it.
            if entry.waiting == 0 or failed:
                decided.append(node.id)
        for sid in decided:
            if self._settle(sid, skips):
                # Skipped at once: dependents in this same batch counted it as waiting.
                self._propagate(sid, skips)
        return skips

    def close(self) -> None:
        """No more steps will be added; the run can finish."""
        self._closed = True

    # ------------------------------------------------------------------ queries

    @property
    def finished(self) -> bool:
        """Closed, and nothing is ready or running: every step is final, or waits (pending) on
        an ``in_doubt`` step that only an operator can decide."""
        return self._closed and self._active == 0

    def state(self, step: str) -> str:
        return self._entries[step].state

    def states(self) -> dict[str, str]:
        return {sid: e.state for sid, e in self._entries.items()}

    def has_ready(self) -> bool:
        return bool(self._ready)

    def take_ready(self, limit: int | None = None) -> list[str]:
        """Ready steps, highest priority first (ties in the order they became ready).

        They stay ``ready`` until :meth:`start`; taking them only removes them from the queue.
        """
        out: list[str] = []
        while self._ready and (limit is None or len(out) < limit):
            _, _, sid = heapq.heappop(self._ready)
            if self._entries[sid].state == READY:
                out.append(sid)
        return out

    def cause(self, step: str) -> str | None:
        return self._entries[step].cause

    # ------------------------------------------------------------------ events

    def start(self, step: str) -> None:
        self._move(step, S.RUNNING)

    def succeeded(self, step: str) -> list[Skip]:
        """Record success; dependents whose join rule is now met become ready."""
        return self._finish(step, S.SUCCEEDED)

    def restored(self, step: str) -> list[Skip]:
        """A step whose success was recorded in an earlier run (resume): not run again."""
        if self._entries[step].state != READY:
            raise IllegalTransition(f"step {step!r}: only a ready step can be restored")
        return self._finish(step, S.SUCCEEDED)

    def failed(self, step: str) -> list[Skip]:
        """Record failure; returns the dependents skipped because of it (transitively)."""
        return self._finish(step, S.FAILED)

    def cancelled(self, step: str) -> list[Skip]:
        return self._finish(step, S.CANCELLED)

    def skip(self, step: str, reason: str) -> list[Skip]:
        """Skip a ready or running step (an untaken branch); its dependents follow their joins."""
        skips = [Skip(step, reason)]
        skips.extend(self._finish(step, S.SKIPPED))
        return skips

    def in_doubt(self, step: str) -> None:
        """A started step whose outcome is unknown; it blocks its dependents until resolved."""
        self._move(step, S.IN_DOUBT)

    def retry_in_doubt(self, step: str) -> None:
        """An operator chose to run an ``in_doubt`` step again."""
        self._move(step, READY)
        self._push(step)

    def abort(self, reason: str) -> tuple[list[str], list[Skip]]:
        """Fail fast: returns the running steps to cancel, and skips everything not yet started."""
        running = [sid for sid, e in self._entries.items() if e.state == S.RUNNING]
        skips: list[Skip] = []
        for sid, e in self._entries.items():
            if e.state in (S.PENDING, READY):
                if e.state == READY:
                    self._active -= 1
                e.state = S.SKIPPED
                skips.append(Skip(sid, reason))
        self._ready.clear()
        return running, skips

    # ------------------------------------------------------------------ internals

    def _move(self, step: str, new: str) -> None:
        entry = self._entries[step]
        old = entry.state
        change = _ACTIVE_CHANGE.get((old, new))
        if change is None:
            raise IllegalTransition(f"step {step!r}: {old} -> {new} is not allowed")
        entry.state = new
        self._active += change

    def _make_ready(self, step: str) -> None:
        self._entries[step].state = READY
        self._active += 1
        self._push(step)

    def _push(self, step: str) -> None:
        self._seq += 1
        heapq.heappush(self._ready, (-self._entries[step].priority, self._seq, step))

    def _finish(self, step: str, status: str) -> list[Skip]:
        self._move(step, status)
        skips: list[Skip] = []
        self._propagate(step, skips)
        return skips

    def _propagate(self, step: str, skips: list[Skip]) -> None:
        """Tell the dependents of a step that just became final; settle those now decided."""
        entries = self._entries
        todo = [step]
        while todo:
            done_id = todo.pop()
            done = entries[done_id]
            ok = done.state == S.SUCCEEDED
            # Final: nothing reads its dependents again (a step added later that depends on it
            # counts it at once), so a big run keeps no list per finished step.
            dependents, done.dependents = done.dependents, None
            for dep_id in dependents or ():
                child = entries[dep_id]
                child.waiting -= 1
                if ok:
                    child.succeeded += 1
                    if (
                        child.waiting == 0
                        and child.state == S.PENDING
                        and child.join == "all_succeeded"
                    ):
                        self._make_ready(dep_id)  # the usual case: decided at once
                        continue
                if child.state == S.PENDING and self._settle(dep_id, skips, done_id):
                    todo.append(dep_id)

    def _settle(self, step: str, skips: list[Skip], trigger: str | None = None) -> bool:
        """Make a pending step ready or skipped if its join rule is decided.

        Returns True if the step was skipped (its dependents must then be settled too).
        """
        entry = self._entries[step]
        deps = entry.depends_on
        if entry.state != S.PENDING:
            return False
        join = entry.join
        failed_dep = None
        if join == "all_succeeded":
            if trigger is not None and self._entries[trigger].state != S.SUCCEEDED:
                failed_dep = trigger
            elif trigger is None:
                failed_dep = next(
                    (
                        d
                        for d in deps
                        if self._entries[d].state in _DONE and self._entries[d].state != S.SUCCEEDED
                    ),
                    None,
                )
            if failed_dep is None and entry.waiting == 0:
                self._make_ready(step)
                return False
        elif entry.waiting == 0:
            if join == "all_finished" or entry.succeeded > 0 or not deps:
                self._make_ready(step)
                return False
            failed_dep = next((d for d in deps), None)
        if failed_dep is None:
            return False
        dep_entry = self._entries[failed_dep]
        root = dep_entry.cause or failed_dep
        entry.cause = root
        entry.state = S.SKIPPED
        if join == "any_succeeded":
            reason = f"no dependency succeeded ({', '.join(deps)})"
        elif root == failed_dep:
            reason = f"dependency '{failed_dep}' {dep_entry.state}"
        else:
            reason = (
                f"dependency '{failed_dep}' skipped (because '{root}' {self._entries[root].state})"
            )
        skips.append(Skip(step, reason))
        return True
