"""A plan's dependency graph as Mermaid, Graphviz DOT or SVG, coloured by status for a run.

Pure functions of data: no I/O, no Graphviz needed (the SVG layout is in
:mod:`planrail.observe.layout`). Edges point from a dependency to the step that waits for it.
A plan's stages are drawn as groups: Mermaid subgraphs, DOT clusters, SVG frames.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from planrail.plan.model import Plan

__all__ = ["COLORS", "DepGraph", "to_dot", "to_mermaid"]

COLORS: dict[str, tuple[str, str]] = {
    "": ("#ffffff", "#495057"),
    "pending": ("#f1f3f5", "#868e96"),
    "running": ("#e3f2fd", "#1e88e5"),
    "succeeded": ("#e6f4ea", "#2e7d32"),
    "failed": ("#fdecea", "#c62828"),
    "skipped": ("#fff8e1", "#f9a825"),
    "cancelled": ("#f3e5f5", "#8e24aa"),
    "in_doubt": ("#ffebee", "#b71c1c"),
}
"""``status: (fill, stroke)``; ``""`` is a plan's step, with no run behind it."""


@dataclass(frozen=True)
class DepGraph:
    """What a graph drawing needs: steps in plan order with their dependencies and labels."""

    deps: dict[str, tuple[str, ...]]
    """``{step: dependencies}`` in plan order; dependencies outside the plan are ignored."""
    calls: dict[str, str] = field(default_factory=dict)
    """What each step calls (tool name, or ``llm_call (model)``…), shown under its id."""
    status: dict[str, str] = field(default_factory=dict)
    """Each step's status, for a run; empty for a plan."""
    title: str = ""
    stages: tuple[tuple[str, str, tuple[str, ...]], ...] = ()
    """``(id, sub-goal, steps)`` of each stage, in order; drawn as groups."""

    @classmethod
    def of(
        cls, plan: Plan | Mapping[str, Any], status: Mapping[str, str] | None = None
    ) -> DepGraph:
        """The graph of a :class:`Plan` or a plan document (plain JSON)."""
        steps: list[Any] = list(plan.steps if isinstance(plan, Plan) else plan.get("steps", []))
        data = [
            s.model_dump(exclude_defaults=True) if not isinstance(s, dict) else s for s in steps
        ]
        goal = plan.goal if isinstance(plan, Plan) else str(plan.get("goal", ""))
        raw_stages: list[Any] = list(
            plan.stages if isinstance(plan, Plan) else plan.get("stages") or []
        )
        stages = [st.model_dump() if not isinstance(st, dict) else st for st in raw_stages]
        return cls(
            deps={s["id"]: tuple(s.get("depends_on", ())) for s in data},
            calls={s["id"]: _calls(s) for s in data},
            status={k: str(v) for k, v in (status or {}).items()},
            title=goal,
            stages=tuple(
                (str(st["id"]), str(st.get("goal", "")), tuple(st.get("steps", ())))
                for st in stages
            ),
        )

    def grouped(
        self, node: Callable[[str], str], begin: Callable[[int, str, str], str], end: str
    ) -> list[str]:
        """Node lines, each stage's inside its group (``begin(index, id, goal)`` ... ``end``),
        then the steps in no stage."""
        nodes = {sid: node(sid) for sid in self.deps}
        lines: list[str] = []
        for i, (stage, goal, steps) in enumerate(self.stages):
            lines.append(begin(i, stage, goal))
            lines.extend(f"  {nodes.pop(sid)}" for sid in steps if sid in nodes)
            lines.append(end)
        lines.extend(nodes.values())
        return lines

    def edges(self) -> list[tuple[str, str]]:
        """``(dependency, step)`` pairs, in plan order, without duplicates."""
        out: dict[tuple[str, str], None] = {}
        for sid, deps in self.deps.items():
            for d in deps:
                if d in self.deps:
                    out[(d, sid)] = None
        return list(out)


