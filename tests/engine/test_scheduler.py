"""The sans-I/O scheduler: no asyncio, no clock — a state machine driven by method calls.

Example tests pin each rule on the named miniature graphs; hypothesis drives random DAGs
(random joins, outcomes, completion orders and incremental batches) against a reference model.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planrail.engine.scheduler import LEGAL, READY, IllegalTransition, Node, Scheduler, Skip
from planrail.types import StepStatus

from .graphs import CHAIN, DIAMOND, FAN, Graph

S = StepStatus
TERMINAL = {S.SUCCEEDED, S.FAILED, S.SKIPPED, S.CANCELLED}


def sched_of(graph: Graph, joins: dict[str, str] | None = None, *, close: bool = True) -> Scheduler:
    joins = joins or {}
    sched = Scheduler(Node(s, ds, joins.get(s, "all_succeeded")) for s, ds in graph.deps.items())
    if close:
        sched.close()
    return sched


def run_ok(sched: Scheduler, step: str) -> list[Skip]:
    sched.start(step)
    return sched.succeeded(step)


def run_fail(sched: Scheduler, step: str) -> list[Skip]:
    sched.start(step)
    return sched.failed(step)


# ---------------------------------------------------------------- readiness and order


def test_diamond_releases_each_step_when_its_dependencies_succeed() -> None:
    """Only roots are ready at first; ``b`` and ``c`` become ready together when ``a``
    succeeds; ``d`` only when both ``b`` and ``c`` have succeeded."""
    sched = sched_of(DIAMOND)
    assert sched.take_ready() == ["a"]
    run_ok(sched, "a")
    assert sorted(sched.take_ready()) == ["b", "c"]
    run_ok(sched, "b")
    assert sched.take_ready() == []
    assert sched.state("d") == S.PENDING
    run_ok(sched, "c")
    assert sched.take_ready() == ["d"]
    run_ok(sched, "d")
    assert sched.finished
    assert set(sched.states().values()) == {S.SUCCEEDED}


def test_chain_runs_one_step_at_a_time_in_order() -> None:
    """In a chain exactly one step is ever ready, and they come in dependency order."""
    sched = sched_of(CHAIN)
    order = []
    while not sched.finished:
        ready = sched.take_ready()
        assert len(ready) == 1
        order.append(ready[0])
        run_ok(sched, ready[0])
    assert order == CHAIN.steps


def test_fan_out_makes_every_worker_ready_at_once_and_fan_in_waits_for_all() -> None:
    """After the source succeeds all twelve workers are ready in one batch; the sink stays
    pending until the last worker succeeds."""
    sched = sched_of(FAN)
    run_ok(sched, sched.take_ready()[0])
    workers = sched.take_ready()
    assert sorted(workers) == sorted(f"w{i}" for i in range(12))
    for w in workers[:-1]:
        run_ok(sched, w)
        assert sched.state("sink") == S.PENDING
    run_ok(sched, workers[-1])
    assert sched.take_ready() == ["sink"]


def test_take_ready_orders_by_priority_then_by_readiness() -> None:
    """Among ready steps the highest priority comes first; equal priorities keep the order in
    which they became ready; ``limit`` takes only that many and leaves the rest queued."""
    sched = Scheduler(
        [
            Node("low", priority=1),
            Node("high", priority=5),
            Node("mid1", priority=3),
            Node("mid2", priority=3),
        ]
    )
    assert sched.take_ready(limit=2) == ["high", "mid1"]
    assert sched.take_ready() == ["mid2", "low"]


def test_taken_steps_stay_ready_until_started() -> None:
    """``take_ready`` only dequeues: the step is still ``ready`` (and the run not finished)
    until ``start``, and is never handed out twice."""
    sched = sched_of(DIAMOND)
    assert sched.take_ready() == ["a"]
    assert sched.state("a") == READY
    assert not sched.finished
    assert sched.take_ready() == []
    sched.start("a")
    assert sched.state("a") == S.RUNNING


# ---------------------------------------------------------------- failure and joins


def test_failure_skips_transitive_dependents_naming_the_failed_step() -> None:
    """When ``s1`` fails, ``s2..s4`` are skipped at once; the direct dependent's reason names
    ``s1``, the others name their direct dependency and the root cause."""
    sched = sched_of(CHAIN)
    run_ok(sched, "s0")
    skips = run_fail(sched, sched.take_ready()[0])
    assert [s.step for s in skips] == ["s2", "s3", "s4"]
    assert skips[0].reason == "dependency 's1' failed"
    assert skips[1].reason == "dependency 's2' skipped (because 's1' failed)"
    assert all(sched.cause(s.step) == "s1" for s in skips)
    assert sched.finished
    assert sched.take_ready() == []


def test_failure_does_not_stop_independent_branches() -> None:
    """In a diamond, ``b`` failing skips ``d`` but ``c`` still runs to completion."""
    sched = sched_of(DIAMOND)
    run_ok(sched, "a")
    assert sorted(sched.take_ready()) == ["b", "c"]
    assert [s.step for s in run_fail(sched, "b")] == ["d"]
    assert sched.state("c") == READY
    run_ok(sched, "c")
    assert sched.states() == {"a": S.SUCCEEDED, "b": S.FAILED, "c": S.SUCCEEDED, "d": S.SKIPPED}
    assert sched.finished


def test_all_finished_join_runs_after_failed_and_skipped_dependencies() -> None:
    """A step joining ``all_finished`` runs once every dependency is final, whatever happened
    to them — but not before the last one finishes."""
    g = Graph("cleanup", {"a": (), "b": ("a",), "c": (), "cleanup": ("b", "c")})
    sched = sched_of(g, {"cleanup": "all_finished"})
    assert sorted(sched.take_ready()) == ["a", "c"]
    assert [s.step for s in run_fail(sched, "a")] == ["b"]
    assert sched.take_ready() == []
    run_ok(sched, "c")
    assert sched.take_ready() == ["cleanup"]


def test_any_succeeded_join_needs_one_success_among_finished_dependencies() -> None:
    """``any_succeeded`` waits for every dependency to finish, then runs if one of them
    succeeded; if none did it is skipped with a reason listing them."""
    g = Graph("race", {"x": (), "y": (), "pick": ("x", "y")})
    sched = sched_of(g, {"pick": "any_succeeded"})
    run_fail(sched, "x")
    assert sched.state("pick") == S.PENDING
    run_ok(sched, "y")
    assert sched.take_ready() == ["pick"]

    sched = sched_of(g, {"pick": "any_succeeded"})
    run_fail(sched, "x")
    skips = run_fail(sched, "y")
    assert skips == [Skip("pick", "no dependency succeeded (x, y)")]


def test_join_rules_on_a_step_without_dependencies_run_it() -> None:
    """A step with no dependencies is ready at once whatever its join rule (``any_succeeded``
    over nothing is not a reason to wait forever)."""
    sched = Scheduler([Node(j, join=j) for j in ("all_succeeded", "all_finished", "any_succeeded")])
    assert sorted(sched.take_ready()) == ["all_finished", "all_succeeded", "any_succeeded"]


def test_cancelled_dependency_skips_dependents() -> None:
    """A cancelled step is not a success: its ``all_succeeded`` dependents are skipped."""
    sched = sched_of(DIAMOND)
    sched.start(sched.take_ready()[0])
    skips = sched.cancelled("a")
    assert {s.step for s in skips} == {"b", "c", "d"}
    assert skips[0].reason == "dependency 'a' cancelled"


def test_skip_of_an_untaken_branch_follows_joins() -> None:
    """``skip()`` marks a ready step skipped with the given reason, and its dependents follow
    their join rules (an ``all_finished`` dependent still runs)."""
    g = Graph("branch", {"a": (), "b": ("a",), "after": ("a",)})
    sched = sched_of(g, {"after": "all_finished"})
    sched.take_ready()
    skips = sched.skip("a", "condition false")
    assert skips == [Skip("a", "condition false"), Skip("b", "dependency 'a' skipped")]
    assert sched.take_ready() == ["after"]


def test_abort_returns_running_steps_and_skips_everything_not_started() -> None:
    """Fail-fast: ``abort`` lists the running steps for the caller to cancel, skips pending
    and ready ones, and the run finishes once the running ones are reported."""
    sched = sched_of(FAN)
    run_ok(sched, "src")
    ready = sched.take_ready()
    for w in ready[:3]:
        sched.start(w)
    running, skips = sched.abort("stop")
    assert sorted(running) == sorted(ready[:3])
    assert {s.step for s in skips} == set(ready[3:]) | {"sink"}
    assert all(s.reason == "stop" for s in skips)
    assert not sched.has_ready()
    assert not sched.finished
    for w in running:
        sched.cancelled(w)
    assert sched.finished


# ---------------------------------------------------------------- in doubt and restore


def test_in_doubt_step_blocks_dependents_until_an_operator_decides() -> None:
    """An ``in_doubt`` step is neither done nor active: the run counts as finished (nothing
    can happen without an operator) while its dependents wait; retrying puts it back."""
    sched = sched_of(CHAIN)
    run_ok(sched, *sched.take_ready())
    sched.start(*sched.take_ready())
    sched.in_doubt("s1")
    assert sched.state("s1") == S.IN_DOUBT
    assert sched.finished
    assert sched.state("s2") == S.PENDING
    sched.retry_in_doubt("s1")
    assert not sched.finished
    assert sched.take_ready() == ["s1"]
    run_ok(sched, "s1")
    assert sched.take_ready() == ["s2"]


def test_operator_can_declare_an_in_doubt_step_succeeded() -> None:
    """``in_doubt -> succeeded`` is legal and releases the dependents."""
    sched = sched_of(CHAIN)
    run_ok(sched, *sched.take_ready())
    sched.start(*sched.take_ready())
    sched.in_doubt("s1")
    sched.succeeded("s1")
    assert sched.take_ready() == ["s2"]


def test_restored_step_succeeds_without_running() -> None:
    """On resume, a ready step recorded as succeeded moves straight to ``succeeded``; a step
    that is not ready cannot be restored."""
    sched = sched_of(CHAIN)
    with pytest.raises(IllegalTransition):
        sched.restored("s1")
    sched.take_ready()
    sched.restored("s0")
    assert sched.state("s0") == S.SUCCEEDED
    assert sched.take_ready() == ["s1"]


# ---------------------------------------------------------------- the state table


def test_state_table_covers_every_state_and_terminal_states_are_final() -> None:
    """``LEGAL`` has a row for every step status and for ``ready``; the four terminal states
    allow no move at all."""
    assert set(LEGAL) == set(StepStatus) | {READY}
    for state in TERMINAL:
        assert LEGAL[state] == frozenset()
    assert all(targets <= set(LEGAL) for targets in LEGAL.values())


@pytest.mark.parametrize(
    ("setup", "illegal"),
    [
        pytest.param([], "start:b", id="start-pending"),
        pytest.param(["start:a"], "start:a", id="start-twice"),
        pytest.param([], "succeeded:b", id="succeed-pending"),
        pytest.param(["start:a", "succeeded:a"], "succeeded:a", id="succeed-twice"),
        pytest.param(["start:a", "succeeded:a"], "failed:a", id="fail-after-success"),
        pytest.param(["start:a", "failed:a"], "start:a", id="restart-failed"),
        pytest.param(["start:a", "failed:a"], "start:b", id="start-skipped"),
        pytest.param([], "in_doubt:a", id="in-doubt-before-running"),
        pytest.param(["start:a"], "retry_in_doubt:a", id="retry-not-in-doubt"),
        pytest.param(["start:a", "cancelled:a"], "succeeded:a", id="succeed-cancelled"),
    ],
)
def test_illegal_transitions_raise(setup: list[str], illegal: str) -> None:
    """Any move the table does not allow raises :class:`IllegalTransition` and leaves the
    step's state unchanged."""
    sched = sched_of(DIAMOND)
    sched.take_ready()
    for op in setup:
        name, step = op.split(":")
        getattr(sched, name)(step)
    name, step = illegal.split(":")
    before = sched.state(step)
    with pytest.raises(IllegalTransition):
        getattr(sched, name)(step)
    assert sched.state(step) == before


