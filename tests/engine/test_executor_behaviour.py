"""The executor's contracts beyond ordering: concurrency limit, priorities, copies of outputs,
threads for sync tools, the step context, call-time argument checks and the event stream."""

from __future__ import annotations

import asyncio
import math
import threading
from typing import Any

import pytest

import planrail
from planrail.engine.events import Event, EventType
from planrail.engine.executor import Execution
from planrail.plan.tools import StepContext
from planrail.runs import prepare
from planrail.types import StepStatus

from .graphs import DIAMOND, FAN, Graph, random_dag
from .probes import LoopClock, Recorder, probe_plan, run_graph

S = StepStatus
E = EventType


# ---------------------------------------------------------------- concurrency and priority


@pytest.mark.looptime
@pytest.mark.parametrize("limit", [1, 2, 5, 12])
async def test_max_concurrency_is_never_exceeded_and_is_reached(limit: int) -> None:
    """With ``max_concurrency=N`` the probes never see more than N steps running at once, the
    twelve fan-out workers run in ``ceil(12 / N)`` waves, and every step still runs."""
    rec = Recorder()
    result = await run_graph(FAN, rec, max_concurrency=limit)
    assert result.status == "succeeded"
    assert rec.max_running == limit
    assert result.steps["sink"].finished_at == 1 + math.ceil(12 / limit) + 1


@pytest.mark.looptime
@pytest.mark.parametrize("seed", range(5))
async def test_max_concurrency_holds_on_random_dags(seed: int) -> None:
    """On random DAGs with a limit of 2, no more than two probes ever overlap and dependencies
    are still respected."""
    graph = random_dag(seed, n=12, p=0.2)
    rec = Recorder()
    result = await run_graph(graph, rec, max_concurrency=2)
    assert result.status == "succeeded"
    assert rec.max_running <= 2
    calls = rec.by_step()
    for step, call in calls.items():
        for d in graph.deps[step]:
            end = calls[d].end
            assert end is not None
            assert end <= call.start


def test_max_concurrency_below_one_is_refused() -> None:
    """``max_concurrency=0`` is a programming error, refused before anything runs."""
    rec = Recorder()
    with pytest.raises(ValueError, match="at least 1"):
        prepare(probe_plan(DIAMOND), [rec.tool()], max_concurrency=0, approve=True)


@pytest.mark.looptime
async def test_the_longest_remaining_path_starts_first() -> None:
    """When only one step may run, the ready step with the longest remaining critical path is
    started first, even if the plan lists a short independent step before it. (With all
    estimates equal, ``long1`` (2 steps left) beats ``short`` (1); ``long2`` then ties with
    ``short``, which became ready first.)"""
    graph = Graph("crit", {"short": (), "long0": (), "long1": ("long0",), "long2": ("long1",)})
    rec = Recorder()
    await run_graph(graph, rec, max_concurrency=1)
    assert [c.step for c in rec.calls] == ["long0", "long1", "short", "long2"]


# ---------------------------------------------------------------- outputs are copies

SHARED: list[int] = []


@planrail.tool(side_effects="none")
def produce() -> dict[str, Any]:
    """An output with nested containers that consumers will try to mutate."""
    return {"items": [1, 2], "meta": {"k": "v"}}


@planrail.tool(side_effects="none")
def mutate(data: dict[str, Any], items: list[int]) -> dict[str, Any]:
    """Mutates everything it was given, then returns it."""
    data["items"].append(99)
    data["meta"]["k"] = "changed"
    data["new"] = True
    items.clear()
    return data


SEEN: dict[str, Any] = {}


@planrail.tool(side_effects="none")
def observe(data: dict[str, Any], items: list[int]) -> bool:
    """Records what it received."""
    SEEN["data"], SEEN["items"] = data, items
    return True


@planrail.tool(side_effects="none")
def leak() -> list[int]:
    """Returns a module-level list that a later step mutates."""
    SHARED[:] = [1, 2, 3]
    return SHARED


@planrail.tool(side_effects="none")
def poke() -> int:
    """Mutates the list ``leak`` returned."""
    SHARED.append(4)
    return len(SHARED)


