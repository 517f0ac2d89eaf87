"""The planner's own mechanical fixes: no model call for what needs no guessing."""

from __future__ import annotations

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
