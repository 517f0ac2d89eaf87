"""Tool runners: where the function of a Python tool runs (the tool-runner seam).

:class:`LocalRunner` is the default: async tools on the run's event loop, sync tools in a pool
of *daemon* threads. Other runners implement :class:`planrail.plan.tools.ToolRunner` the same
way (``planrail.backends.ray.RayRunner`` sends each call to a Ray cluster,
:class:`planrail.engine.isolation.ProcessRunner` runs each call in a worker process it can kill).

A sync call cannot be stopped from outside its thread. When one is cancelled (a timeout, a
cancelled run) while its function runs, the call is *abandoned*: the runner stops waiting, and
the attempt loop learns of it through :func:`watching` so that the call keeps holding its
resource (and its place under the run's ``max_concurrency``) until its thread returns, and no
retry overlaps it unless its tool allows that. A call that is *killed* mid-call (a worker process
terminated on timeout) is reported there too: it may have taken effect before it was killed. So
is a call cancelled before it began (*queued*: waiting for a thread or a worker), which had no
effect; any other call cut by a timeout was under way (see :mod:`planrail.engine.attempts`).
The threads are daemons: the process exits when the run is over even if an abandoned call never
returns.

An abandoned call is remembered by its idempotency key for as long as its thread runs
(:func:`keep_running`), for the whole process: a later run in the same process — a resume of
a cancelled run in a long-lived ``planrail mcp serve`` — does not call that key again while the
first call still runs (:class:`CallStillRunningError`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import functools
import queue
import threading
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from planrail.errors import ExecutionError, ToolError
from planrail.plan.tools import Tool

if TYPE_CHECKING:
    from planrail.engine.isolation import ProcessWorkers

__all__ = [
    "RUNNING_KEYS",
    "CallStillRunningError",
    "CallWatch",
    "Leftovers",
    "LocalRunner",
    "abandoned_here",
    "is_ctrl_c",
    "keep_running",
    "still_running",
    "stop_watching",
    "watch_calls",
    "watching",
]

Leftovers = list["concurrent.futures.Future[Any]"]
"""Calls of one attempt that were abandoned while they still ran (their futures)."""


@dataclass(slots=True)
class CallWatch:
    """What the runner tells the current attempt about calls it could not finish cleanly."""

    running: Leftovers = field(default_factory=list)
    """Abandoned calls (cancelled while their thread ran): they may still take effect."""
    killed: int = 0
    """Calls killed mid-call (a worker process terminated): they may have taken effect."""
    queued: int = 0
    """Calls cancelled before they began (waiting for a thread or a worker): no effect."""


_WATCH: contextvars.ContextVar[CallWatch | None] = contextvars.ContextVar(
    "planrail_call_watch", default=None
)


def watch_calls() -> tuple[CallWatch, contextvars.Token[CallWatch | None]]:
    """Collect what happens to the calls made from here on in this context (reset with the
    token)."""
    found = CallWatch()
    return found, _WATCH.set(found)


def stop_watching(token: contextvars.Token[CallWatch | None]) -> None:
    """End what :func:`watch_calls` started."""
    _WATCH.reset(token)


def watching() -> CallWatch | None:
    """Where the current attempt collects its calls' fate (None: nobody watches)."""
    return _WATCH.get()


class CallStillRunningError(ExecutionError):
    """A call was not made: the call made earlier in this process with the same idempotency
    key could not be stopped (an abandoned sync call) and still runs. Not retryable: the step
    fails, and a resume once that call has returned calls it again with the key."""

    code = "call_still_running"


RUNNING_KEYS: dict[str, set[concurrent.futures.Future[Any]]] = {}
"""Idempotency key -> the abandoned calls made with it whose thread has not returned (empty
nearly always: a step takes the short path only while it is)."""
_RUNNING_LOCK = threading.Lock()


def keep_running(key: str, calls: Leftovers) -> None:
    """Remember ``calls`` (abandoned, made with ``key``) until each has returned."""
    with _RUNNING_LOCK:
        RUNNING_KEYS.setdefault(key, set()).update(calls)
    for future in calls:
        future.add_done_callback(functools.partial(_returned_call, key))


def _returned_call(key: str, future: concurrent.futures.Future[Any]) -> None:
    with _RUNNING_LOCK:
        left = RUNNING_KEYS.get(key)
        if left is not None:
            left.discard(future)
            if not left:
                del RUNNING_KEYS[key]


_UNWATCHED: weakref.WeakKeyDictionary[asyncio.Task[Any], Leftovers] = weakref.WeakKeyDictionary()
"""Calls abandoned by a task nobody watched (a plain step's one call: no attempt loop)."""


def abandoned_here() -> Leftovers:
    """The calls the current task abandoned while nobody watched (:func:`watch_calls`), taken
    (a plain step's call cut by its run's cancellation: it asks once, when cancelled)."""
    task = asyncio.current_task()
    return [] if task is None else _UNWATCHED.pop(task, [])


def still_running(key: str) -> Leftovers:
    """The abandoned calls made with ``key`` in this process that still run (most often
    none: one dict lookup)."""
    if not RUNNING_KEYS:
        return []
    with _RUNNING_LOCK:
        return [f for f in RUNNING_KEYS.get(key, ()) if not f.done()]


