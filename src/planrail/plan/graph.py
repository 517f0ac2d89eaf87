"""Graph algorithms over ``{node: dependencies}`` maps. Iterative and linear in nodes + edges."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

__all__ = ["critical_path_lengths", "cycles", "topological_order"]


def cycles(deps: Mapping[str, Sequence[str]]) -> list[list[str]]:
    """Every cycle's members (strongly connected components of more than one node).

    Edges to nodes outside ``deps`` are ignored; self-loops are not reported here. Each cycle is
    listed in an order that follows its edges where possible, starting from its smallest id.
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in deps:
        if root in index:
            continue
        work: list[tuple[str, int]] = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            succ = deps[node]
            recurse = False
            while i < len(succ):
                nxt = succ[i]
                i += 1
                if nxt not in deps or nxt == node:
                    continue
                if nxt not in index:
                    work.append((node, i))
                    work.append((nxt, 0))
                    recurse = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if recurse:
                continue
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    found.append(_cycle_order(comp, deps))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    found.sort(key=lambda c: c[0])
    return found


def _cycle_order(comp: list[str], deps: Mapping[str, Sequence[str]]) -> list[str]:
    members = set(comp)
    start = min(comp)
    order = [start]
    seen = {start}
    node = start
    while True:
        nxt = next((d for d in deps[node] if d in members and d not in seen), None)
        if nxt is None:
            break
        order.append(nxt)
        seen.add(nxt)
        node = nxt
    order.extend(sorted(members - seen))
    return order


def topological_order(deps: Mapping[str, Sequence[str]]) -> list[str]:
    """Nodes with every dependency before its dependents (Kahn); raises ValueError on a cycle."""
    remaining = {n: sum(1 for d in ds if d in deps) for n, ds in deps.items()}
    dependents: dict[str, list[str]] = {n: [] for n in deps}
    for n, ds in deps.items():
        for d in ds:
            if d in deps:
                dependents[d].append(n)
    ready = [n for n, k in remaining.items() if k == 0]
    order: list[str] = []
    while ready:
        n = ready.pop()
        order.append(n)
        for m in dependents[n]:
            remaining[m] -= 1
            if remaining[m] == 0:
                ready.append(m)
    if len(order) != len(deps):
        raise ValueError("the graph has a cycle")
    return order


def critical_path_lengths(
    deps: Mapping[str, Sequence[str]], duration: Callable[[str], float]
) -> dict[str, float]:
    """For each node, the longest sum of durations from it to the end of the graph (itself too).

    Starting the ready node with the largest value first is the classic critical-path heuristic.
    """
    dependents: dict[str, list[str]] = {n: [] for n in deps}
    position = {n: i for i, n in enumerate(deps)}
    in_order = True  # the usual case: every node listed after what it depends on
    for n, ds in deps.items():
        here = position[n]
        for d in ds:
            at = position.get(d)
            if at is not None:
                dependents[d].append(n)
                in_order = in_order and at < here
    order = list(deps) if in_order else topological_order(deps)
    rest: dict[str, float] = {}
    for n in reversed(order):
        tail = max((rest[m] for m in dependents[n]), default=0.0)
        rest[n] = duration(n) + tail
    return rest


def reachable(start: Iterable[str], edges: Mapping[str, Sequence[str]]) -> set[str]:
    """Every node reachable from ``start`` along ``edges`` (``start`` included)."""
    seen = set(start)
    todo = list(seen)
    while todo:
        n = todo.pop()
        for m in edges.get(n, ()):
            if m not in seen:
                seen.add(m)
                todo.append(m)
    return seen
