"""Stages drawn as groups: Mermaid subgraphs, DOT clusters, SVG frames; and the stages table
of ``planrail show``, with each confirmation's verdict."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from importlib import resources
from pathlib import Path
from typing import Any

from rich.console import Console

from planrail.cli.inspect_cmd import render_show
from planrail.engine.result import RunResult, StepResult
from planrail.observe.graph import DepGraph, to_dot, to_mermaid
from planrail.observe.layout import layout, to_svg
from planrail.observe.view import RunView
from planrail.plan.validate import load_plan
from planrail.types import StepStatus

from .test_cli import cli  # noqa: F401  (the fixture)

STAGES = [
    {"id": "setup", "goal": "Price and account exist", "steps": ["price", "account"]},
    {"id": "provision", "goal": "Alice can log in", "steps": ["subscription", "workspace",
                                                            "welcome"]},
]  # fmt: skip
SVG_NS = "{http://www.w3.org/2000/svg}"


def staged_demo() -> dict[str, Any]:
    text = resources.files("planrail.demo").joinpath("plan.json").read_text(encoding="utf-8")
    return {**json.loads(text), "stages": STAGES}


def test_mermaid_draws_each_stage_as_a_subgraph_holding_its_steps() -> None:
    """Each stage is a subgraph labelled 'id: sub-goal' that holds exactly its steps; every
    edge is still drawn."""
    text = to_mermaid(DepGraph.of(load_plan(staged_demo())))
    blocks = re.findall(r'^  subgraph (\w+)\["([^"]*)"\]\n(.*?)^  end$', text, re.M | re.S)
    assert [(label, re.findall(r"^    (\w+)\[", body, re.M)) for _, label, body in blocks] == [
        ("setup: Price and account exist", ["price", "account"]),
        ("provision: Alice can log in", ["subscription", "workspace", "welcome"]),
    ]
    assert "  account --> subscription" in text


def test_a_subgraph_id_never_meets_a_step_id() -> None:
    """A step named like a group id pushes the group ids to another prefix."""
    plan = {"steps": [{"id": "stage_0", "tool": "t"}],
            "stages": [{"id": "s", "goal": "g", "steps": ["stage_0"]}]}  # fmt: skip
    text = to_mermaid(DepGraph.of(plan))
    assert '  subgraph stage__0["s: g"]' in text
    assert '    stage_0["stage_0<br/>t"]' in text


def test_dot_draws_each_stage_as_a_cluster() -> None:
    """Each stage is a cluster subgraph with its label, holding its steps' nodes."""
    text = to_dot(DepGraph.of(load_plan(staged_demo())))
    clusters = re.findall(r'^  subgraph "(cluster_\w+)" \{ label="([^"]*)";.*?\n(.*?)^  \}$',
                          text, re.M | re.S)  # fmt: skip
    assert [(label, re.findall(r'^    "(\w+)" \[', body, re.M)) for _, label, body in clusters] == [
        ("setup: Price and account exist", ["price", "account"]),
        ("provision: Alice can log in", ["subscription", "workspace", "welcome"]),
    ]


def test_svg_frames_each_stage_around_its_boxes() -> None:
    """The SVG has one labelled frame per stage (drawn under the boxes) enclosing every box
    of its steps."""
    graph = DepGraph.of(load_plan(staged_demo()))
    root = ET.fromstring(to_svg(graph))
    frames = {g.get("data-stage"): g for g in root.iter(f"{SVG_NS}g") if g.get("class") == "stage"}
    assert list(frames) == ["setup", "provision"]
    boxes = layout(graph).boxes
    for stage in STAGES:
        rect = frames[stage["id"]].find(f"{SVG_NS}rect")
        assert rect is not None
        x, y = float(rect.get("x", 0)), float(rect.get("y", 0))
        w, h = float(rect.get("width", 0)), float(rect.get("height", 0))
        for sid in stage["steps"]:
            b = boxes[sid]
            assert x <= b.x
            assert y <= b.y
            assert b.x + b.w <= x + w
            assert b.y + b.h <= y + h
        assert f"{stage['id']}: {stage['goal']}" in "".join(frames[stage["id"]].itertext())


def test_show_lists_the_stages_of_a_run(cli: Any, tmp_path: Path) -> None:  # noqa: F811
    """``planrail show`` on a staged run prints each stage with its sub-goal and steps."""
    plan = tmp_path / "staged.json"
    plan.write_text(json.dumps(staged_demo()), encoding="utf-8")
    cli("run", str(plan), "--tools", "planrail.demo.onboarding", "--yes", "--run-id", "r1")
    text = cli("show", "r1")
    assert re.search(r"setup\s+Price and account exist\s+✓ price\s+✓ account", text), text
    assert re.search(r"provision\s+Alice can log in\s+✓ subscription", text), text


def test_show_gives_each_confirmation_its_verdict() -> None:
    """A stage whose check said no shows 'not confirmed' and the reason; one never reached
    says so."""
    plan = {
        "steps": [{"id": "a", "tool": "t"}, {"id": "b", "tool": "t"}, {"id": "c", "tool": "t"}],
        "stages": [
            {"id": "one", "goal": "A done", "steps": ["a"]},
            {"id": "two", "goal": "B done", "steps": ["b"], "confirm": True},
            {"id": "three", "goal": "C done", "steps": ["c"], "confirm": True},
        ],
    }
    steps = {
        "a": StepResult("a", StepStatus.SUCCEEDED),
        "b": StepResult("b", StepStatus.SKIPPED, reason="stage 'two' was not confirmed: no A"),
        "c": StepResult("c", StepStatus.SKIPPED),
    }
    event = {"type": "stage_checked", "at": 0.0, "step_id": None, "attempt": None,
             "data": {"stage": "two", "ok": False, "reason": "no A"}}  # fmt: skip
    view = RunView("r", plan, RunResult("r", "failed", steps), events=[event])
    console = Console(record=True, width=140)
    render_show(console, view)
    text = console.export_text()
    assert re.search(r"two\s+B done\s+. b\s+not confirmed: no A", text), text
    assert re.search(r"three\s+C done\s+. c\s+confirm: not reached", text), text