async def test_a_tool_mutating_its_inputs_cannot_change_other_inputs_or_stored_outputs() -> None:
    """``mutate`` changes the dict and list it received; ``observe`` (run after it, reading the
    same references) still receives the original values, and ``produce``'s stored output and
    the run's ``outputs`` are unchanged. A tool mutating a value another tool returned and
    kept a handle on cannot change that step's stored output either."""
    SEEN.clear()
    plan = {
        "steps": [
            {"id": "p", "tool": "produce"},
            {
                "id": "m",
                "tool": "mutate",
                "args": {"data": "${p}", "items": "${p.items}"},
                "depends_on": ["p"],
            },
            {
                "id": "o",
                "tool": "observe",
                "args": {"data": "${p}", "items": "${p.items}"},
                "depends_on": ["p", "m"],
            },
            {"id": "leak", "tool": "leak"},
            {"id": "poke", "tool": "poke", "depends_on": ["leak"]},
        ]
    }
    ex = prepare(plan, [produce, mutate, observe, leak, poke], approve=True)
    result = await ex.run()
    assert result.status == "succeeded"
    original = {"items": [1, 2], "meta": {"k": "v"}}
    assert {"data": original, "items": [1, 2]} == SEEN
    assert result.steps["p"].output == original
    assert ex.outputs["p"] == original
    assert result.steps["m"].output == {"items": [1, 2, 99], "meta": {"k": "changed"}, "new": True}
    assert SHARED == [1, 2, 3, 4]
    assert result.steps["leak"].output == [1, 2, 3]


# ---------------------------------------------------------------- threads, loop, context


async def test_sync_tools_run_in_threads_without_blocking_the_loop() -> None:
    """A sync tool runs in a worker thread: while it blocks (until released), an async step on
    the event loop starts, progresses and releases it. Were the sync tool run on the loop, the
    async step could never run and the sync tool would time out and fail."""
    loop = asyncio.get_running_loop()
    sync_started = asyncio.Event()
    release = threading.Event()
    log: list[str] = []

    @planrail.tool(side_effects="none")
    def blocking() -> str:
        """Blocks its thread until the async step releases it."""
        log.append("sync started")
        loop.call_soon_threadsafe(sync_started.set)
        if not release.wait(timeout=30):
            raise TimeoutError("never released: the loop was blocked")
        log.append("sync finished")
        return threading.current_thread().name

    @planrail.tool(side_effects="none")
    async def nimble() -> str:
        """Runs on the loop while the sync tool blocks, then releases it."""
        await sync_started.wait()
        for i in range(3):
            await asyncio.sleep(0)
            log.append(f"async tick {i}")
        release.set()
        return threading.current_thread().name

    plan = {"steps": [{"id": "sync", "tool": "blocking"}, {"id": "async", "tool": "nimble"}]}
    result = await prepare(plan, [blocking, nimble], approve=True).run()
    assert result.status == "succeeded", result.to_dict()
    assert log == ["sync started", "async tick 0", "async tick 1", "async tick 2", "sync finished"]
    assert result.steps["sync"].output.startswith("planrail-tool")
    assert result.steps["async"].output == threading.current_thread().name


async def test_tools_receive_their_step_context() -> None:
    """Sync and async tools that declare a ``StepContext`` parameter receive the run id, their
    step id, attempt 1 and the idempotency key ``run_id:step_id``; it is not an argument."""
    seen: dict[str, StepContext] = {}

    @planrail.tool(side_effects="keyed")
    def sync_ctx(ctx: StepContext, label: str) -> str:
        seen[label] = ctx
        return label

    @planrail.tool(side_effects="keyed")
    async def async_ctx(label: str, context: StepContext) -> str:
        seen[label] = context
        return label

    assert "ctx" not in (sync_ctx.spec.input_schema.get("properties") or {})
    plan = {
        "steps": [
            {"id": "one", "tool": "sync_ctx", "args": {"label": "s"}},
            {"id": "two", "tool": "async_ctx", "args": {"label": "a"}},
        ]
    }
    result = await prepare(plan, [sync_ctx, async_ctx], run_id="run_ctx", approve=True).run()
    assert result.status == "succeeded"
    assert result.run_id == "run_ctx"
    for label, step in (("s", "one"), ("a", "two")):
        ctx = seen[label]
        assert (ctx.run_id, ctx.step_id, ctx.attempt) == ("run_ctx", step, 1)
        assert ctx.idempotency_key == f"run_ctx:{step}"


async def test_a_generated_run_id_is_used_in_every_key() -> None:
    """Without a ``run_id`` one is generated (``run_`` + 12 hex digits) and every step's
    idempotency key starts with it."""
    keys: list[str] = []

    @planrail.tool(side_effects="keyed")
    def k(ctx: StepContext) -> str:
        keys.append(ctx.idempotency_key)
        return ctx.run_id

    plan = {"steps": [{"id": "x", "tool": "k"}, {"id": "y", "tool": "k"}]}
    result = await prepare(plan, [k], approve=True).run()
    assert result.run_id.startswith("run_")
    assert len(result.run_id) == 16
    assert sorted(keys) == [f"{result.run_id}:x", f"{result.run_id}:y"]


# ---------------------------------------------------------------- arguments at call time

CALLED: list[Any] = []