def test_bad_nodes_are_refused() -> None:
    """Duplicate ids, unknown dependencies and self-dependencies raise ``ValueError``; adding
    after ``close()`` is an illegal transition."""
    with pytest.raises(ValueError, match="already scheduled"):
        Scheduler([Node("a"), Node("a")])
    with pytest.raises(ValueError, match="unknown step 'ghost'"):
        Scheduler([Node("a", ("ghost",))])
    with pytest.raises(ValueError, match="depends on itself"):
        Scheduler([Node("a", ("a",))])
    sched = Scheduler([Node("a")])
    sched.close()
    with pytest.raises(IllegalTransition):
        sched.add([Node("b")])


# ---------------------------------------------------------------- the open plan


def test_open_plan_is_not_finished_until_closed() -> None:
    """With every known step done, an open plan still waits for more steps; ``close`` ends it."""
    sched = Scheduler([Node("a")])
    run_ok(sched, "a")
    assert not sched.finished
    sched.close()
    assert sched.finished


def test_added_steps_see_the_state_of_what_already_ran() -> None:
    """A step added after its dependency succeeded is ready at once; after its dependency
    failed it is skipped at once (returned by ``add``); on a running dependency it waits."""
    sched = Scheduler([Node("ok"), Node("bad"), Node("slow")])
    for s in sched.take_ready():
        sched.start(s)
    sched.succeeded("ok")
    sched.failed("bad")
    skips = sched.add(
        [Node("uses_ok", ("ok",)), Node("uses_bad", ("bad",)), Node("uses_slow", ("slow",))]
    )
    assert skips == [Skip("uses_bad", "dependency 'bad' failed")]
    assert sched.take_ready() == ["uses_ok"]
    assert sched.state("uses_slow") == S.PENDING
    sched.succeeded("slow")
    assert sched.take_ready() == ["uses_slow"]