def is_ctrl_c(exc: BaseException) -> bool:
    """Whether ``exc``, raised in the current thread, may be a Ctrl-C: a ``KeyboardInterrupt``
    on the main thread, the only thread Python delivers signals to. Anywhere else it is the
    tool's own, and fails its attempt instead of stopping the run (as a sync tool's, in a
    thread of the pool, always does)."""
    return (
        isinstance(exc, KeyboardInterrupt) and threading.current_thread() is threading.main_thread()
    )


def _not_a_ctrl_c(tool: str, exc: KeyboardInterrupt) -> ToolError:
    error = ToolError(
        f"tool '{tool}' raised KeyboardInterrupt in its thread, where no Ctrl-C arrives (signals"
        " reach the main thread only), so it does not stop the run: the attempt failed instead"
    )
    error.__cause__ = exc
    return error


class _DaemonPool:
    """Up to ``max_workers`` daemon threads running submitted functions."""

    def __init__(self, max_workers: int) -> None:
        self.max_workers = max_workers
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._lock = threading.Lock()

    def submit(self, fn: Callable[[], Any], name: str) -> concurrent.futures.Future[Any]:
        """Run ``fn`` (the call of the tool ``name``) in a thread; its future."""
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._queue.put((future, fn, name))
        with self._lock:
            if self._idle == 0 and len(self._threads) < self.max_workers:
                thread = threading.Thread(
                    target=self._work, name=f"planrail-tool-{len(self._threads)}", daemon=True
                )
                self._threads.append(thread)
                thread.start()
            else:
                self._idle -= 1
        return future

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            future, fn, name = item
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn())
                except StopIteration as exc:  # an asyncio future refuses it: it would never end
                    error = RuntimeError(f"the tool raised StopIteration({str(exc)!r})")
                    error.__cause__ = exc
                    future.set_exception(error)  # as Python does for a coroutine (PEP 479)
                except KeyboardInterrupt as exc:  # never a Ctrl-C: this is not the main thread
                    future.set_exception(_not_a_ctrl_c(name, exc))
                except BaseException as exc:  # the caller sees it, as with any pool
                    future.set_exception(exc)
            with self._lock:
                self._idle += 1

    def shutdown(self) -> None:
        """Idle threads end; busy ones end when their function returns (nobody waits)."""
        for _ in self._threads:
            self._queue.put(None)


class LocalRunner:
    """Async tools on the event loop, sync tools in up to ``max_workers`` daemon threads.

    A sync call that is cancelled while it runs is abandoned (see the module docstring);
    :attr:`abandoned` counts those whose thread has not returned yet.
    """

    def __init__(self, max_workers: int = 64) -> None:
        if max_workers < 1:
            raise ValueError("max_workers must be at least 1")
        self.max_workers = max_workers
        self._pool: _DaemonPool | None = None
        self._abandoned: set[concurrent.futures.Future[Any]] = set()
        self._processes: ProcessWorkers | None = None
        """The worker processes of ``isolation="process"`` tools, made at their first call."""
        self.on_returned: Callable[[], None] | None = None
        """Called on the run's loop when the thread of an abandoned call returns (the executor
        counts abandoned calls against ``max_concurrency`` and starts steps again then)."""

    @property
    def abandoned(self) -> int:
        """Sync calls given up on (timed out or cancelled) whose thread still runs."""
        return sum(1 for f in list(self._abandoned) if not f.done())

    async def prepare(self, tools: Sequence[Tool]) -> None:
        """Every Python function can run here; the worker processes of ``isolation="process"``
        tools are started (and import their tool) now, not inside a call's timeout."""
        isolated = [t for t in tools if t.isolation == "process" and not t.is_async]
        if isolated:
            await self._workers().warm(isolated)

    def _workers(self) -> ProcessWorkers:
        if self._processes is None:
            from planrail.engine.isolation import ProcessWorkers

            self._processes = ProcessWorkers(min(self.max_workers, 8))
        return self._processes

    def call(self, tool: Tool, kwargs: dict[str, Any]) -> Awaitable[Any]:
        if tool.is_async:
            started: Awaitable[Any] = tool.fn(**kwargs)  # not cast(): a call per step
            return started
        if tool.isolation == "process":
            return self._workers().call(tool, kwargs)
        if self._pool is None:
            self._pool = _DaemonPool(self.max_workers)
        return self._await(self._pool.submit(functools.partial(tool.fn, **kwargs), tool.name))

    async def _await(self, future: concurrent.futures.Future[Any]) -> Any:
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            found = watching()
            if future.cancel():  # still waiting for a thread: it never ran
                if found is not None:
                    found.queued += 1
            else:  # already running: abandoned, not stopped
                self._abandoned.add(future)
                loop = asyncio.get_running_loop()
                future.add_done_callback(functools.partial(self._returned, loop))
                if found is not None:
                    found.running.append(future)
                else:
                    task = asyncio.current_task()
                    if task is not None:
                        _UNWATCHED.setdefault(task, []).append(future)
            raise

    def _returned(
        self, loop: asyncio.AbstractEventLoop, future: concurrent.futures.Future[Any]
    ) -> None:
        """An abandoned call's thread returned (called in that thread)."""
        self._abandoned.discard(future)
        listener = self.on_returned
        if listener is not None:
            with contextlib.suppress(RuntimeError):  # a closed loop: the run is over
                loop.call_soon_threadsafe(listener)

    async def aclose(self) -> None:
        processes, self._processes = self._processes, None
        if processes is not None:
            processes.close()
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown()
