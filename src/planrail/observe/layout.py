"""A small layered (Sugiyama-style) layout, and the SVG drawn from it — no Graphviz needed.

1. Layering: each step goes one layer right of its deepest dependency (longest path from a
   source). In a graph with a cycle (an invalid plan), the edges closing it are drawn but ignored.
2. Edges spanning several layers get a dummy node in each layer between, so they bend around
   boxes instead of crossing them.
3. Ordering: a few barycentre sweeps (each node moves to the mean position of its neighbours in
   the layer before, then after) reduce crossings.
4. Coordinates: layers left to right, each as wide as its widest box; nodes stacked and centred.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from xml.sax.saxutils import escape, quoteattr

from planrail.observe.graph import COLORS, DepGraph

__all__ = ["Box", "Layout", "layout", "to_svg"]

BOX_H = 44.0
DUMMY_H = 10.0
V_GAP = 18.0
H_GAP = 64.0
MARGIN = 20.0
TITLE_H = 30.0
SWEEPS = 4


@dataclass
class Box:
    """A placed node: a step, or a dummy waypoint of a long edge (``step`` is None)."""

    step: str | None
    layer: int
    x: float = 0.0
    y: float = 0.0
    w: float = 0.0
    h: float = BOX_H


@dataclass
class Layout:
    """Where everything goes: boxes by step, edge routes, and the drawing's size."""

    boxes: dict[str, Box]
    routes: list[tuple[str, str, list[tuple[float, float]]]]
    """``(dependency, step, points)``: from the dependency's right side to the step's left."""
    width: float
    height: float


def _order(graph: DepGraph) -> list[str]:
    """Steps in a topological order (stable in plan order); steps on a cycle come last."""
    indeg = {s: 0 for s in graph.deps}
    users: dict[str, list[str]] = {s: [] for s in graph.deps}
    for dep, sid in graph.edges():
        indeg[sid] += 1
        users[dep].append(sid)
    ready = [s for s in graph.deps if indeg[s] == 0]
    out: list[str] = []
    while ready:
        nxt: list[str] = []
        for s in ready:
            out.append(s)
            for u in users[s]:
                indeg[u] -= 1
                if indeg[u] == 0:
                    nxt.append(u)
        ready = nxt
    seen = set(out)
    return out + [s for s in graph.deps if s not in seen]


def _text_w(text: str, px: float) -> float:
    return len(text) * px * 0.6


def layout(graph: DepGraph) -> Layout:
    """Place every step of ``graph`` (see the module docstring for how)."""
    order = _order(graph)
    pos = {s: i for i, s in enumerate(order)}
    forward = [(d, s) for d, s in graph.edges() if pos[d] < pos[s]]
    layer = dict.fromkeys(order, 0)
    for d, s in sorted(forward, key=lambda e: pos[e[1]]):
        layer[s] = max(layer[s], layer[d] + 1)
    n_layers = max(layer.values(), default=-1) + 1
    nodes: dict[str, Box] = {}
    layers: list[list[str]] = [[] for _ in range(n_layers)]
    for s in graph.deps:  # plan order inside a layer to start with
        nodes[s] = Box(s, layer[s], w=_box_w(s, graph.calls.get(s, "")))
        layers[layer[s]].append(s)
    preds: dict[str, list[str]] = {k: [] for k in nodes}
    succs: dict[str, list[str]] = {k: [] for k in nodes}
    chains: dict[tuple[str, str], list[str]] = {}
    for d, s in forward:
        chain = [d]
        for lay in range(layer[d] + 1, layer[s]):
            key = f"\0{d}\0{s}\0{lay}"
            nodes[key] = Box(None, lay, h=DUMMY_H)
            layers[lay].append(key)
            preds[key], succs[key] = [], []
            chain.append(key)
        chain.append(s)
        for a, b in itertools.pairwise(chain):
            succs[a].append(b)
            preds[b].append(a)
        chains[(d, s)] = chain
    _reduce_crossings(layers, preds, succs)
    width, height = _place(layers, nodes, top=MARGIN + (TITLE_H if graph.title else 0.0))
    routes = []
    for d, s in graph.edges():
        src, dst = nodes[d], nodes[s]
        if (d, s) in chains:
            pts = [(src.x + src.w, src.y + src.h / 2)]
            for k in chains[(d, s)][1:-1]:  # through each dummy on a straight line
                mid = nodes[k].y + nodes[k].h / 2
                pts += [(nodes[k].x, mid), (nodes[k].x + nodes[k].w, mid)]
            pts.append((dst.x, dst.y + dst.h / 2))
        else:  # an edge closing a cycle: loop back over the top
            pts = [(src.x + src.w / 2, src.y), (dst.x + dst.w / 2, dst.y)]
        routes.append((d, s, pts))
    return Layout({s: nodes[s] for s in graph.deps}, routes, width, height)


