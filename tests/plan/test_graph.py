"""Graph algorithms, and the validator on random graphs against an independent oracle."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planrail.plan.graph import critical_path_lengths, cycles, reachable, topological_order
from planrail.plan.tools import ToolSpec
from planrail.plan.validate import validate

# ---------------------------------------------------------------- oracle


def _closure(deps: dict[str, list[str]]) -> dict[str, set[str]]:
    """Every node reachable from each node by following at least one edge (naive, for tests)."""
    out: dict[str, set[str]] = {}
    for n in deps:
        seen: set[str] = set()
        todo = [d for d in deps[n] if d in deps]
        while todo:
            m = todo.pop()
            if m not in seen:
                seen.add(m)
                todo.extend(d for d in deps[m] if d in deps)
        out[n] = seen
    return out


def _oracle_cycles(deps: dict[str, list[str]]) -> list[set[str]]:
    """Strongly connected components with more than one node, by mutual reachability."""
    reach = _closure(deps)
    comps: list[set[str]] = []
    for n in deps:
        comp = {n} | {m for m in reach[n] if n in reach[m]}
        if len(comp) > 1 and comp not in comps:
            comps.append(comp)
    return comps


@st.composite
def graphs(draw: st.DrawFn, max_nodes: int = 12) -> dict[str, list[str]]:
    n = draw(st.integers(min_value=0, max_value=max_nodes))
    nodes = [f"n{i}" for i in range(n)]
    deps: dict[str, list[str]] = {}
    for node in nodes:
        deps[node] = (
            draw(st.lists(st.sampled_from(nodes), max_size=4, unique=True)) if nodes else []
        )
    return deps


# ---------------------------------------------------------------- algorithms


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs())
def test_cycles_are_exactly_the_nontrivial_strong_components(deps: dict[str, list[str]]) -> None:
    """``cycles`` returns each SCC of 2+ nodes once (self-loops are not cycles here)."""
    found = cycles(deps)
    assert sorted(map(sorted, found)) == sorted(map(sorted, _oracle_cycles(deps)))
    for members in found:
        assert members[0] == min(members)
        assert len(set(members)) == len(members)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs())
def test_topological_order_puts_dependencies_first_or_reports_a_cycle(
    deps: dict[str, list[str]],
) -> None:
    """Acyclic graphs get an order with every dependency first; cyclic ones raise ValueError."""
    cyclic = any(n in _closure(deps)[n] for n in deps)
    if cyclic:
        with pytest.raises(ValueError, match="cycle"):
            topological_order(deps)
        return
    order = topological_order(deps)
    assert sorted(order) == sorted(deps)
    pos = {n: i for i, n in enumerate(order)}
    for n, ds in deps.items():
        for d in ds:
            assert pos[d] < pos[n]


def test_cycle_members_follow_the_edges() -> None:
    """A cycle's members are listed from its smallest id along its edges."""
    assert cycles({"b": ["c"], "c": ["a"], "a": ["b"]}) == [["a", "b", "c"]]
    assert cycles({"a": ["a"]}) == []
    assert cycles({"a": ["zzz"]}) == []


def test_critical_path_lengths() -> None:
    """Each node's value is the longest duration sum from it to the end of the graph."""
    deps = {"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"]}
    durations = {"a": 1.0, "b": 5.0, "c": 2.0, "d": 1.0}
    assert critical_path_lengths(deps, durations.__getitem__) == {
        "a": 7.0, "b": 6.0, "c": 3.0, "d": 1.0,
    }  # fmt: skip


def test_graph_algorithms_are_iterative_on_a_long_chain() -> None:
    """A 50,000-node chain (far past the recursion limit) is handled iteratively."""
    n = 50_000
    deps = {f"n{i}": ([f"n{i - 1}"] if i else []) for i in range(n)}
    assert cycles(deps) == []
    assert topological_order(deps)[0] == "n0"
    deps["n0"] = [f"n{n - 1}"]
    assert len(cycles(deps)[0]) == n
    assert reachable(["n5"], {"n5": ["n4"], "n4": ["n3"]}) == {"n5", "n4", "n3"}


# ---------------------------------------------------------------- validator on random plans


@st.composite
def random_plans(draw: st.DrawFn) -> tuple[dict[str, Any], bool, bool]:
    """A plan over a random graph: each edge is declared, referenced, or both.

    Returns the plan, whether its graph (declared + referenced edges) has a cycle, and whether
    some reference is not declared in depends_on.
    """
    n = draw(st.integers(min_value=1, max_value=10))
    ids = [f"s{i}" for i in range(n)]
    # Mostly backward edges (DAG-like), sometimes forward ones (which may close cycles).
    allow_forward = draw(st.booleans())
    steps = []
    edges: dict[str, list[str]] = {}
    undeclared = False
    for i, sid in enumerate(ids):
        pool = [x for x in ids if x != sid] if allow_forward else ids[:i]
        targets = draw(st.lists(st.sampled_from(pool), unique=True, max_size=3)) if pool else []
        depends_on: list[str] = []
        args: dict[str, Any] = {}
        for k, target in enumerate(targets):
            kind = draw(st.sampled_from(["declared", "referenced", "both", "both"]))
            if kind in ("declared", "both"):
                depends_on.append(target)
            if kind in ("referenced", "both"):
                form = draw(st.sampled_from(["${%s}", "${%s.out}", "x ${%s.out} y"]))
                args[f"a{k}"] = form % target if "%" in form else form
            if kind == "referenced":
                undeclared = True
        edges[sid] = targets
        steps.append({"id": sid, "tool": "t", "args": args, "depends_on": depends_on})
    cyclic = bool(_oracle_cycles(edges))
    return {"goal": "random", "steps": steps}, cyclic, undeclared


PERMISSIVE = [
    ToolSpec(
        name="t",
        input_schema={"type": "object", "additionalProperties": True},
        output_schema={"type": "object", "properties": {"out": {"type": "string"}}},
    )
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_plans())
def test_validator_accepts_exactly_the_acyclic_fully_declared_plans(
    case: tuple[dict[str, Any], bool, bool],
) -> None:
    """Valid iff acyclic and every reference declared; ``cycle`` iff cyclic, etc."""
    plan, cyclic, undeclared = case
    for tools in (None, PERMISSIVE):
        report = validate(plan, tools)
        found = {i.code for i in report.errors}
        assert report.valid == (not cyclic and not undeclared), report.errors
        assert ("cycle" in found) == cyclic
        assert ("undeclared_dependency" in found) == undeclared
        assert found <= {"cycle", "undeclared_dependency"}
        if report.plan is not None:
            deps = {s.id: list(s.depends_on) for s in report.plan.steps}
            order = topological_order(deps)
            assert sorted(order) == sorted(deps)


def test_critical_paths_do_not_depend_on_the_order_nodes_are_listed_in() -> None:
    """Listed in a topological order (the fast path) or shuffled (Kahn's order): the same
    lengths."""
    rng = random.Random(7)
    nodes = [f"n{i}" for i in range(300)]
    deps = {n: rng.sample(nodes[:i], min(i, rng.randrange(4))) for i, n in enumerate(nodes)}
    cost = {n: rng.choice([0.5, 1.0, 2.0]) for n in nodes}
    in_order = critical_path_lengths(deps, cost.__getitem__)
    shuffled = list(deps.items())
    rng.shuffle(shuffled)
    assert critical_path_lengths(dict(shuffled), cost.__getitem__) == in_order
    assert in_order["n0"] >= cost["n0"]
    assert max(in_order.values()) > 2.0  # there are chains: the test compares real paths
