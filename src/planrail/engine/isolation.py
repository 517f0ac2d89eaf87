"""Process isolation for sync tools that must be killable (``@tool(isolation="process")``).

A thread cannot be stopped; a process can. :class:`ProcessWorkers` keeps warm worker processes
(started with ``spawn``: no fork of a threaded process) and runs each call of an isolated tool
in one of them. The worker imports the tool by where it was defined — its module, or the
``--tools`` file it was loaded from — so the function must be defined at module level. When the
call is cancelled (a timeout, a cancelled run) its worker is *terminated* (SIGTERM, then SIGKILL
after a moment) and never reused: the call really stops, and nothing of it runs on. It may have
taken effect before it was killed: the attempt loop learns of the kill
(:func:`planrail.engine.runners.watching`) and makes an ``unsafe`` step ``in_doubt``.

Arguments and return values cross the process boundary by pickling. The measured per-call
cost is in ``docs/execution.md`` (``bench/isolation.py``).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import sys
from multiprocessing.connection import Connection
from typing import Any

from planrail.engine.runners import watching
from planrail.errors import CallCrashedError, ToolError, error_message
from planrail.plan.tools import Tool

__all__ = ["ProcessWorkers"]

_CONTEXT = multiprocessing.get_context("spawn")
_KILL_AFTER = 1.0
"""Seconds a terminated worker has to exit before it is killed."""


def _where(tool: Tool) -> tuple[str, str | None, str]:
    """(module name, source file or None, attribute) to import the tool by in a worker."""
    fn = tool.fn
    module = getattr(fn, "__module__", None)
    name = getattr(fn, "__qualname__", "")
    if not module or "<" in name or "." in name:
        raise ToolError(
            f"tool '{tool.name}' uses isolation='process', so it must be a module-level"
            " function (a worker process imports it)"
        )
    mod = sys.modules.get(module)
    path = getattr(mod, "__file__", None) if module.startswith("_planrail_tools_") else None
    return module, path, name


def _serve(conn: Connection) -> None:  # pragma: no cover - runs in the worker process
    """The worker's loop: import, call, reply; until the pipe closes.

    A worker ignores SIGINT: a Ctrl-C at the terminal reaches the whole foreground process
    group, and the runner that owns the worker decides what becomes of its call (it cancels
    it and ends the worker); a KeyboardInterrupt here would print a traceback of the tool and
    race that cancellation."""
    import importlib
    import importlib.util
    import signal
    import traceback

    signal.signal(signal.SIGINT, signal.SIG_IGN)

    while True:
        try:
            module, path, name, kwargs = conn.recv()
        except (EOFError, OSError):
            return
        try:
            mod = sys.modules.get(module)
            if mod is None:
                if path is not None:
                    spec = importlib.util.spec_from_file_location(module, path)
                    assert spec is not None
                    assert spec.loader is not None
                    mod = importlib.util.module_from_spec(spec)
                    sys.modules[module] = mod
                    spec.loader.exec_module(mod)
                else:
                    mod = importlib.import_module(module)
            target = getattr(mod, name)
            fn = getattr(target, "fn", target)
            value = None if kwargs is None else fn(**kwargs)  # None: only import it (warm up)
            conn.send(("ok", value))
        except BaseException as exc:  # the caller re-raises it
            # "fatal": no Exception (SystemExit, KeyboardInterrupt, one of the tool's own):
            # this worker ends after saying so, and the caller does not reuse it
            kind = "error" if isinstance(exc, Exception) else "fatal"
            try:
                conn.send((kind, exc))
            except Exception:  # an exception that does not pickle
                conn.send((kind, RuntimeError(f"{type(exc).__name__}: {exc}")))
            if kind == "fatal":
                traceback.print_exc()
                return


class _Worker:
    def __init__(self) -> None:
        self.conn, child = _CONTEXT.Pipe()
        self.process = _CONTEXT.Process(target=_serve, args=(child,), daemon=True)
        self.process.start()
        child.close()

    def retire(self) -> None:
        """Let a worker that is ending by itself end (it said why on stderr), then stop it."""
        self.process.join(_KILL_AFTER)
        self.stop()

    def stop(self) -> None:
        """Terminate the worker (the call it runs stops now), kill it if it lingers."""
        self.conn.close()
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(_KILL_AFTER)
            if self.process.is_alive():
                self.process.kill()
                self.process.join(_KILL_AFTER)


def _fatal(tool: Tool, exc: BaseException) -> ToolError:
    """What a worker's exception that is no :class:`Exception` is here: the attempt's
    :class:`ToolError`. A ``KeyboardInterrupt`` from a worker is the tool's (or a Ctrl-C of
    the worker's own), never this process's: re-raised, it stopped ``planrail run`` as a
    Ctrl-C would (exit 130) and left ``planrail mcp serve``'s run unanswered."""
    if isinstance(exc, SystemExit):
        said = f"tried to end its worker process (SystemExit({exc.code!r}))"
    elif isinstance(exc, Exception):  # the worker's stand-in for one that does not pickle
        said = f"raised {error_message(exc)} in its worker process"
    else:
        told = repr(error_message(exc)) if exc.args else ""
        said = f"raised {type(exc).__name__}({told}) in its worker process"
    return ToolError(
        f"tool '{tool.name}' {said}, which is not an Exception: the attempt failed instead"
    )