def test_a_final_step_lets_go_of_its_dependents_and_later_steps_still_see_it() -> None:
    """Once a step is final and has told its dependents, the scheduler keeps no list of them
    (memory at 100,000 steps); a step added on it afterwards is decided from its state, and an
    ``in_doubt`` step keeps its dependents until an operator decides."""
    sched = sched_of(DIAMOND, close=False)
    run_ok(sched, "a")
    assert sched._entries["a"].dependents is None
    assert sched._entries["b"].dependents == ["d"]
    assert sched.add([Node("late", ("a",))]) == []
    assert sorted(sched.take_ready()) == ["b", "c", "late"]
    sched.start("b")
    sched.in_doubt("b")
    assert sched._entries["b"].dependents == ["d"]
    sched.retry_in_doubt("b")
    assert sched.take_ready() == ["b"]
    run_ok(sched, "b")
    run_ok(sched, "c")
    assert sched.take_ready() == ["d"]


def test_added_batch_in_any_order_propagates_an_immediate_skip() -> None:
    """A batch added after a failure may list a dependent before its dependency: when the
    dependency is skipped at once, its dependents in the same batch are skipped too (and an
    ``all_finished`` dependent becomes ready) instead of staying pending forever."""
    sched = Scheduler([Node("bad")])
    run_fail(sched, "bad")
    skips = sched.add(
        [
            Node("grandchild", ("child",)),
            Node("child", ("bad",)),
            Node("cleanup", ("child",), join="all_finished"),
        ]
    )
    sched.close()
    assert {s.step for s in skips} == {"child", "grandchild"}
    assert sched.cause("grandchild") == "bad"
    assert sched.take_ready() == ["cleanup"]
    run_ok(sched, "cleanup")
    assert sched.finished
    assert all(state in TERMINAL for state in sched.states().values())


