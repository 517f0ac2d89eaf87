"""Tool calls on a Ray cluster while planrail keeps the plan (the ``[ray]`` extra).

:class:`RayRunner` implements the tool-runner seam (:class:`planrail.plan.tools.ToolRunner`).
The plan, validation, approval, retries, budgets, policies and checkpoints stay in planrail's
process; only fully resolved, validated tool calls cross to Ray:

- a **sync** tool (CPU-bound work) runs as a Ray task, placed with the ``compute`` its tool or
  step declares (``num_cpus``, ``num_gpus``, ``memory``); an **async** tool (I/O-bound) runs on
  a pool of async actors that reserve no CPU (``num_cpus=0``) and together take at most
  ``max_concurrency`` calls at once (an async tool that declares ``compute`` runs as a task);
- planrail owns the attempts: Ray's retries are off (``max_retries=0``,
  ``retry_exceptions=False``, actors never restart); a worker or actor that dies mid-call is a
  :class:`~planrail.errors.CallCrashedError` (retryable for tools that honour idempotency keys,
  ``in_doubt`` for the others);
- results are awaited as futures, never with ``ray.get`` on the event loop; cancelling a call
  (a timeout, a cancelled run) is ``ray.cancel``: graceful first, then forced after
  ``cancel_grace`` seconds (a task's worker is killed; an actor is killed and replaced). A
  task's graceful cancel is sent again every half second until the call ends (Ray drops one
  that reaches the worker while it starts the task); the tool sees only the first (a
  KeyboardInterrupt in a sync call, a CancelledError in an async one);
- tools travel by import path (:mod:`planrail.backends.shipping`), checked on the workers
  themselves by :meth:`RayRunner.prepare`, which also warms the actor pool before the first step.

See ``docs/distributed.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import os
import signal
import threading
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NoReturn

import ray
import ray.exceptions as rex

from planrail._json import canonical_data
from planrail.backends.shipping import Locator, ToolShippingError, locate, resolve
from planrail.errors import CallCrashedError, ExecutionError, ReferenceResolutionError
from planrail.plan.effects import tool_effect
from planrail.plan.tools import Tool

__all__ = ["RayRunner", "ToolShippingError"]

_CRASHES: tuple[type[BaseException], ...] = (
    rex.WorkerCrashedError,
    rex.RayActorError,  # ActorDiedError, ActorUnavailableError
    rex.NodeDiedError,
    rex.LocalRayletDiedError,
    rex.OutOfMemoryError,
    rex.ObjectLostError,  # OwnerDiedError, ObjectReconstructionFailedError, ...
    rex.TaskCancelledError,  # cancelled by someone else than this runner
)
"""What Ray raises when the process running a call went away: the attempt crashed."""


# ---------------------------------------------------------------------- the worker side


HANDLE = "$ray_object"
"""The key that marks a step output left in the object store (``remote_output``)."""


def _execute(locator: Locator, kwargs: dict[str, Any]) -> Any:
    """One call in a task's worker (an async tool gets an event loop of its own)."""
    tool = resolve(locator)
    kwargs = {k: ray.get(v) if isinstance(v, ray.ObjectRef) else v for k, v in kwargs.items()}
    if tool.is_async:
        return asyncio.run(_once_interrupted(tool.fn(**kwargs)))
    with _one_interrupt():
        return tool.fn(**kwargs)


async def _once_interrupted(call: Any) -> Any:
    """An async tool's call in a task's own event loop: Ray's graceful cancel (a SIGINT
    simulated in this main thread) cancels it — the first one only, so its clean-up runs to its
    end. The loop watches for the signal (``add_signal_handler``); without that it slept in its
    selector through the cancel, and the call ran on until ``cancel_grace`` forced its worker."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    done = False

    def first_only() -> None:
        nonlocal done
        if not done and task is not None:
            done = True
            task.cancel()

    previous = signal.getsignal(signal.SIGINT)
    try:
        loop.add_signal_handler(signal.SIGINT, first_only)
    except (RuntimeError, ValueError):  # not the main thread: no signal reaches this loop
        return await call
    try:
        return await call
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def _one_interrupt() -> Iterator[None]:
    """Ray's graceful cancel is a SIGINT simulated in the task's (main) thread, and the runner
    sends it again until the call ends (:meth:`RayRunner._stop`): only the first reaches the
    handler in place (Python's: a KeyboardInterrupt in the sync call), so the tool's own
    clean-up is not cut short by the next one."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    interrupted = False

    def first_only(signum: int, frame: Any) -> None:
        nonlocal interrupted
        if not interrupted:
            interrupted = True
            if callable(previous):
                previous(signum, frame)
            else:  # SIG_DFL or SIG_IGN set by someone: what a graceful cancel means in Python
                raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, first_only)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