def _wake(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_result(None)


class ProcessWorkers:
    """Warm worker processes for isolated sync tools; at most ``max_workers`` at once."""

    def __init__(self, max_workers: int = 8) -> None:
        self.max_workers = max_workers
        self._idle: list[_Worker] = []
        self._slots: asyncio.Semaphore | None = None
        self.terminated = 0
        """Workers terminated because their call was cancelled or timed out."""

    async def warm(self, tools: list[Tool]) -> None:
        """Start a worker per tool and import the tool there, before the run's first step: a
        worker's start-up (a new Python, the tools' imports) never counts against a timeout."""
        fresh = [_Worker() for _ in tools[: self.max_workers]]
        for tool, worker in zip(tools, fresh, strict=False):
            await self.call(tool, None, worker)

    async def call(
        self, tool: Tool, kwargs: dict[str, Any] | None, worker: _Worker | None = None
    ) -> Any:
        """Run ``tool.fn(**kwargs)`` in a worker; cancelling this terminates the worker."""
        where = _where(tool)
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_workers)
        try:
            await self._slots.acquire()
        except asyncio.CancelledError:
            found = watching()
            if found is not None and kwargs is not None:  # cut while waiting: never sent
                found.queued += 1
            raise
        try:
            if worker is None:
                worker = self._idle.pop() if self._idle else _Worker()
            loop = asyncio.get_running_loop()
            ready: asyncio.Future[None] = loop.create_future()
            fd = worker.conn.fileno()
            loop.add_reader(fd, _wake, ready)
            try:
                worker.conn.send((*where, kwargs))
                await ready
                kind, value = worker.conn.recv()
            except asyncio.CancelledError:
                loop.remove_reader(fd)
                self.terminated += 1
                worker.stop()
                found = watching()
                if found is not None and kwargs is not None:  # killed mid-call, not warming up
                    found.killed += 1
                raise
            except (EOFError, OSError) as exc:
                loop.remove_reader(fd)
                worker.stop()
                raise CallCrashedError(
                    f"the worker process of tool '{tool.name}' died mid-call ({exc}): its"
                    " effect is unknown",
                    in_doubt=True,
                ) from None
            loop.remove_reader(fd)
            if kind == "fatal":
                worker.retire()  # it is exiting: never handed another call
            else:
                self._idle.append(worker)
        finally:
            self._slots.release()
        if kind == "fatal":
            raise _fatal(tool, value)
        if kind == "error":
            raise value
        return value

    def close(self) -> None:
        """Stop every idle worker."""
        idle, self._idle = self._idle, []
        for worker in idle:
            worker.stop()
