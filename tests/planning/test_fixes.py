"""The planner's own mechanical fixes: no model call for what needs no guessing."""

from __future__ import annotations

from planrail.plan.repair import repair
from planrail.plan.tools import ToolRegistry
from planrail.planner.fixes import prefix_fixes

from .conftest import Kit


def test_a_tool_name_as_dependency_becomes_the_step_calling_it(kit: Kit) -> None:
    """depends_on: ["search"] where exactly one step calls search becomes that step's id; an
    unknown target no reference uses is dropped; a self-dependency is taken out."""
    data = {
        "steps": [
            {"id": "find", "tool": "search", "args": {"query": "q"}, "depends_on": ["find"]},
            {
                "id": "acct",
                "tool": "create_account",
                "args": {"name": "A", "email": "a@x"},
                "depends_on": ["search", "ghost"],
            },
        ]
    }
    fixed, changes = prefix_fixes(data, ToolRegistry(kit.tools))
    assert fixed["steps"][0]["depends_on"] == []
    assert fixed["steps"][1]["depends_on"] == ["find"]
    assert len(changes) == 3


def test_an_unknown_target_that_a_reference_uses_is_kept(kit: Kit) -> None:
    """A target that a reference of the step names is left for the validator to report
    (dropping it would hide a real error)."""
    data = {
        "steps": [
            {
                "id": "mail",
                "tool": "send_email",
                "args": {"user_id": "${acct.user_id}", "subject": "s", "body": "b"},
                "depends_on": ["acct"],
            }
        ]
    }
    fixed, changes = prefix_fixes(data, ToolRegistry(kit.tools))
    assert fixed["steps"][0]["depends_on"] == ["acct"]
    assert changes == []


def test_a_reference_to_a_tool_name_points_at_the_step_calling_it(kit: Kit) -> None:
    """${create_account.user_id} where exactly one step calls create_account (and no step is
    called that) becomes ${acct.user_id}, inside longer text too (a literal $${ stays
    escaped); the plan is then valid, with the dependency added by the repair."""
    data = {
        "goal": "g",
        "steps": [
            {"id": "acct", "tool": "create_account", "args": {"name": "A", "email": "a@x"}},
            {
                "id": "mail",
                "tool": "send_email",
                "args": {
                    "user_id": "${create_account.user_id}",
                    "subject": "Hi ${create_account.name}, $${not.a.ref}",
                    "body": "b",
                },
                "depends_on": ["create_account"],
            },
        ],
    }
    registry = ToolRegistry(kit.tools)
    fixed, changes = prefix_fixes(data, registry)
    args = fixed["steps"][1]["args"]
    assert args["user_id"] == "${acct.user_id}"
    assert args["subject"] == "Hi ${acct.name}, $${not.a.ref}"
    assert fixed["steps"][1]["depends_on"] == ["acct"]
    assert len(changes) == 3
    assert repair(fixed, registry).report.valid


def test_a_tool_name_reference_is_left_when_it_is_ambiguous_or_a_step_id(kit: Kit) -> None:
    """No rewrite when two steps call the tool, when a step has that id, or when the only
    step calling it is the referring step itself: the validator reports those."""
    two = {
        "steps": [
            {"id": "a", "tool": "search", "args": {"query": "x"}},
            {"id": "b", "tool": "search", "args": {"query": "y"}},
            {"id": "c", "tool": "search", "args": {"query": "${search.top}"}},
        ]
    }
    own = {"steps": [{"id": "a", "tool": "search", "args": {"query": "${search.top}"}}]}
    named = {
        "steps": [
            {"id": "search", "tool": "create_account", "args": {"name": "${search.x}"}},
            {"id": "s2", "tool": "search", "args": {"query": "${search.user_id}"}},
        ]
    }
    registry = ToolRegistry(kit.tools)
    for data in (two, own, named):
        fixed, changes = prefix_fixes(data, registry)
        assert [s["args"] for s in fixed["steps"]] == [s["args"] for s in data["steps"]]
        assert not [c for c in changes if "names a tool" in c]