@planrail.tool(side_effects="none")
def untyped_source(value: Any = None, drop: bool = False):  # type: ignore[no-untyped-def]
    """No return annotation: its output's shape is unknown until it runs."""
    return {} if drop else {"n": value, "xs": [value]}


@planrail.tool(side_effects="none")
def needs_int(n: int) -> int:
    """Must receive a real integer."""
    CALLED.append(n)
    return n * 2


@pytest.mark.parametrize(
    ("source_args", "ref", "expected"),
    [
        pytest.param(
            {"value": None},
            "${src.n}",
            "n: Input should be a valid integer",
            id="null-is-not-an-int",
        ),
        pytest.param(
            {"value": "not a number"},
            "${src.n}",
            "n: Input should be a valid integer",
            id="text-is-not-an-int",
        ),
        pytest.param(
            {"value": {"a": 1}},
            "${src.n}",
            "n: Input should be a valid integer",
            id="object-is-not-an-int",
        ),
        pytest.param({"drop": True}, "${src.n}", "has no key 'n'", id="missing-field"),
        pytest.param({"value": 1}, "${src.xs.5}", "${src.xs.5}", id="index-out-of-range"),
    ],
)
async def test_wrong_or_missing_referenced_values_fail_the_step_clearly(
    source_args: dict[str, Any], ref: str, expected: str
) -> None:
    """A referenced output that turns out at run time to have the wrong type, or not to exist,
    fails the consuming step with a clear error; the tool is never called (never with None)
    and the failure's dependents are skipped."""
    CALLED.clear()
    plan = {
        "steps": [
            {"id": "src", "tool": "untyped_source", "args": source_args},
            {"id": "use", "tool": "needs_int", "args": {"n": ref}, "depends_on": ["src"]},
            {"id": "after", "tool": "needs_int", "args": {"n": "${use}"}, "depends_on": ["use"]},
        ]
    }
    result = await prepare(plan, [untyped_source, needs_int], approve=True).run()
    assert CALLED == []
    use = result.steps["use"]
    assert use.status == S.FAILED
    assert use.error is not None
    assert expected in use.error["message"]
    assert use.error["retryable"] is False
    if "key" in expected or "$" in expected:
        assert use.error["type"] == "ReferenceResolutionError"
    else:
        assert use.error["type"] == "ArgumentError"
        assert "needs_int" in use.error["message"]
    assert result.steps["after"].status == S.SKIPPED
    assert result.status == "failed"


@planrail.tool(side_effects="none")
def liar() -> int:
    """Declares an int, returns text."""
    return "seven"  # type: ignore[return-value]


async def test_an_output_that_breaks_its_declared_type_fails_the_step() -> None:
    """A tool whose return value does not fit its return annotation fails with
    ``OutputError``; nothing downstream sees the bad value."""
    plan = {
        "steps": [
            {"id": "a", "tool": "liar"},
            {"id": "b", "tool": "needs_int", "args": {"n": "${a}"}, "depends_on": ["a"]},
        ]
    }
    CALLED.clear()
    result = await prepare(plan, [liar, needs_int], approve=True).run()
    assert result.steps["a"].status == S.FAILED
    assert result.steps["a"].error is not None
    assert result.steps["a"].error["type"] == "OutputError"
    assert "liar" in result.steps["a"].error["message"]
    assert result.steps["b"].status == S.SKIPPED
    assert CALLED == []


async def test_an_unresolvable_plan_output_fails_the_run() -> None:
    """If every step succeeds but the plan's ``output`` references a field that is not there,
    the run is ``failed`` with an error saying so (never an output holding None)."""
    plan = {
        "steps": [{"id": "src", "tool": "untyped_source", "args": {"drop": True}}],
        "output": {"n": "${src.n}"},
    }
    result = await prepare(plan, [untyped_source], approve=True).run()
    assert result.status == "failed"
    assert result.output is None
    assert result.error is not None
    assert "output could not be resolved" in result.error


# ---------------------------------------------------------------- iter() and observers