def _calls(step: Mapping[str, Any]) -> str:
    action = str(step.get("action", "tool_call"))
    if action == "tool_call":
        return str(step.get("tool") or "")
    return f"{action} ({step['model']})" if step.get("model") else action


# ---------------------------------------------------------------------- Mermaid

_MERMAID_WORDS = frozenset(
    {"end", "graph", "subgraph", "flowchart", "style", "class", "classdef", "click"}
    | {"linkstyle", "default", "direction", "call", "href", "interpolate", "accdescr", "acctitle"}
)


def _mermaid_ids(ids: list[str]) -> dict[str, str]:
    """Node ids Mermaid accepts: a step id, unless it is a Mermaid keyword (then ``id_``)."""
    taken = set(ids)
    out: dict[str, str] = {}
    for sid in ids:
        nid = sid
        if sid.lower() in _MERMAID_WORDS:
            nid = sid + "_"
            while nid in taken:
                nid += "_"
            taken.add(nid)
        out[sid] = nid
    return out


def _mermaid_text(text: str) -> str:
    return (
        text.replace("&", "#amp;").replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;")
    )


def to_mermaid(graph: DepGraph) -> str:
    """A Mermaid ``flowchart LR``: one node per step (``id<br/>calls``), one arrow per edge."""
    ids = _mermaid_ids(list(graph.deps))
    lines = ["flowchart LR"]
    if graph.title:
        lines.insert(0, f"---\ntitle: {json.dumps(graph.title, ensure_ascii=False)}\n---")

    def node(sid: str) -> str:
        label = _mermaid_text(sid)
        if graph.calls.get(sid):
            label += "<br/>" + _mermaid_text(graph.calls[sid])
        status = graph.status.get(sid)
        return f'  {ids[sid]}["{label}"]' + (f":::{status}" if status else "")

    prefix = "stage_"
    while any(nid.startswith(prefix) for nid in ids.values()):
        prefix += "_"  # a group's id never meets a step's

    def begin(i: int, stage: str, goal: str) -> str:
        return f'  subgraph {prefix}{i}["{_mermaid_text(f"{stage}: {goal}")}"]'

    lines.extend(graph.grouped(node, begin, "  end"))
    for dep, sid in graph.edges():
        lines.append(f"  {ids[dep]} --> {ids[sid]}")
    for status in dict.fromkeys(graph.status.values()):
        fill, stroke = COLORS.get(status, COLORS[""])
        lines.append(f"  classDef {status} fill:{fill},stroke:{stroke},color:#212529")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------- DOT


def _dot(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_dot(graph: DepGraph) -> str:
    """A Graphviz ``digraph``, left to right; filled by status for a run."""
    fill, stroke = COLORS[""]
    lines = [
        "digraph plan {",
        '  graph [rankdir=LR, fontname="Helvetica", labelloc=t'
        + (f", label={_dot(graph.title)}" if graph.title else "")
        + "];",
        f'  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=11, '
        f'fillcolor="{fill}", color="{stroke}"];',
        '  edge [color="#868e96", arrowsize=0.7];',
    ]

    def node(sid: str) -> str:
        label = sid + (f"\n{graph.calls[sid]}" if graph.calls.get(sid) else "")
        attrs = [f"label={_dot(label)}"]
        status = graph.status.get(sid)
        if status:
            fill, stroke = COLORS.get(status, COLORS[""])
            attrs += [f'fillcolor="{fill}"', f'color="{stroke}"', f"tooltip={_dot(status)}"]
        return f"  {_dot(sid)} [{', '.join(attrs)}];"

    def begin(i: int, stage: str, goal: str) -> str:
        return (
            f'  subgraph "cluster_stage_{i}" {{ label={_dot(f"{stage}: {goal}")};'
            ' style="rounded,dashed"; color="#adb5bd";'
        )

    lines.extend(graph.grouped(node, begin, "  }"))
    for dep, sid in graph.edges():
        lines.append(f"  {_dot(dep)} -> {_dot(sid)};")
    lines.append("}")
    return "\n".join(lines) + "\n"
