"""repair(): normalise aliases and add the depends_on edges references prove, never guessing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planrail.plan.repair import RepairResult, repair
from planrail.plan.tools import ToolRegistry
from planrail.plan.validate import load_plan, validate

from .helpers import PLANS, codes


def test_adds_the_missing_edge_and_says_so(catalog: ToolRegistry) -> None:
    """A reference without its dependency gets the edge, one line says what was added."""
    result = repair(PLANS / "undeclared_dependency.json", catalog)
    assert isinstance(result, RepairResult)
    assert result.valid
    assert result.plan_data["steps"][1]["depends_on"] == ["account"]
    assert result.changes == [
        "$.steps[1].depends_on: added 'account' to the dependencies of 'subscription'"
        " ($.steps[1].args.user_id uses ${account.user_id})"
    ]
    assert result.skipped == []
    assert result.report.plan is not None


def test_normalises_aliases_and_reports_each_change() -> None:
    """Aliases are rewritten to the canonical form and listed among the changes."""
    plan = {
        "steps": [
            {"step_id": "a", "tool_name": "t", "type": "call_tool"},
            {"id": "b", "tool": "t", "arguments": {"x": "${a.y}"}, "dependencies": []},
        ]
    }
    result = repair(plan)
    assert result.valid
    assert result.plan_data["steps"] == [
        {"id": "a", "tool": "t", "action": "tool_call"},
        {"id": "b", "tool": "t", "args": {"x": "${a.y}"}, "depends_on": ["a"]},
    ]
    assert result.changes[:4] == [
        "$.steps[0].step_id: 'step_id' read as 'id'",
        "$.steps[0].tool_name: 'tool_name' read as 'tool'",
        "$.steps[0].type: 'type' read as 'action'",
        "$.steps[0].action: action 'call_tool' read as 'tool_call'",
    ]
    assert "added 'a' to the dependencies of 'b'" in result.changes[-1]
    assert result.report.warnings == []  # already canonical when re-validated


def test_never_adds_a_self_reference() -> None:
    """``${s.x}`` inside step s is not turned into ``depends_on: [s]``; it stays an error."""
    result = repair({"steps": [{"id": "s", "tool": "t", "args": {"x": "${s.x}"}}]})
    assert "depends_on" not in result.plan_data["steps"][0]
    assert result.changes == []
    assert "references its own output" in result.skipped[0]
    assert codes(result.report) == {"self_dependency"}


def test_never_adds_an_edge_that_closes_a_cycle() -> None:
    """a uses b and b uses a: the first edge is added, the second would loop and is skipped."""
    plan = {
        "steps": [
            {"id": "a", "tool": "t", "args": {"x": "${b.y}"}},
            {"id": "b", "tool": "t", "args": {"x": "${a.y}"}},
        ]
    }
    result = repair(plan)
    assert result.plan_data["steps"][0]["depends_on"] == ["b"]
    assert "depends_on" not in result.plan_data["steps"][1]
    assert len(result.changes) == 1
    (skip,) = result.skipped
    assert "would create the cycle b -> a -> b" in skip
    assert codes(result.report) == {"cycle", "undeclared_dependency"}


def test_a_cycle_through_existing_ordering_edges_is_respected() -> None:
    """An edge that would close a loop with declared ordering edges is not added."""
    plan = {
        "steps": [
            {"id": "a", "tool": "t", "depends_on": ["c"]},
            {"id": "b", "tool": "t", "depends_on": ["a"]},
            {"id": "c", "tool": "t", "args": {"x": "${b}"}},
        ]
    }
    result = repair(plan)
    assert result.changes == []
    assert "c -> b -> a -> c" in result.skipped[0]


def test_unknown_steps_and_local_names_are_left_alone() -> None:
    """References to missing steps, ``${item}`` and ``${self}`` add no edges."""
    plan = {
        "steps": [
            {"id": "l", "tool": "t"},
            {"id": "each", "tool": "t", "for_each": "${l}", "args": {"x": "${item}",
             "y": "${ghost.z}"}, "repeat": {"until": "${self.done}", "max_iterations": 2}},
        ]
    }  # fmt: skip
    result = repair(plan)
    assert result.plan_data["steps"][1]["depends_on"] == ["l"]
    assert codes(result.report) == {"unknown_step_reference"}


def test_references_in_every_field_are_considered() -> None:
    """Prompts, guards, fallbacks and repeat predicates imply edges too, once per target."""
    plan = {
        "steps": [
            {"id": "a", "tool": "t"},
            {"id": "b", "tool": "t"},
            {"id": "c", "tool": "t"},
            {"id": "d", "action": "llm_call", "prompt": "use ${a} and ${a.x}",
             "when": {"eq": ["${b}", 1]}, "fallback": {"value": "${c}"}},
        ]
    }  # fmt: skip
    result = repair(plan)
    assert result.plan_data["steps"][3]["depends_on"] == ["a", "b", "c"]
    assert result.valid


def test_the_source_is_never_modified() -> None:
    """repair works on a copy; the caller's dict is unchanged."""
    plan = {"steps": [{"id": "a", "tool": "t"}, {"id": "b", "tool": "t", "args": {"x": "${a}"},
                                                  "depends_on": []}]}  # fmt: skip
    before = json.dumps(plan)
    result = repair(plan)
    assert json.dumps(plan) == before
    assert result.plan_data["steps"][1]["depends_on"] == ["a"]


