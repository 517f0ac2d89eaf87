"""The executor on the named miniature graphs and on random DAGs, with recording probes.

Probes sleep in loop time under ``looptime``, so every start and end below is exact: the tests
compare times with ``==`` and run in milliseconds.
"""

from __future__ import annotations

import asyncio
import itertools
import random

import pytest

from planrail.engine.result import RunResult
from planrail.runs import prepare
from planrail.types import StepStatus

from .graphs import CHAIN, DIAMOND, FAN, NAMED, TWO_CHAINS, Graph, antichain_cover, random_dag
from .probes import LoopClock, Recorder, probe_plan, run_graph

S = StepStatus
RANDOM = [random_dag(seed, n=10, p=0.3) for seed in range(20)]
ALL = [pytest.param(g, id=g.name) for g in [*NAMED, *RANDOM]]


def durations(graph: Graph, seed: int = 0) -> dict[str, float]:
    """Reproducible whole-second durations (1-4 s) per step."""
    rng = random.Random(seed)
    return {s: float(rng.randint(1, 4)) for s in graph.steps}


def assert_args_are_the_referenced_outputs(graph: Graph, rec: Recorder, result: RunResult) -> None:
    """Every value a probe received is exactly what its dependency's probe returned (and what
    the run recorded as that step's output)."""
    for step, call in rec.by_step().items():
        deps = graph.deps[step]
        assert set(call.args["inputs"]) == set(deps)
        for d in deps:
            assert call.args["inputs"][d] == rec.returned[d] == result.steps[d].output
            assert call.args["fields"][d] == rec.returned[d]["token"]
            assert call.args["items"][d] == rec.returned[d]["payload"]["items"]


@pytest.mark.looptime
@pytest.mark.parametrize("graph", ALL)
async def test_every_step_starts_the_moment_its_dependencies_finish(graph: Graph) -> None:
    """No step starts before all its dependencies finished, and none waits any longer: each
    step's start is exactly the latest end among its dependencies (0 for roots), so nothing
    waits for a step it does not depend on. Each step runs once and gets the real outputs."""
    rec = Recorder()
    dur = durations(graph, seed=len(graph.steps))
    result = await run_graph(graph, rec, duration=dur)
    assert result.status == "succeeded"
    calls = rec.by_step()
    assert set(calls) == set(graph.steps)
    expected = graph.asap(dur)
    for step, call in calls.items():
        for d in graph.deps[step]:
            assert calls[d].end is not None
            assert calls[d].end <= call.start
        assert (call.start, call.end) == expected[step], step
        assert (result.steps[step].started_at, result.steps[step].finished_at) == expected[step]
    assert_args_are_the_referenced_outputs(graph, rec, result)


@pytest.mark.looptime
@pytest.mark.parametrize("graph", ALL)
async def test_steps_with_no_path_between_them_overlap(graph: Graph) -> None:
    """For every pair of steps with no dependency path between them, some run has both
    running at once: one run per antichain, where the antichain's steps are long (100 s) and
    every other step short (1 s), has all of the antichain's steps overlapping."""
    pairs = set(graph.incomparable_pairs())
    covered: set[tuple[str, str]] = set()
    for chain in antichain_cover(graph):
        rec = Recorder()
        dur = {s: (100.0 if s in chain else 1.0) for s in graph.steps}
        result = await run_graph(graph, rec, duration=dur)
        assert result.status == "succeeded"
        calls = rec.by_step()
        for a, b in itertools.combinations(chain, 2):
            ca, cb = calls[a], calls[b]
            assert ca.end is not None
            assert cb.end is not None
            assert max(ca.start, cb.start) < min(ca.end, cb.end), (a, b)
            covered.add((a, b) if (a, b) in pairs else (b, a))
    assert covered == pairs


@pytest.mark.looptime
async def test_named_graphs_overlap_their_independent_steps_with_equal_durations() -> None:
    """With every step taking 1 s: the diamond's middle steps run side by side, the twelve
    fan-out workers all run in [1, 2], and two independent chains run in lockstep."""
    rec = Recorder()
    await run_graph(DIAMOND, rec)
    c = rec.by_step()
    assert (c["b"].start, c["b"].end) == (c["c"].start, c["c"].end) == (1, 2)
    assert c["d"].start == 2

    rec = Recorder()
    result = await run_graph(FAN, rec)
    c = rec.by_step()
    assert {(c[f"w{i}"].start, c[f"w{i}"].end) for i in range(12)} == {(1, 2)}
    assert (c["sink"].start, c["sink"].end) == (2, 3)
    assert rec.max_running == 12
    assert result.steps["sink"].finished_at == 3

    rec = Recorder()
    await run_graph(TWO_CHAINS, rec)
    c = rec.by_step()
    for i in (1, 2, 3):
        assert c[f"a{i}"].start == c[f"b{i}"].start == i - 1


@pytest.mark.looptime
async def test_a_chain_runs_strictly_in_sequence() -> None:
    """A chain's steps never overlap: each starts exactly when the previous one ends."""
    rec = Recorder()
    await run_graph(CHAIN, rec, duration=2.0)
    calls = rec.by_step()
    assert [(calls[s].start, calls[s].end) for s in CHAIN.steps] == [
        (0, 2),
        (2, 4),
        (4, 6),
        (6, 8),
        (8, 10),
    ]
    assert rec.max_running == 1