# ---------------------------------------------------------------- properties on random DAGs

JOINS = ("all_succeeded", "all_finished", "any_succeeded")


@st.composite
def dags(draw: st.DrawFn) -> tuple[dict[str, tuple[str, ...]], dict[str, str], dict[str, bool]]:
    """A random DAG (topologically ordered), a join rule and an outcome for each step."""
    n = draw(st.integers(1, 14))
    deps: dict[str, tuple[str, ...]] = {}
    for i in range(n):
        earlier = [f"s{j}" for j in range(i)]
        deps[f"s{i}"] = tuple(
            draw(st.lists(st.sampled_from(earlier), unique=True, max_size=4)) if earlier else []
        )
    joins = {s: draw(st.sampled_from(JOINS)) for s in deps}
    succeeds = {s: draw(st.booleans()) for s in deps}
    return deps, joins, succeeds


def expected_states(
    deps: dict[str, tuple[str, ...]], joins: dict[str, str], succeeds: dict[str, bool]
) -> dict[str, str]:
    """The reference model: each step runs iff its join rule holds over its dependencies'
    final states, and then ends as its outcome says."""
    final: dict[str, str] = {}
    for s, ds in deps.items():
        states = [final[d] for d in ds]
        join = joins[s]
        if join == "all_succeeded":
            runs = all(x == S.SUCCEEDED for x in states)
        elif join == "any_succeeded":
            runs = not ds or any(x == S.SUCCEEDED for x in states)
        else:
            runs = True
        final[s] = (S.SUCCEEDED if succeeds[s] else S.FAILED) if runs else S.SKIPPED
    return final