_run_task = ray.remote(max_retries=0, retry_exceptions=False)(_execute)


@ray.remote(max_retries=0, retry_exceptions=False, num_returns=2)
def _run_task_kept(locator: Locator, kwargs: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """As :func:`_run_task`, keeping the checked output here: ``(summary, output)``."""
    return _summarised(locator, _execute(locator, kwargs))


def _summarised(locator: Locator, raw: Any) -> tuple[dict[str, Any], Any]:
    value = resolve(locator).output(raw)  # checked against the return type where it lives
    text = canonical_data(value)
    data = text.encode()
    summary = {
        "digest": "sha256:" + hashlib.sha256(data).hexdigest(),
        "bytes": len(data),
        "preview": text[:PREVIEW_CHARS],
    }
    return summary, value


PREVIEW_CHARS = 200
"""How much of a kept output's JSON text the run records."""


@ray.remote(max_retries=0, retry_exceptions=False)
def _import_tools(locators: list[Locator]) -> dict[str, str]:
    """Import every tool here, on a worker; ``{tool_name: why it failed}``."""
    failed: dict[str, str] = {}
    for loc in locators:
        try:
            resolve(loc)
        except Exception as exc:
            failed[loc[2]] = f"{type(exc).__name__}: {exc}".splitlines()[0]
    return failed


class _ToolActor:
    """An async actor running async tools; many calls at once (its ``max_concurrency``).

    Calls are cancelled through :meth:`cancel`, not ``ray.cancel``: a ``ray.cancel`` that
    reaches an async actor before the call's coroutine exists is lost while the caller is told
    the call was cancelled (ray-project/ray#52628). Here a cancel that arrives first is
    remembered, and the call it names never starts.
    """

    def __init__(self) -> None:
        self._running: dict[int, asyncio.Task[Any]] = {}
        self._refused: deque[int] = deque(maxlen=4096)

    async def ready(self, locators: list[Locator]) -> int:
        for loc in locators:
            resolve(loc)
        return os.getpid()

    async def call(self, call_id: int, locator: Locator, kwargs: dict[str, Any]) -> Any:
        if call_id in self._refused:
            raise asyncio.CancelledError
        task = asyncio.current_task()
        assert task is not None
        self._running[call_id] = task
        try:
            for k, v in kwargs.items():
                if isinstance(v, ray.ObjectRef):
                    kwargs[k] = await v
            return await resolve(locator).fn(**kwargs)
        finally:
            del self._running[call_id]

    async def call_kept(
        self, call_id: int, locator: Locator, kwargs: dict[str, Any]
    ) -> tuple[dict[str, Any], Any]:
        return _summarised(locator, await self.call(call_id, locator, kwargs))

    async def cancel(self, call_id: int) -> None:
        task = self._running.get(call_id)
        if task is None:
            self._refused.append(call_id)
        else:
            task.cancel()


_RemoteActor = ray.remote(num_cpus=0, max_restarts=0, max_task_retries=0)(_ToolActor)


# ---------------------------------------------------------------------- the driver side


class RayRunner:
    """Python tool calls on Ray (see the module docstring).

    A step with ``remote_output`` leaves its (checked) output in the object store: the step's
    output is a handle ``{"$ray_object", "digest", "bytes", "preview"}``, and a later call on
    this runner that receives the handle as an argument gets the object itself, fetched by
    its worker. The runner holds kept objects until :meth:`aclose`.

    ``address``: ``None`` attaches to the Ray runtime this process already initialised, or
    starts a local one (or joins ``RAY_ADDRESS``); ``"auto"`` joins the cluster running on this
    machine; ``"ray://host:10001"`` connects through Ray Client. ``ray.init`` is called only when
    no runtime is attached, and only a runtime this runner initialised is shut down by
    :meth:`aclose`. ``runtime_env`` (``working_dir``, ``py_modules``, ``pip``, ``env_vars``) is
    declared once for the run: given to ``ray.init`` when this runner starts Ray, otherwise
    attached to every task and actor it creates.
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        runtime_env: Mapping[str, Any] | None = None,
        max_concurrency: int = 64,
        actors: int = 2,
        cancel_grace: float = 3.0,
        init_options: Mapping[str, Any] | None = None,
    ) -> None:
        if max_concurrency < 1 or actors < 1:
            raise ValueError("max_concurrency and actors must be at least 1")
        if cancel_grace < 0:
            raise ValueError("cancel_grace must be >= 0")
        self.address = address
        self.runtime_env = dict(runtime_env) if runtime_env is not None else None
        self.max_concurrency = max_concurrency
        """Most async calls in flight at once, over the whole actor pool."""
        self.actors = min(actors, max_concurrency)
        self.cancel_grace = cancel_grace
        """Seconds a cancelled call has to stop by itself before it is forced."""
        self.init_options = dict(init_options or {})
        """More keyword arguments for ``ray.init`` (when this runner calls it)."""
        self._initialised = False
        self._locators: dict[int, Locator] = {}
        """By ``id(tool.fn)``: how workers import each prepared tool."""
        self._pool: list[Any] = []
        self._load: list[int] = []
        """Calls in flight on each actor of the pool."""
        self._tasks: dict[tuple[bool, tuple[tuple[str, float], ...]], Any] = {}
        """The task function bound to each placement (``.options`` once, not per call)."""
        self._env_options: dict[str, Any] = {}
        self._ids = itertools.count(1)
        self._kept: dict[str, Any] = {}
        """Outputs left in the object store (``remote_output``), by handle, for the run."""
        self._checked: set[Locator] = set()
        """Tools already imported on the workers by an earlier :meth:`prepare`."""

    # ------------------------------------------------------------------ the seam

    async def prepare(self, tools: Sequence[Tool]) -> None:
        """Attach to Ray (or start it), check that every tool imports *on a worker*, warm the
        actor pool. :class:`ToolShippingError` names each tool that cannot run there and why."""
        locators = {t.name: locate(t) for t in tools}  # refuses closures, lambdas, __main__
        self._attach()
        for t in tools:
            self._locators[id(t.fn)] = locators[t.name]
        wanted = [loc for loc in dict.fromkeys(locators.values()) if loc not in self._checked]
        checks = []
        if wanted:
            width = max(1, min(16, int(_cluster_cpus())))
            checks = [
                _import_tools.options(num_cpus=1, **self._env_options).remote(wanted)
                for _ in range(width)
            ]
        if any(t.is_async for t in tools) and not self._pool:
            self._pool = [self._actor(i) for i in range(self.actors)]
            self._load = [0] * len(self._pool)
            every = list(dict.fromkeys(locators.values()))
            checks.extend(actor.ready.remote(every) for actor in self._pool)
        if not checks:
            return
        try:
            found = await asyncio.gather(*checks)
        except rex.RayTaskError as exc:  # an actor could not import a tool
            raise ToolShippingError(
                f"the tools cannot run on Ray: {_brief(exc.cause or exc)}"
            ) from None
        failed: dict[str, str] = {}
        for result in found:
            if isinstance(result, dict):
                failed.update(result)
        self._checked.update(loc for loc in wanted if loc[2] not in failed)
        if failed:
            raise ToolShippingError(
                "; ".join(
                    f"tool '{name}' does not import on a Ray worker: {why}"
                    for name, why in failed.items()
                )
            )

    keeps_outputs = True
    """Honours a step's ``remote_output``."""

    def call(self, tool: Tool, kwargs: dict[str, Any]) -> Any:
        return self._call(tool, kwargs)

    async def aclose(self) -> None:
        """Kill the actor pool; shut Ray down if this runner started it."""
        pool, self._pool, self._load = self._pool, [], []
        for actor in pool:
            ray.kill(actor, no_restart=True)
        self._locators.clear()
        self._kept.clear()
        self._checked.clear()
        if self._initialised:
            self._initialised = False
            ray.shutdown()

    # ------------------------------------------------------------------ calls

    async def _call(self, tool: Tool, kwargs: dict[str, Any]) -> Any:
        locator = self._locators.get(id(tool.fn))
        if locator is None:  # a tool prepare() did not see (a streamed plan's later step)
            locator = self._locators[id(tool.fn)] = locate(tool)
        kwargs = self._fetchable(tool, kwargs)
        keep = tool.remote_output
        compute = tool.spec.compute
        if tool.is_async and not compute:
            index = self._least_loaded()
            actor = self._pool[index]
            self._load[index] += 1
            call_id = next(self._ids)
            try:
                if keep:
                    kept = actor.call_kept.options(num_returns=2).remote(call_id, locator, kwargs)
                    summary = await self._await(kept[0], tool, actor, call_id)
                    return self._handle(summary, kept[1])
                ref = actor.call.remote(call_id, locator, kwargs)
                return await self._await(ref, tool, actor, call_id)
            finally:
                if index < len(self._load) and self._pool[index] is actor:
                    self._load[index] -= 1
        if keep:
            kept = self._task(compute, kept=True).remote(locator, kwargs)
            return self._handle(await self._await(kept[0], tool, None), kept[1])
        return await self._await(self._task(compute).remote(locator, kwargs), tool, None)

    def _handle(self, summary: dict[str, Any], ref: Any) -> dict[str, Any]:
        """A kept output as the step records it; the runner holds the object for the run."""
        key = ref.hex()
        self._kept[key] = ref
        return {HANDLE: key, **summary}

    def _fetchable(self, tool: Tool, kwargs: dict[str, Any]) -> dict[str, Any]:
        """Arguments that are handles of kept outputs become their objects (fetched by the
        worker, never through this process); a handle whose object is gone is an error."""
        swapped: dict[str, Any] | None = None
        for name, value in kwargs.items():
            if type(value) is dict and HANDLE in value:
                ref = self._kept.get(value[HANDLE])
                if ref is None:
                    raise ReferenceResolutionError(
                        f"argument '{name}' of tool '{tool.name}' is an output left in Ray's"
                        f" object store by an earlier process ({value.get('digest')}); it is"
                        " gone: run the step that produced it again (a new run)"
                    )
                swapped = swapped if swapped is not None else dict(kwargs)
                swapped[name] = ref
        return kwargs if swapped is None else swapped

    def _least_loaded(self) -> int:
        if not self._pool:
            raise RuntimeError("RayRunner.prepare() was not awaited before the first call")
        load = self._load
        return min(range(len(load)), key=load.__getitem__)

    def _task(self, compute: Mapping[str, float] | None, *, kept: bool = False) -> Any:
        key = (kept, tuple(sorted((compute or {}).items())))
        fn = self._tasks.get(key)
        if fn is None:
            base = _run_task_kept if kept else _run_task
            options: dict[str, Any] = dict(self._env_options)
            options.update(compute or {})
            if "memory" in options:
                options["memory"] = int(options["memory"])
            fn = self._tasks[key] = base.options(**options) if options else base
        return fn

    async def _await(self, ref: Any, tool: Tool, actor: Any, call_id: int = 0) -> Any:
        """The call's result; its own exception (unwrapped); a crash as CallCrashedError."""
        try:
            return await asyncio.wrap_future(ref.future())
        except asyncio.CancelledError:
            await self._stop(ref, actor, call_id)
            raise
        except rex.RayTaskError as exc:
            if isinstance(exc.cause, BaseException) and not isinstance(exc, _CRASHES):
                raise exc.cause from None
            if not isinstance(exc, _CRASHES):
                raise
            self._crashed(tool, exc, actor)
        except _CRASHES as exc:
            self._crashed(tool, exc, actor)

    def _crashed(self, tool: Tool, exc: BaseException, actor: Any) -> NoReturn:
        if actor is not None:
            self._replace(actor)
        keyed = tool_effect(tool.spec).may_rerun
        then = (
            "it honours idempotency keys, so it may run again with the same key"
            if keyed
            else "its effect is in doubt (it does not honour idempotency keys):"
            " decide with `planrail resolve`"
        )
        where = "actor" if actor is not None else "worker"
        raise CallCrashedError(
            f"the Ray {where} running tool '{tool.name}' died mid-call"
            f" ({type(exc).__name__}: {_brief(exc)}); {then}",
            in_doubt=not keyed,
        ) from None

    async def _stop(self, ref: Any, actor: Any, call_id: int) -> None:
        """Cancel a call gracefully; force it if it has not stopped after ``cancel_grace``."""
        done = asyncio.wrap_future(ref.future())
        done.add_done_callback(_consume)
        if actor is None:
            # KeyboardInterrupt in the task. A graceful cancel that reaches the worker while it
            # starts the task (out of its queue, not yet running) is dropped — Ray answers that
            # nothing was running and does not try again — so it is sent again until the call
            # ends or the grace is over; the worker lets only the first through (_one_interrupt).
            waited = 0.0
            while True:
                ray.cancel(ref, force=False, recursive=True)
                wait = min(_RECANCEL_S, self.cancel_grace - waited)
                finished, _ = await asyncio.wait({done}, timeout=wait)
                if finished:
                    return
                waited += wait
                if waited >= self.cancel_grace:
                    break
        else:
            actor.cancel.remote(call_id)  # CancelledError in the call's coroutine
            finished, _ = await asyncio.wait({done}, timeout=self.cancel_grace)
            if finished:
                return
        if actor is None:
            ray.cancel(ref, force=True, recursive=True)  # kills the task's worker
            await asyncio.wait({done}, timeout=self.cancel_grace)
        else:  # an actor task cannot be forced: the actor goes, and a fresh one takes its place
            self._replace(actor)
        done.cancel()

    def _replace(self, actor: Any) -> None:
        """Drop a dead (or stuck) actor from the pool; start a fresh one in its place."""
        for i, member in enumerate(self._pool):
            if member is actor:
                ray.kill(actor, no_restart=True)
                self._pool[i] = self._actor(i)
                self._load[i] = 0
                return

    def _actor(self, i: int) -> Any:
        """A fresh actor for place ``i`` of the pool, taking its share of ``max_concurrency``:
        the shares add up to it exactly (4 and 3 of 7 over two actors), so the pool never has
        more calls in flight (each actor used to take the share rounded up: 2 + 2 for 3)."""
        share, more = divmod(self.max_concurrency, self.actors)
        return _RemoteActor.options(
            max_concurrency=share + (1 if i < more else 0), **self._env_options
        ).remote()

    # ------------------------------------------------------------------ attaching

    def _attach(self) -> None:
        """``ray.init`` unless a runtime is attached; where ``runtime_env`` goes."""
        if self._initialised:
            return
        if ray.is_initialized():
            if self.runtime_env is not None:
                self._env_options = {"runtime_env": self.runtime_env}
            return
        options: dict[str, Any] = {"include_dashboard": False, **self.init_options}
        if self.runtime_env is not None:
            options["runtime_env"] = self.runtime_env
        # Blocks for the start-up of a local runtime (seconds), once, before the first step.
        try:
            ray.init(address=self.address, **options)
        except Exception as exc:  # no cluster there, a bad address, Ray Client not installed
            where = f"at {self.address}" if self.address else "(a local runtime)"
            raise ExecutionError(
                f"Ray {where} could not be started or reached: {type(exc).__name__}: {exc}"
            ) from exc
        self._initialised = True


_RECANCEL_S = 0.5
"""How often a graceful cancel of a task is sent again while the call has not stopped."""


def _cluster_cpus() -> float:
    resources: Any = ray.cluster_resources
    return float(resources().get("CPU", 1))


def _consume(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        fut.exception()


def _brief(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