def _box_w(sid: str, calls: str) -> float:
    return max(80.0, _text_w(sid, 13) + 24, _text_w(calls, 11) + 24)


def _reduce_crossings(
    layers: list[list[str]], preds: dict[str, list[str]], succs: dict[str, list[str]]
) -> None:
    index: dict[str, float] = {}
    for lay in layers:
        index.update((k, float(i)) for i, k in enumerate(lay))

    def sweep(lay: list[str], neighbours: dict[str, list[str]]) -> None:
        def key(k: str) -> float:
            ns = neighbours[k]
            return sum(index[n] for n in ns) / len(ns) if ns else index[k]

        lay.sort(key=key)
        index.update((k, float(i)) for i, k in enumerate(lay))

    for _ in range(SWEEPS):
        for lay in layers[1:]:
            sweep(lay, preds)
        for lay in reversed(layers[:-1]):
            sweep(lay, succs)


def _place(layers: list[list[str]], nodes: dict[str, Box], top: float) -> tuple[float, float]:
    heights = [sum(nodes[k].h for k in lay) + V_GAP * max(len(lay) - 1, 0) for lay in layers]
    tallest = max(heights, default=0.0)
    x = MARGIN
    for lay, h in zip(layers, heights, strict=True):
        w = max((nodes[k].w for k in lay), default=0.0)
        y = top + (tallest - h) / 2
        for k in lay:
            box = nodes[k]
            if box.step is None:  # a dummy spans its layer: long edges run straight across
                box.w = w
            box.x, box.y = x + (w - box.w) / 2, y
            y += box.h + V_GAP
        x += w + H_GAP
    return max(x - H_GAP + MARGIN, 2 * MARGIN), top + tallest + MARGIN


# ---------------------------------------------------------------------- SVG


def _path(pts: list[tuple[float, float]]) -> str:
    (x0, y0), rest = pts[0], pts[1:]
    d = [f"M{x0:.1f},{y0:.1f}"]
    if len(pts) == 2 and pts[0][0] >= pts[1][0]:  # back edge: arc above the boxes
        (x1, y1) = pts[1]
        lift = min(y0, y1) - 40
        return f"M{x0:.1f},{y0:.1f} C{x0:.1f},{lift:.1f} {x1:.1f},{lift:.1f} {x1:.1f},{y1:.1f}"
    for x1, y1 in rest:
        mid = (x0 + x1) / 2
        if y1 == y0:
            d.append(f"L{x1:.1f},{y1:.1f}")
        else:
            d.append(f"C{mid:.1f},{y0:.1f} {mid:.1f},{y1:.1f} {x1:.1f},{y1:.1f}")
        x0, y0 = x1, y1
    return " ".join(d)