def join_holds(join: str, dep_states: list[str]) -> bool:
    if not all(x in TERMINAL for x in dep_states):
        return False
    if join == "all_succeeded":
        return all(x == S.SUCCEEDED for x in dep_states)
    if join == "any_succeeded":
        return not dep_states or any(x == S.SUCCEEDED for x in dep_states)
    return True


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=dags(), data=st.data())
def test_random_dags_run_each_step_once_after_its_dependencies(
    graph: tuple[dict[str, tuple[str, ...]], dict[str, str], dict[str, bool]],
    data: st.DataObject,
) -> None:
    """On any DAG, with steps added in random batches while earlier ones run and completions in
    any order: every step starts at most once and only when its join rule holds over finished
    dependencies; every step ends terminal, in exactly the state the reference model predicts;
    every skip is reported once, naming a failed ancestor as its cause."""
    deps, joins, succeeds = graph
    order = list(deps)
    # Contiguous batches of the topological order, each shuffled: a batch may list a step before
    # a dependency of the same batch, which ``add`` allows.
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, len(order) - 1)), max_size=4)))
    batches = [order[a:b] for a, b in zip([0, *cuts], [*cuts, len(order)], strict=True) if a < b]
    batches = [data.draw(st.permutations(b)) for b in batches]

    sched = Scheduler()
    started: list[str] = []
    running: list[str] = []
    reported: list[str] = []
    while True:
        if batches and (not running or data.draw(st.booleans())):
            skips = sched.add(Node(s, deps[s], joins[s]) for s in batches.pop(0))
            reported += [k.step for k in skips]
            if not batches:
                sched.close()
            continue
        for s in sched.take_ready():
            assert s not in started, f"{s} handed out twice"
            assert join_holds(joins[s], [sched.state(d) for d in deps[s]]), s
            sched.start(s)
            started.append(s)
            running.append(s)
        if not running:
            assert not batches
            break
        s = running.pop(data.draw(st.integers(0, len(running) - 1)))
        skips = sched.succeeded(s) if succeeds[s] else sched.failed(s)
        reported += [k.step for k in skips]

    assert sched.finished
    assert sched.states() == expected_states(deps, joins, succeeds)
    skipped = [s for s, state in sched.states().items() if state == S.SKIPPED]
    assert sorted(reported) == sorted(skipped)
    assert sorted(started) == sorted(s for s in deps if s not in skipped)
    for s in skipped:
        cause = sched.cause(s)
        assert cause is not None
        assert sched.state(cause) == S.FAILED
        assert cause in Graph("g", deps).ancestors(s)