def test_a_valid_plan_is_returned_unchanged(catalog: ToolRegistry) -> None:
    """Nothing to repair: no changes, and the same plan (same hash) comes back."""
    result = repair(PLANS / "onboarding.yaml", catalog)
    assert result.changes == result.skipped == []
    assert result.report.plan == load_plan(PLANS / "onboarding.json", catalog)
    plan_obj = load_plan(PLANS / "onboarding.json", catalog)
    assert repair(plan_obj, catalog).report.plan == plan_obj


def test_unreadable_sources_are_returned_with_their_report(tmp_path: Path) -> None:
    """A plan that cannot be parsed is not repaired; the report says why."""
    result = repair(PLANS / "parse_error.json")
    assert result.plan_data == {}
    assert codes(result.report) == {"parse_error"}
    assert codes(repair("[1, 2]").report) == {"parse_error"}


def test_other_problems_are_still_reported_after_repair(catalog: ToolRegistry) -> None:
    """repair fixes what it can; the re-validation reports everything else."""
    result = repair(PLANS / "many_problems.yaml", catalog)
    assert "undeclared_dependency" not in codes(result.report)
    assert codes(result.report) == {
        "unknown_tool", "unknown_step_reference", "missing_argument", "self_dependency",
        "invalid_id", "cycle",
    }  # fmt: skip


@st.composite
def undeclared_dags(draw: st.DrawFn) -> dict[str, Any]:
    """An acyclic plan whose references (backward only) are declared at random."""
    n = draw(st.integers(min_value=1, max_value=12))
    steps = []
    for i in range(n):
        targets = draw(st.lists(st.integers(0, i - 1), unique=True, max_size=3)) if i else []
        declared = [f"s{t}" for t in targets if draw(st.booleans())]
        args = {f"a{t}": f"${{s{t}.v}}" for t in targets}
        steps.append({"id": f"s{i}", "tool": "t", "args": args, "depends_on": declared})
    return {"steps": steps}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(undeclared_dags())
def test_repair_makes_every_acyclic_plan_valid(plan: dict[str, Any]) -> None:
    """For any acyclic plan, repair adds exactly the missing edges and the result is valid."""
    missing = sum(
        1 for s in plan["steps"] for a in s["args"].values() if a[2:-3] not in s["depends_on"]
    )
    result = repair(plan)
    assert result.valid, result.report.errors
    assert len(result.changes) == missing
    assert validate(result.plan_data).valid
