"""The dashboard's Starlette app: pages, JSON, the live event stream and the operator actions.

Every store call runs in a worker thread (``asyncio.to_thread``): stores are synchronous, and
the server's event loop must keep serving streams meanwhile. Actions go only through
:mod:`planrail.engine.operations` and :func:`planrail.runs.resume` — the same lease checks and
``operator_action`` events as the CLI; nothing here writes the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, TypeVar

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from planrail._json import encodable
from planrail.clock import SYSTEM_CLOCK
from planrail.engine import operations
from planrail.engine.gate import REPLACES, REPLANNED_AS, replaced_by
from planrail.errors import PlanrailError, error_dict
from planrail.observe.graph import DepGraph
from planrail.observe.layout import to_svg
from planrail.plan.tools import ToolRegistry
from planrail.runs import resume as resume_run
from planrail.store.base import Event as StoredEvent
from planrail.store.base import RunNotFoundError, RunRecord, Store
from planrail.store.detach import Detachable
from planrail.types import Clock
from planrail.web import pages
from planrail.web.gantt import gantt_svg
from planrail.web.paths import ExactSegments, param
from planrail.web.security import Guard, GuardMiddleware
from planrail.web.views import (
    FILTERS,
    Masker,
    approval_view,
    event_message,
    previous_version,
    replaced_version,
    requested_steps,
    run_rows,
    step_detail,
    timeline,
)

__all__ = ["Dashboard", "create_app"]

log = logging.getLogger("planrail.web")
T = TypeVar("T")
HEARTBEAT = 15.0
"""Seconds between keep-alive comments on an idle event stream."""
MAX_BODY_BYTES = 1 << 20
"""The largest action body read (1 MiB; a resolve's output is the largest there is): a bigger
one is refused with 413 before it is read whole."""
RUN_ACTIONS = frozenset({"approve", "refuse", "cancel", "resume"})
STEP_ACTIONS = frozenset({"resolve", "retry"})
STOP_GRACE = 10.0
"""Seconds a stopping dashboard waits in all for the runs it resumed to record their cancel."""


@dataclass
class Dashboard:
    """What the app serves and acts on."""

    store: Store
    guard: Guard
    registry: ToolRegistry = field(default_factory=ToolRegistry)
    can_resume: bool = False
    """Whether tools were given (``--tools``/``--catalog``): without them nothing can run."""
    operator: str = "operator (dashboard)"
    clock: Clock = SYSTEM_CLOCK
    poll_interval: float = 0.25
    """Seconds between looks at the store for new events (bounded: runs driven by another
    process show up within this)."""
    runners: dict[str, threading.Thread] = field(default_factory=dict)
    """Resumes started from the dashboard, by run id (each in its own thread and loop)."""
    starting: asyncio.Lock = field(default_factory=asyncio.Lock)
    """Held from a resume's checks until its thread is registered in :attr:`runners`: two
    resumes asked at once start one run, and the other is told it is under way."""

    resuming: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Task[Any]]] = field(
        default_factory=dict
    )
    """The running resumes' loops and tasks, by run id (:meth:`stop_resumes` cancels them)."""
    stores: dict[str, Detachable] = field(default_factory=dict)
    """The store as each resume under way sees it, by run id (:meth:`stop_resumes` cuts off
    those still running after the grace)."""
    stopping: bool = False
    """Set by :meth:`stop_resumes`: a resume whose thread starts after it does not run."""
    stop_grace: float = STOP_GRACE
    """Seconds :meth:`stop_resumes` waits in all for the runs it cancelled to record it."""
    given_up: list[str] = field(default_factory=list)
    """The runs :meth:`stop_resumes` gave up still running, by id."""

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await asyncio.to_thread(fn, *args, **kwargs)

    def stop_resumes(self) -> list[str]:
        """The dashboard stops serving (``planrail ui`` ended, Ctrl-C): cancel the runs it
        resumed and wait up to :attr:`stop_grace` seconds in all for them to record it (each
        ends ``cancelled``, its lease released, as a cancelled run does), before the store
        closes under them.

        A run still busy after that (a tool slow to stop) is given up, its id returned and kept
        in :attr:`given_up` (also when the stop is a ``KeyboardInterrupt`` on its way): it
        is cut off from the store (:class:`~planrail.store.detach.Detachable`), so it winds down
        without writing anything more and the store may close. It stays as a crash leaves it —
        ``running``, its lease no longer renewed — and a resume takes it over once the lease
        has expired (on this host, as soon as this process has exited)."""
        self.stopping = True
        for loop, task in list(self.resuming.values()):
            with contextlib.suppress(RuntimeError):  # its loop has closed: it ended meanwhile
                loop.call_soon_threadsafe(task.cancel)
        deadline = self.clock.monotonic() + self.stop_grace
        for thread in list(self.runners.values()):
            thread.join(max(0.0, deadline - self.clock.monotonic()))
        for run_id, store in list(self.stores.items()):
            under_way = run_id in self.resuming
            # Whichever detaches first decides: the run, once its end is recorded, or this.
            if store.detach() and under_way:
                self.given_up.append(run_id)
        self.given_up.sort()
        return list(self.given_up)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _json(data: Any, status: int = 200) -> JSONResponse:
    """``data`` as a JSON answer, whatever its text holds (a lone surrogate in a record
    written before errors were made readable: escaped, not a 500)."""
    return JSONResponse(encodable(data), status_code=status)


def _error(exc: BaseException, status: int) -> JSONResponse:
    return _json({"error": error_dict(exc)}, status)


async def _run(dash: Dashboard, run_id: str) -> RunRecord:
    run = await dash.call(dash.store.get_run, run_id)
    if run is None:
        raise RunNotFoundError(f"no run '{run_id}' in this store", run_id=run_id)
    return run


def create_app(dash: Dashboard) -> Any:
    """The ASGI app: the Starlette app inside the :class:`GuardMiddleware`, inside
    :class:`~planrail.web.paths.ExactSegments` (a run id is one path segment, whatever it holds)."""

    async def list_page(request: Request) -> Response:
        return HTMLResponse(pages.run_list(dash.guard.csrf, FILTERS))

    async def run_page(request: Request) -> Response:
        run_id = param(request, "run_id")
        try:
            run, steps, info = await _info(dash, run_id)
        except RunNotFoundError as exc:
            return HTMLResponse(pages.not_found(exc.message), status_code=404)
        svg = to_svg(DepGraph.of(run.plan))  # uncoloured: the script paints the live states
        gantt = gantt_svg(timeline(run, steps, dash.clock.now()))
        return HTMLResponse(pages.run_page(dash.guard.csrf, info, svg, gantt))

    async def approval_page(request: Request) -> Response:
        run_id = param(request, "run_id")
        try:
            run = await _run(dash, run_id)
            previous = await dash.call(previous_version, dash.store, run)
            requested = await dash.call(requested_steps, dash.store, run)
            view = await dash.call(approval_view, run, dash.registry, previous, requested)
        except RunNotFoundError as exc:
            return HTMLResponse(pages.not_found(exc.message), status_code=404)
        except ValueError as exc:
            return HTMLResponse(pages.not_found(f"the stored plan is not valid: {exc}"), 409)
        return HTMLResponse(pages.approval_page(dash.guard.csrf, view, dash.can_resume))

    static_dir = resources.files("planrail.web").joinpath("static")
    static_files = frozenset(f.name for f in static_dir.iterdir() if f.is_file())

    async def static(request: Request) -> Response:
        name = param(request, "name")
        kind = {"js": "text/javascript", "css": "text/css"}.get(name.rpartition(".")[2])
        if kind is None or name not in static_files:  # never a path built from the request
            return Response("not found", 404)
        return Response(static_dir.joinpath(name).read_bytes(), media_type=kind)

    async def api_runs(request: Request) -> Response:
        flt = request.query_params.get("filter") or None
        if flt is not None and flt not in FILTERS:
            return _json({"error": error_dict("ValueError", f"unknown filter {flt!r}")}, 400)
        rows = await dash.call(run_rows, dash.store, flt, dash.clock.now())
        return _json({"runs": rows})

    async def api_run(request: Request) -> Response:
        return _json((await _info(dash, param(request, "run_id")))[2])

    async def api_timeline(request: Request) -> Response:
        run, steps = await _run_and_steps(dash, param(request, "run_id"))
        svg = gantt_svg(timeline(run, steps, dash.clock.now()))
        return Response(svg, media_type="image/svg+xml")

    async def api_step(request: Request) -> Response:
        run, steps = await _run_and_steps(dash, param(request, "run_id"))
        step_id = param(request, "step_id")
        if step_id not in steps and step_id not in plan_step_ids(run):
            return _no_step(run, step_id)
        events = await dash.call(dash.store.events, run.run_id)
        masker = Masker(run, dash.registry)
        return _json(step_detail(run, steps.get(step_id), step_id, events, masker))

    async def api_events(request: Request) -> Response:
        run_id = param(request, "run_id")
        raw = request.headers.get("last-event-id") or request.query_params.get("after") or "0"
        try:
            after = max(0, int(raw))
        except ValueError:
            after = 0
        return StreamingResponse(
            _stream(dash, run_id, after),
            media_type="text/event-stream",
            headers={"x-accel-buffering": "no"},
        )

    async def act(request: Request) -> Response:
        run_id = param(request, "run_id")
        action = param(request, "action")
        step_id = param(request, "step_id") if "step_id" in request.path_params else None
        if action not in (RUN_ACTIONS if step_id is None else STEP_ACTIONS):
            kind = "a run" if step_id is None else "a step"
            return _json({"error": error_dict("NotFound", f"no action '{action}' on {kind}")}, 404)
        raw = await _bounded_body(request)
        if raw is None:
            over = f"the body is over {MAX_BODY_BYTES:,} bytes"
            return _json({"error": error_dict("ValueError", over)}, 413)
        try:
            body = json.loads(raw, parse_constant=_refuse_constant) if raw else {}
        except (ValueError, RecursionError):  # not UTF-8, not JSON, NaN, nested too deep
            return _json({"error": error_dict("ValueError", "the body is not JSON")}, 400)
        if not isinstance(body, dict):
            return _json({"error": error_dict("ValueError", "the body must be an object")}, 400)
        wrong = _wrong_field(body)
        if wrong is not None:
            return _json({"error": error_dict("ValueError", wrong)}, 400)
        run, steps = await _run_and_steps(dash, run_id)  # no such run: 404, whatever else
        if step_id is not None and step_id not in steps and step_id not in plan_step_ids(run):
            return _no_step(run, step_id)
        try:
            answer = await _act(dash, run_id, action, step_id, body)
        except RunNotFoundError:
            raise
        except PlanrailError as exc:
            return _error(exc, 409)
        return _json(answer)

    async def not_found(request: Request, exc: Exception) -> Response:
        return _error(exc, 404)

    routes = [
        Route("/", list_page),
        Route("/runs/{run_id}", run_page),
        Route("/runs/{run_id}/approval", approval_page),
        Route("/static/{name}", static),
        Route("/favicon.ico", lambda request: Response(status_code=204)),
        Route("/api/runs", api_runs),
        Route("/api/runs/{run_id}", api_run),
        Route("/api/runs/{run_id}/timeline.svg", api_timeline),
        Route("/api/runs/{run_id}/events", api_events),
        Route("/api/runs/{run_id}/steps/{step_id}", api_step),
        Route("/api/runs/{run_id}/steps/{step_id}/{action}", act, methods=["POST"]),
        Route("/api/runs/{run_id}/{action}", act, methods=["POST"]),
    ]
    app = Starlette(routes=routes, exception_handlers={RunNotFoundError: not_found})
    return ExactSegments(GuardMiddleware(app, dash.guard))


_FIELD_TYPES: dict[str, tuple[type, str]] = {
    "run": (bool, "true or false"),
    "reason": (str, "text"),
    "decision": (str, "text"),
}


def _wrong_field(body: dict[str, Any]) -> str | None:
    """What is wrong with an action body's fields, or None: a refusal's ``reason`` is text, an
    approval's ``run`` a boolean (``"false"`` was taken as yes), a ``decision`` text; ``output``
    is any JSON value."""
    for name, (kind, said) in _FIELD_TYPES.items():
        value = body.get(name)
        if value is not None and type(value) is not kind:
            return f"'{name}' must be {said}, not {type(value).__name__}"
    return None


async def _bounded_body(request: Request) -> bytes | None:
    """The request's body, or None once it is over :data:`MAX_BODY_BYTES` (by its
    Content-Length, or as it arrives): never read whole."""
    declared = request.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        return None
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def plan_step_ids(run: RunRecord) -> set[str]:
    """The ids of the steps of a run's stored plan."""
    steps = run.plan.get("steps") if isinstance(run.plan, dict) else None
    return {str(s.get("id")) for s in steps or () if isinstance(s, dict)}


def _no_step(run: RunRecord, step_id: str) -> JSONResponse:
    said = f"run '{run.run_id}' has no step '{step_id}'"
    return _json({"error": error_dict("NotFound", said)}, 404)


async def _run_and_steps(dash: Dashboard, run_id: str) -> tuple[RunRecord, dict[str, Any]]:
    run = await _run(dash, run_id)
    return run, await dash.call(dash.store.get_steps, run_id)


async def _snapshot(
    dash: Dashboard, run_id: str
) -> tuple[RunRecord, dict[str, Any], list[StoredEvent]]:
    """The run, its steps and its events, for a page that then follows the run's stream from
    the last event's seq. The events are read first: a step that changes after that seq
    reaches the page by the stream even when the steps read next already show it. Read the
    other way round, a step ending between the two reads was in neither, and its node stayed
    as it was drawn."""
    events = await dash.call(dash.store.events, run_id)
    run = await _run(dash, run_id)
    return run, await dash.call(dash.store.get_steps, run_id), events


async def _info(dash: Dashboard, run_id: str) -> tuple[RunRecord, dict[str, Any], dict[str, Any]]:
    """The run, its steps, and what its page and its JSON say of it (:func:`_run_info`)."""
    run, steps, events = await _snapshot(dash, run_id)
    replaces = await dash.call(replaced_version, dash.store, run)
    return run, steps, _run_info(dash, run, steps, events, replaces)


def _run_info(
    dash: Dashboard,
    run: RunRecord,
    steps: dict[str, Any],
    events: list[StoredEvent],
    replaces: str | None,
) -> dict[str, Any]:
    masker = Masker(run, dash.registry)
    statuses = {str(s.get("id")): "pending" for s in run.plan.get("steps", [])}
    statuses.update({sid: str(r.status) for sid, r in steps.items()})
    running = dash.runners.get(run.run_id)
    return {
        "run_id": run.run_id,
        "status": run.status,
        "goal": str(run.plan.get("goal", "")),
        "plan_hash": run.plan_hash,
        "created_at": run.created_at,
        "updated_at": run.updated_at,
        "error": masker.value(run.error),
        "steps": statuses,
        "last_seq": events[-1].seq if events else 0,
        "can_resume": dash.can_resume,
        "resuming": running is not None and running.is_alive(),
        REPLANNED_AS: replaced_by(run),
        REPLACES: replaces,
    }


async def _stream(dash: Dashboard, run_id: str, after: int) -> AsyncIterator[str]:
    """Server-sent events: one message per stored event after ``after`` (its seq is the
    message id, so a reconnect with ``Last-Event-ID`` continues without a gap), plus the run's
    status whenever it changes."""
    yield "retry: 1000\n\n"
    last_status: str | None = None
    idle = 0.0
    while True:
        events = await dash.call(dash.store.events, run_id, after)
        run = await dash.call(dash.store.get_run, run_id)
        if run is None:
            yield _sse("gone", {"run_id": run_id})
            return
        steps = None
        if any(e.type == "operator_action" and e.step_id for e in events):
            steps = await dash.call(dash.store.get_steps, run_id)
        chunk = []
        for event in events:
            chunk.append(_sse("step", event_message(event, steps), event.seq))
            after = event.seq
        if run.status != last_status:
            last_status = run.status
            chunk.append(_sse("run", {"status": run.status, "seq": after}))
        if chunk:
            idle = 0.0
            yield "".join(chunk)
            continue
        await dash.clock.sleep(dash.poll_interval)
        idle += dash.poll_interval
        if idle >= HEARTBEAT:
            idle = 0.0
            yield ": keep-alive\n\n"


def _sse(kind: str, data: dict[str, Any], seq: int | None = None) -> str:
    head = f"id: {seq}\n" if seq is not None else ""
    return f"{head}event: {kind}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


async def _act(
    dash: Dashboard, run_id: str, action: str, step_id: str | None, body: dict[str, Any]
) -> dict[str, Any]:
    store, by, clock = dash.store, dash.operator, dash.clock
    if step_id is None and action == "approve":
        if body.get("run"):
            _check_can_resume(dash, run_id)  # before the approval: not approved, then refused
        run = await dash.call(operations.approve, store, run_id, by=by, clock=clock)
        answer: dict[str, Any] = {"status": run.status, "plan_hash": run.plan_hash}
        if body.get("run"):
            try:
                answer["resume"] = await _resume(dash, run_id)
            except PlanrailError as exc:  # approved all the same: said with why it did not run
                answer["resume_error"] = error_dict(exc)
        return answer
    if step_id is None and action == "refuse":
        reason = body.get("reason") or "refused by an operator"
        run = await dash.call(operations.refuse, store, run_id, by=by, reason=reason, clock=clock)
        return {"status": run.status}
    if step_id is None and action == "cancel":
        outcome = await dash.call(operations.cancel, store, run_id, by=by, clock=clock)
        return {"outcome": outcome}
    if step_id is None and action == "resume":
        return {"resume": await _resume(dash, run_id)}
    if step_id is not None and action == "resolve":
        decision = str(body.get("decision", ""))
        await dash.call(
            operations.resolve,
            store,
            run_id,
            step_id,
            decision,  # checked by resolve itself
            output=body.get("output"),
            by=by,
            registry=dash.registry,
            clock=clock,
        )
        return {"step": step_id, "decision": decision}
    if step_id is not None and action == "retry":
        await dash.call(operations.retry_step, store, run_id, step_id, by=by, clock=clock)
        return {"step": step_id, "retry": True}
    raise operations.OperationError(f"no action '{action}'", run_id=run_id)


def _check_can_resume(dash: Dashboard, run_id: str) -> None:
    if not dash.can_resume:
        raise operations.OperationError(
            "resume needs the run's tools: start `planrail ui` with --tools/--catalog",
            run_id=run_id,
        )


async def _resume(dash: Dashboard, run_id: str) -> str:
    """Start continuing the run in a thread of its own (its own event loop), through the one
    run path; the run page follows it by its events. Said before it starts, not in the log
    after: no such run (404), no tools, a run resumed here already, or driven by another
    process (409, at once: a resume would wait for the lease)."""
    _check_can_resume(dash, run_id)
    async with dash.starting:
        current = dash.runners.get(run_id)
        if current is not None and current.is_alive():
            raise operations.OperationError(
                f"run '{run_id}' is already being resumed here", run_id=run_id
            )
        await dash.call(operations.check_resumable, dash.store, run_id, dash.clock)
        store = Detachable(dash.store)
        execution = await dash.call(resume_run, run_id, dash.registry, store=store)
        given_up = False

        async def resume() -> None:
            nonlocal given_up
            task = asyncio.current_task()
            assert task is not None
            dash.resuming[run_id] = (asyncio.get_running_loop(), task)
            try:
                if not dash.stopping:  # else it was registered after stop_resumes looked
                    await execution.run()
            finally:
                dash.resuming.pop(run_id, None)
                given_up = not store.detach()  # cut off by stop_resumes before it ended
                dash.stores.pop(run_id, None)

        def drive() -> None:
            try:
                asyncio.run(resume())
            except asyncio.CancelledError:
                if not given_up:  # else nothing was recorded, and stop_resumes said so
                    log.info("resume of run %s cancelled: the dashboard stopped", run_id)
            except PlanrailError as exc:
                log.warning("resume of run %s stopped: %s", run_id, exc.message)

        thread = threading.Thread(target=drive, name=f"planrail-ui-resume-{run_id}", daemon=True)
        dash.runners[run_id] = thread
        dash.stores[run_id] = store
        thread.start()
    return "started"