def to_svg(graph: DepGraph) -> str:
    """A standalone SVG document of the graph (opens in any browser)."""
    lay = layout(graph)
    legend = list(dict.fromkeys(graph.status.values()))
    height = lay.height + (24.0 if legend else 0.0)
    width = max(lay.width, MARGIN * 2 + 110.0 * len(legend))
    out = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="Helvetica, Arial, sans-serif">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" '
        'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
        '<path d="M0,0 L10,5 L0,10 z" fill="#868e96"/></marker></defs>',
        '<rect width="100%" height="100%" fill="#ffffff"/>',
    ]
    if graph.title:
        out.append(
            f'<text x="{MARGIN}" y="{MARGIN + 14}" font-size="15" font-weight="bold" '
            f'fill="#212529">{escape(graph.title)}</text>'
        )
    out.extend(_stage_frames(graph, lay))
    for dep, sid, pts in lay.routes:
        out.append(
            f'<path class="edge" data-from={quoteattr(dep)} data-to={quoteattr(sid)} '
            f'd="{_path(pts)}" fill="none" stroke="#868e96" stroke-width="1.4" '
            'marker-end="url(#arrow)"/>'
        )
    for sid, box in lay.boxes.items():
        status = graph.status.get(sid, "")
        fill, stroke = COLORS.get(status, COLORS[""])
        calls = graph.calls.get(sid, "")
        title = f"{sid}: {status}" if status else sid
        out.append(f'<g class="step" data-step={quoteattr(sid)}><title>{escape(title)}</title>')
        out.append(
            f'<rect x="{box.x:.1f}" y="{box.y:.1f}" width="{box.w:.1f}" height="{box.h:.1f}" '
            f'rx="7" fill="{fill}" stroke="{stroke}" stroke-width="1.6"/>'
        )
        cx = box.x + box.w / 2
        ty = box.y + (19.0 if calls else 27.0)
        out.append(
            f'<text x="{cx:.1f}" y="{ty:.1f}" text-anchor="middle" font-size="13" '
            f'font-weight="bold" fill="#212529">{escape(sid)}</text>'
        )
        if calls:
            out.append(
                f'<text x="{cx:.1f}" y="{box.y + 35:.1f}" text-anchor="middle" font-size="11" '
                f'fill="#495057">{escape(calls)}</text>'
            )
        out.append("</g>")
    for i, status in enumerate(legend):
        fill, stroke = COLORS.get(status, COLORS[""])
        x, y = MARGIN + 110.0 * i, lay.height
        out.append(
            f'<rect x="{x:.0f}" y="{y - 2:.0f}" width="14" height="14" rx="3" fill="{fill}" '
            f'stroke="{stroke}"/><text x="{x + 20:.0f}" y="{y + 10:.0f}" font-size="11" '
            f'fill="#495057">{escape(status)}</text>'
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"


STAGE_PAD = 8.0


def _stage_frames(graph: DepGraph, lay: Layout) -> list[str]:
    """A dashed frame around each stage's boxes, labelled with its id and sub-goal."""
    out = []
    for stage, goal, steps in graph.stages:
        boxes = [lay.boxes[sid] for sid in steps if sid in lay.boxes]
        if not boxes:
            continue
        x0 = min(b.x for b in boxes) - STAGE_PAD
        y0 = max(min(b.y for b in boxes) - STAGE_PAD - 14.0, 0.0)
        x1 = max(b.x + b.w for b in boxes) + STAGE_PAD
        y1 = max(b.y + b.h for b in boxes) + STAGE_PAD
        label = f"{stage}: {goal}"
        out.append(
            f'<g class="stage" data-stage={quoteattr(stage)}><title>{escape(label)}</title>'
            f'<rect x="{x0:.1f}" y="{y0:.1f}" width="{x1 - x0:.1f}" height="{y1 - y0:.1f}" '
            'rx="9" fill="#f8f9fa" stroke="#adb5bd" stroke-dasharray="5,4"/>'
            f'<text x="{x0 + 6:.1f}" y="{y0 + 12:.1f}" font-size="10" fill="#495057">'
            f"{escape(label)}</text></g>"
        )
    return out
