"""Graph drawings: Mermaid and DOT hold every step and edge; the SVG is well-formed, laid out
left to right without overlaps, and opens in a browser."""

from __future__ import annotations

import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planrail.observe.graph import DepGraph, to_dot, to_mermaid
from planrail.observe.layout import layout, to_svg
from planrail.plan.validate import load_plan

SVG_NS = "{http://www.w3.org/2000/svg}"
DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"


def demo_graph(status: dict[str, str] | None = None) -> DepGraph:
    text = resources.files("planrail.demo").joinpath("plan.json").read_text(encoding="utf-8")
    return DepGraph.of(load_plan(text), status)


def demo_edges() -> set[tuple[str, str]]:
    graph = demo_graph()
    return {(d, s) for s, deps in graph.deps.items() for d in deps}


def parse_mermaid(text: str) -> tuple[dict[str, str], set[tuple[str, str]]]:
    """Node id -> label, and edges (by node id)."""
    nodes = dict(re.findall(r'^  (\w+)\["([^"]*)"\]', text, re.M))
    edges = set(re.findall(r"^  (\w+) --> (\w+)$", text, re.M))
    return nodes, edges


def parse_dot(text: str) -> tuple[set[str], set[tuple[str, str]]]:
    nodes = set(re.findall(r'^  "([^"]+)" \[label=', text, re.M))
    edges = set(re.findall(r'^  "([^"]+)" -> "([^"]+)";$', text, re.M))
    return nodes, edges


def test_mermaid_has_every_step_and_edge_of_the_demo_plan() -> None:
    """Parsing the flowchart back gives exactly the plan's steps and dependency edges."""
    text = to_mermaid(demo_graph())
    assert "\nflowchart LR\n" in text
    nodes, edges = parse_mermaid(text)
    assert set(nodes) == set(demo_graph().deps)
    assert nodes["subscription"] == "subscription<br/>create_subscription"
    assert edges == demo_edges()


def test_dot_has_every_step_and_edge_of_the_demo_plan() -> None:
    """Parsing the digraph back gives exactly the plan's steps and dependency edges."""
    text = to_dot(demo_graph())
    assert text.startswith("digraph plan {")
    nodes, edges = parse_dot(text)
    assert nodes == set(demo_graph().deps)
    assert edges == demo_edges()


def test_a_run_is_coloured_by_status() -> None:
    """Each status gets its own fill in every format, and a Mermaid class per status."""
    status = {
        "price": "succeeded",
        "account": "failed",
        "subscription": "skipped",
        "workspace": "cancelled",
        "welcome": "pending",
    }
    graph = demo_graph(status)
    mermaid = to_mermaid(graph)
    assert '  account["account<br/>create_account"]:::failed' in mermaid
    assert "classDef failed fill:#fdecea" in mermaid
    assert '"account" [label="account\\ncreate_account", fillcolor="#fdecea"' in to_dot(graph)
    root = ET.fromstring(to_svg(graph))
    fills = {
        g.get("data-step"): g.find(f"{SVG_NS}rect").get("fill")  # type: ignore[union-attr]
        for g in root.iter(f"{SVG_NS}g")
    }
    assert fills["account"] == "#fdecea"
    assert fills["price"] == "#e6f4ea"


def test_mermaid_keywords_and_quotes_are_escaped() -> None:
    """A step named ``end`` (a Mermaid keyword) and labels with quotes still parse."""
    graph = DepGraph({"end": (), "x": ("end",)}, {"end": 'say "hi"'}, title='a "goal"')
    text = to_mermaid(graph)
    nodes, edges = parse_mermaid(text)
    assert nodes == {"end_": "end<br/>say #quot;hi#quot;", "x": "x"}
    assert edges == {("end_", "x")}
    assert 'title: "a \\"goal\\""' in text
    dot_nodes, _ = parse_dot(to_dot(DepGraph({'a"b': ()})))
    assert dot_nodes == set()  # quotes are escaped inside the id, so the naive regex stops short
    assert '"a\\"b"' in to_dot(DepGraph({'a"b': ()}))


def test_svg_is_well_formed_with_every_step_and_edge() -> None:
    """xml.etree parses it; one group per step, one path per edge, with the ids as data."""
    root = ET.fromstring(to_svg(demo_graph()))
    assert root.tag == f"{SVG_NS}svg"
    steps = {g.get("data-step") for g in root.iter(f"{SVG_NS}g")}
    assert steps == set(demo_graph().deps)
    edges = {
        (p.get("data-from"), p.get("data-to"))
        for p in root.iter(f"{SVG_NS}path")
        if p.get("class") == "edge"
    }
    assert edges == demo_edges()


def test_committed_demo_svg_is_current() -> None:
    """docs/img/demo-plan.svg is what ``planrail graph`` draws for the demo plan today."""
    assert (DOCS_IMG / "demo-plan.svg").read_text(encoding="utf-8") == to_svg(demo_graph())


def check_layout(graph: DepGraph) -> None:
    lay = layout(graph)
    for dep, sid in graph.edges():
        a, b = lay.boxes[dep], lay.boxes[sid]
        assert a.x + a.w < b.x, f"{dep} -> {sid} does not go left to right"
    boxes = list(lay.boxes.values())
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            apart = a.x + a.w <= b.x or b.x + b.w <= a.x or a.y + a.h <= b.y or b.y + b.h <= a.y
            assert apart, f"{a.step} overlaps {b.step}"
        assert 0 <= a.x <= a.x + a.w <= lay.width
        assert 0 <= a.y <= a.y + a.h <= lay.height


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 30), max_size=4), min_size=1, max_size=30))
def test_layout_of_random_dags(raw: list[list[int]]) -> None:
    """Any DAG: every edge points right, no two boxes overlap, all inside the drawing."""
    deps = {
        f"s{i}": tuple(dict.fromkeys(f"s{d % i}" for d in ds)) if i else ()
        for i, ds in enumerate(raw)
    }
    check_layout(DepGraph(deps))


def test_layout_tolerates_cycles() -> None:
    """An invalid plan with a cycle is still drawn, with every edge."""
    graph = DepGraph({"a": ("c",), "b": ("a",), "c": ("b",), "d": ()})
    root = ET.fromstring(to_svg(graph))
    assert len([p for p in root.iter(f"{SVG_NS}path") if p.get("class") == "edge"]) == 3


def test_long_edges_bend_around_boxes() -> None:
    """An edge that skips a layer is routed through a waypoint in that layer."""
    graph = DepGraph({"a": (), "b": ("a",), "c": ("a", "b")})
    routes = {(d, s): pts for d, s, pts in layout(graph).routes}
    assert len(routes[("a", "b")]) == 2
    assert len(routes[("a", "c")]) == 4  # start, both ends of the waypoint, end


CHROMIUM = shutil.which("chromium") or (
    "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None
)


@pytest.mark.skipif(CHROMIUM is None, reason="no /usr/bin/chromium (installed by `make` later)")
def test_svg_renders_in_a_headless_browser(tmp_path: Path) -> None:
    """Chromium opens the SVG and renders it to a non-empty PNG."""
    assert CHROMIUM is not None
    svg = tmp_path / "plan.svg"
    svg.write_text(to_svg(demo_graph({"account": "failed"})), encoding="utf-8")
    png = tmp_path / "plan.png"
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        f"--user-data-dir={tmp_path / 'profile'}",
        f"--screenshot={png}",
        "--window-size=800,300",
        svg.as_uri(),
    ]
    subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 2000  # a blank page compresses to far less