def failure_cases() -> list[pytest.ParameterSet]:
    cases = [
        pytest.param(DIAMOND, {"b"}, id="diamond-b"),
        pytest.param(DIAMOND, {"a"}, id="diamond-a"),
        pytest.param(CHAIN, {"s1"}, id="chain-s1"),
        pytest.param(FAN, {"w3", "w7"}, id="fan-two-workers"),
        pytest.param(TWO_CHAINS, {"a1"}, id="two-chains-a1"),
    ]
    for g in RANDOM:
        rng = random.Random(g.name)
        cases.append(pytest.param(g, set(rng.sample(g.steps, 2)), id=f"{g.name}-fail"))
    return cases


@pytest.mark.looptime
@pytest.mark.parametrize(("graph", "fail"), failure_cases())
async def test_failed_steps_transitive_dependents_are_skipped_never_called(
    graph: Graph, fail: set[str]
) -> None:
    """When steps fail, every transitive dependent of a failed step is never called and is
    reported ``skipped`` with a reason naming a dependency; every other step still runs
    (independent branches continue) and succeeds; the run is ``failed``."""
    rec = Recorder()
    result = await run_graph(graph, rec, duration=durations(graph), fail=fail)
    calls = rec.by_step()
    failed = {s for s in fail if s in calls}
    assert failed, "at least one failing step must have been reached"
    downstream = set().union(*(graph.descendants(s) for s in failed))
    assert not downstream & set(calls), "a dependent of a failed step was called"
    for step in graph.steps:
        res = result.steps[step]
        if step in downstream:
            assert res.status == S.SKIPPED
            assert res.reason is not None
            assert "dependency '" in res.reason
            assert res.started_at is None
            assert res.attempts == 0
            assert res.output is None
        elif step in failed:
            assert res.status == S.FAILED
            assert res.error is not None
            assert res.error["type"] == "ProbeFailure"
            assert f"{step} failed on purpose" in res.error["message"]
        else:
            assert res.status == S.SUCCEEDED
            assert step in calls
    assert result.status == "failed"
    assert_args_are_the_referenced_outputs(graph, rec, result)


@pytest.mark.looptime
async def test_skip_reason_names_the_root_failure_through_skipped_steps() -> None:
    """In a chain failing at ``s1``: ``s2`` is skipped because ``s1`` failed, and ``s3``
    because ``s2`` was skipped, naming ``s1`` as the root."""
    rec = Recorder()
    result = await run_graph(CHAIN, rec, fail={"s1"})
    assert result.steps["s2"].reason == "dependency 's1' failed"
    assert result.steps["s3"].reason == "dependency 's2' skipped (because 's1' failed)"
    assert [c.step for c in rec.calls] == ["s0", "s1"]


@pytest.mark.looptime
async def test_fail_fast_cancels_steps_in_flight_and_skips_the_rest() -> None:
    """Under ``failure_mode="fail_fast"`` the first failure cancels every running step (the
    probe sees the cancellation) and skips everything not started; nothing is called after."""
    graph = Graph("ff", {"boom": (), "slow": (), "after_slow": ("slow",), "later": ("boom",)})
    rec = Recorder()
    result = await run_graph(
        graph,
        rec,
        duration={"boom": 1, "slow": 10, "after_slow": 1, "later": 1},
        fail={"boom"},
        failure_mode="fail_fast",
    )
    calls = rec.by_step()
    assert set(calls) == {"boom", "slow"}
    assert calls["slow"].outcome == "cancelled"
    assert calls["slow"].end == 1
    assert result.steps["slow"].status == S.CANCELLED
    assert result.steps["after_slow"].status == S.SKIPPED
    assert result.steps["later"].status == S.SKIPPED
    assert result.status == "failed"


@pytest.mark.looptime
async def test_join_rules_in_the_executor() -> None:
    """``all_finished`` runs after its dependencies end whatever happened to them (a cleanup
    step); ``any_succeeded`` runs when one dependency succeeded; ``all_succeeded`` (default) is
    skipped. Each starts exactly when its last dependency ends, and gets only real outputs."""
    graph = Graph(
        "joins",
        {
            "ok": (),
            "bad": (),
            "cleanup": ("ok", "bad"),
            "pick": ("ok", "bad"),
            "strict": ("ok", "bad"),
        },
    )
    plan = probe_plan(graph, {"ok": 2, "bad": 3, "cleanup": 1, "pick": 1, "strict": 1}, {"bad"})
    for step in plan["steps"]:
        # a failed dependency has no output: reference only the one that succeeds
        if step["id"] != "ok" and step["depends_on"]:
            for key in ("inputs", "fields", "items"):
                step["args"][key] = {"ok": step["args"][key]["ok"]}
    plan["steps"][2]["join"] = "all_finished"
    plan["steps"][3]["join"] = "any_succeeded"
    rec = Recorder()
    rec.t0 = asyncio.get_running_loop().time()
    result = await prepare(plan, [rec.tool()], clock=LoopClock(rec.t0)).run()
    calls = rec.by_step()
    assert calls["cleanup"].start == calls["pick"].start == 3
    assert calls["cleanup"].args["inputs"] == {"ok": rec.returned["ok"]}
    assert result.steps["strict"].status == S.SKIPPED
    assert result.steps["strict"].reason == "dependency 'bad' failed"
    assert "strict" not in calls
