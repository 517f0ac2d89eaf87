"""Named miniature graphs shared by the engine tests, and the graph facts the tests check.

A graph is ``{step: (dependencies...)}`` in topological order. The named ones are small enough
to reason about by hand; :func:`random_dag` makes reproducible larger ones from a seed.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "CHAIN",
    "DIAMOND",
    "DOUBLE_DIAMOND",
    "FAN",
    "NAMED",
    "TWO_CHAINS",
    "Graph",
    "antichain_cover",
    "random_dag",
]


@dataclass(frozen=True)
class Graph:
    """A named DAG: ``deps[step]`` are the steps it depends on (every key before its users)."""

    name: str
    deps: Mapping[str, tuple[str, ...]]

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for step, ds in self.deps.items():
            missing = [d for d in ds if d not in seen]
            assert not missing, f"{self.name}: {step} depends on later/unknown {missing}"
            seen.add(step)

    @property
    def steps(self) -> list[str]:
        return list(self.deps)

    def dependents(self, step: str) -> list[str]:
        """Steps that list ``step`` directly in their dependencies."""
        return [s for s, ds in self.deps.items() if step in ds]

    def ancestors(self, step: str) -> set[str]:
        """Every step ``step`` depends on, directly or through others."""
        out: set[str] = set()
        todo = list(self.deps[step])
        while todo:
            d = todo.pop()
            if d not in out:
                out.add(d)
                todo.extend(self.deps[d])
        return out

    def descendants(self, step: str) -> set[str]:
        """Every step that depends on ``step``, directly or through others."""
        return {s for s in self.deps if step in self.ancestors(s)}

    def comparable(self, a: str, b: str) -> bool:
        """True when a path of dependencies joins ``a`` and ``b`` (either way)."""
        return a in self.ancestors(b) or b in self.ancestors(a)

    def incomparable_pairs(self) -> list[tuple[str, str]]:
        """Pairs of distinct steps with no path between them: the ones that may overlap."""
        steps = self.steps
        return [
            (a, b) for i, a in enumerate(steps) for b in steps[i + 1 :] if not self.comparable(a, b)
        ]

    def asap(self, duration: Mapping[str, float]) -> dict[str, tuple[float, float]]:
        """Each step's ``(start, end)`` when every step starts the moment its dependencies end."""
        times: dict[str, tuple[float, float]] = {}
        for step, ds in self.deps.items():
            start = max((times[d][1] for d in ds), default=0.0)
            times[step] = (start, start + duration[step])
        return times


def _g(name: str, **deps: Sequence[str]) -> Graph:
    return Graph(name, {k: tuple(v) for k, v in deps.items()})


DIAMOND = _g("diamond", a=(), b=("a",), c=("a",), d=("b", "c"))
"""``a`` feeds ``b`` and ``c``, which both feed ``d``."""

CHAIN = _g("chain", s0=(), s1=("s0",), s2=("s1",), s3=("s2",), s4=("s3",))
"""Five steps, each needing the one before."""

FAN = Graph(
    "fan_out_fan_in",
    {
        "src": (),
        **{f"w{i}": ("src",) for i in range(12)},
        "sink": tuple(f"w{i}" for i in range(12)),
    },
)
"""One source, twelve independent workers, one sink that needs all of them."""

TWO_CHAINS = _g("two_chains", a1=(), a2=("a1",), a3=("a2",), b1=(), b2=("b1",), b3=("b2",))
"""Two independent chains: nothing in one waits for anything in the other."""

DOUBLE_DIAMOND = _g(
    "double_diamond",
    a=(),
    b=("a",),
    c=("a",),
    d=("b", "c"),
    e=("d",),
    f=("d",),
    g=("e", "f"),
    lone=(),
)
"""Two diamonds in a row, plus a step that depends on nothing and nothing depends on."""

NAMED = [DIAMOND, CHAIN, FAN, TWO_CHAINS, DOUBLE_DIAMOND]


def random_dag(seed: int, n: int = 10, p: float = 0.3) -> Graph:
    """A reproducible random DAG: step ``n{i}`` depends on each earlier step with chance ``p``."""
    rng = random.Random(seed)
    deps: dict[str, tuple[str, ...]] = {}
    for i in range(n):
        deps[f"n{i}"] = tuple(f"n{j}" for j in range(i) if rng.random() < p)
    return Graph(f"random_{seed}", deps)


def antichain_cover(graph: Graph) -> list[list[str]]:
    """Antichains (sets of pairwise-independent steps) that together contain every independent
    pair: one executor run per antichain checks that all its members overlap."""
    uncovered = set(graph.incomparable_pairs())
    chains: list[list[str]] = []
    while uncovered:
        a, b = min(uncovered)
        chain = [a, b]
        for s in graph.steps:
            if s not in chain and all(not graph.comparable(s, c) for c in chain):
                chain.append(s)
        chains.append(chain)
        uncovered -= {(x, y) for x in chain for y in chain if (x, y) in uncovered}
    return chains