class Capture:
    """An observer that keeps every event."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def on_event(self, event: Event) -> None:
        self.events.append(event)


def check_event_order(events: list[Event], graph: Graph) -> None:
    types = [e.type for e in events]
    assert types[0] == E.RUN_CREATED  # a new run: created, then started
    assert types[1] == E.RUN_STARTED
    assert types[-1] == E.RUN_FINISHED
    assert types.count(E.RUN_STARTED) == types.count(E.RUN_FINISHED) == 1
    pos: dict[tuple[str, str], int] = {}
    for i, e in enumerate(events):
        if e.step_id is not None:
            assert (e.type, e.step_id) not in pos, f"duplicate {e.type} for {e.step_id}"
            pos[(e.type, e.step_id)] = i
    for step, deps in graph.deps.items():
        if (E.STEP_SUCCEEDED, step) in pos:
            assert pos[(E.STEP_STARTED, step)] < pos[(E.STEP_SUCCEEDED, step)]
        if (E.STEP_STARTED, step) in pos:
            for d in deps:
                assert pos[(E.STEP_SUCCEEDED, d)] < pos[(E.STEP_STARTED, step)]


@pytest.mark.looptime
async def test_iter_yields_events_in_a_sensible_order() -> None:
    """``iter()`` yields ``run_created`` then ``run_started`` first and ``run_finished`` last;
    each step's ``step_started`` comes before its ``step_succeeded``, which comes before any
    dependent's ``step_started``; skipped steps get one ``step_skipped``; observers see the
    same stream."""
    rec = Recorder()
    cap = Capture()
    graph = DIAMOND
    ex = prepare(
        probe_plan(graph, fail={"c"}),
        [rec.tool()],
        clock=LoopClock(),
        observers=[cap],
        approve=True,
    )
    events = [e async for e in ex.iter()]
    assert events == cap.events
    check_event_order(events, graph)
    types = {(e.type, e.step_id) for e in events}
    assert (E.STEP_FAILED, "c") in types
    assert (E.STEP_SKIPPED, "d") in types
    assert (E.STEP_STARTED, "d") not in types
    assert events[-1].data["status"] == "failed"
    assert all(e.run_id == ex.run_id for e in events)
    assert ex.result().status == "failed"


async def test_a_dependent_is_running_before_iter_hands_out_its_dependencys_success() -> None:
    """When a step succeeds, its dependent's tool is already called by the time ``iter()``
    yields the ``step_succeeded`` event: the run's own loop is woken only after the dependents
    are started, so they run first."""
    entered: list[str] = []

    @planrail.tool
    async def probe(name: str, after: Any = None) -> str:
        entered.append(name)
        await asyncio.sleep(0)
        return name

    plan = {
        "goal": "a chain",
        "steps": [
            {"id": "a", "tool": "probe", "args": {"name": "a"}},
            {
                "id": "b",
                "tool": "probe",
                "args": {"name": "b", "after": "${a}"},
                "depends_on": ["a"],
            },
            {
                "id": "c",
                "tool": "probe",
                "args": {"name": "c", "after": "${b}"},
                "depends_on": ["b"],
            },
        ],
    }
    seen_at_success: dict[str, list[str]] = {}
    async for event in prepare(plan, [probe], approve=True).iter():
        if event.type == E.STEP_SUCCEEDED:
            assert event.step_id is not None
            seen_at_success[event.step_id] = list(entered)
    assert seen_at_success == {"a": ["a", "b"], "b": ["a", "b", "c"], "c": ["a", "b", "c"]}


@pytest.mark.looptime
@pytest.mark.parametrize("seed", range(5))
async def test_iter_order_on_random_dags(seed: int) -> None:
    """The same ordering holds for the event stream of random DAGs."""
    graph = random_dag(seed, n=12)
    rec = Recorder()
    ex = prepare(probe_plan(graph), [rec.tool()], clock=LoopClock(), approve=True)
    check_event_order([e async for e in ex.iter()], graph)


@pytest.mark.looptime
async def test_run_is_a_thin_loop_over_iter_and_an_execution_runs_once() -> None:
    """``run()`` returns the same result ``iter()`` leads to; a second run of the same
    ``Execution`` is refused."""
    rec = Recorder()
    ex = prepare(probe_plan(DIAMOND), [rec.tool()], clock=LoopClock(), approve=True)
    result = await ex.run()
    assert result.status == "succeeded"
    assert result.to_dict() == ex.result().to_dict()
    with pytest.raises(RuntimeError, match="runs once"):
        await ex.run()


@pytest.mark.looptime
async def test_a_failing_observer_never_breaks_the_run(caplog: pytest.LogCaptureFixture) -> None:
    """An observer that raises on every event is logged, and the run goes on to succeed."""

    class Broken:
        def on_event(self, event: Event) -> None:
            raise RuntimeError("observer bug")

    rec = Recorder()
    ex = prepare(
        probe_plan(DIAMOND), [rec.tool()], clock=LoopClock(), observers=[Broken()], approve=True
    )
    result = await ex.run()
    assert result.status == "succeeded"
    assert "observer" in caplog.text


def test_execution_accepts_a_plain_list_of_tools() -> None:
    """``Execution(plan, tools)`` takes a validated plan and any iterable of tools."""
    rec = Recorder()
    plan = planrail.validate(probe_plan(DIAMOND), planrail.ToolRegistry([rec.tool()])).plan
    assert plan is not None
    ex = Execution(plan, [rec.tool()], approve=True)
    assert ex.status == "pending"
    assert set(ex.results) == set(DIAMOND.steps)
