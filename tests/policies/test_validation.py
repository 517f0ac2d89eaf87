"""Invalid policies are rejected statically, each with a stable code and a path."""

from __future__ import annotations

from typing import Any

import pytest

from planrail.plan.validate import CODES, validate
from planrail.testing import FaultTool

TOOLS = [
    FaultTool(
        "t",
        output_schema={
            "type": "object",
            "properties": {
                "score": {"type": "integer"},
                "items": {"type": "array"},
                "name": {"type": "string"},
            },
        },
    ),
    FaultTool("u"),
]


def issues(steps: list[dict[str, Any]]) -> list[tuple[str, str]]:
    report = validate({"steps": steps}, TOOLS)
    return [(i.code, i.path) for i in report.errors]


SRC = {"id": "src", "tool": "t"}


@pytest.mark.parametrize(
    ("step", "code", "path"),
    [
        (
            {"retry": {"max_attempts": 3, "initial_delay": -1}},
            "invalid_policy",
            "$.steps[1].retry.initial_delay",
        ),
        ({"retry": {"max_attempts": 0}}, "invalid_policy", "$.steps[1].retry.max_attempts"),
        ({"retry": {"jitter": 2}}, "invalid_policy", "$.steps[1].retry.jitter"),
        ({"timeout": -5}, "invalid_policy", "$.steps[1].timeout"),
        ({"repeat": {"until": True}}, "invalid_policy", "$.steps[1].repeat.max_iterations"),
        (
            {"repeat": {"until": True, "max_iterations": 10**6}},
            "invalid_policy",
            "$.steps[1].repeat.max_iterations",
        ),
        (
            {"for_each": "${src.name}", "depends_on": ["src"]},
            "invalid_policy",
            "$.steps[1].for_each",
        ),
        (
            {"for_each": "items: ${src.items}", "depends_on": ["src"]},
            "invalid_policy",
            "$.steps[1].for_each",
        ),
        (
            {"when": {"eq": ["${src.nope}", 1]}, "depends_on": ["src"]},
            "unknown_output_field",
            "$.steps[1].when.eq[0]",
        ),
        ({"when": {"equal": [1, 2]}}, "invalid_predicate", "$.steps[1].when"),
        (
            {"repeat": {"until": {"gt": ["${self.bogus}", 1]}, "max_iterations": 3}, "tool": "t"},
            "unknown_output_field",
            "$.steps[1].repeat.until.gt[0]",
        ),
        (
            {"repeat": {"until": {"gt": 1}, "max_iterations": 3}},
            "invalid_predicate",
            "$.steps[1].repeat.until.gt",
        ),
        ({"args": {"x": {"$first": []}}}, "invalid_reference", "$.steps[1].args.x"),
        (
            {"args": {"x": {"$first": ["${src.name}"], "y": 1}}, "depends_on": ["src"]},
            "invalid_reference",
            "$.steps[1].args.x",
        ),
        ({"join": "any_succeeded"}, "invalid_policy", "$.steps[1].join"),
        (
            {"args": {"x": "${self.score}"}, "repeat": {"until": True, "max_iterations": 2}},
            "invalid_reference",
            "$.steps[1].args.x",
        ),
        (
            {"max_parallel": 0, "for_each": "${src.items}", "depends_on": ["src"]},
            "invalid_policy",
            "$.steps[1].max_parallel",
        ),
    ],
)
def test_invalid_policies_have_codes_and_paths(step: dict[str, Any], code: str, path: str) -> None:
    """Each invalid policy is reported with its code at the offending field."""
    found = issues([SRC, {"id": "s", "tool": "u", **step}])
    assert (code, path) in found, found


def test_condition_check_needs_a_valid_predicate() -> None:
    """A condition_check whose condition is not a predicate is invalid_predicate."""
    found = issues([{"id": "c", "action": "condition_check", "condition": {"maybe": 1}}])
    assert found == [("invalid_predicate", "$.steps[0].condition")]


def test_valid_policies_pass() -> None:
    """A plan using every policy correctly validates without errors."""
    steps = [
        SRC,
        {
            "id": "ok",
            "action": "condition_check",
            "condition": {"all": [{"exists": "${src.score}"}, {"ge": ["${src.score}", 3]}]},
            "depends_on": ["src"],
        },
        {
            "id": "each",
            "tool": "u",
            "for_each": "${src.items}",
            "max_parallel": 4,
            "args": {"v": "${item}"},
            "depends_on": ["src", "ok"],
            "when": "${ok}",
            "retry": {"max_attempts": 3, "initial_delay": 0.5},
            "timeout": 5,
            "total_timeout": 20,
            "fallback": {"value": {"v": "${item}"}},
            "resource": "api",
        },
        {
            "id": "loop",
            "tool": "t",
            "repeat": {"until": {"ge": ["${self.score}", 5]}, "max_iterations": 5},
        },
        {
            "id": "join",
            "tool": "u",
            "depends_on": ["each", "loop"],
            "join": "any_succeeded",
            "args": {"x": {"$first": ["${each}", "${loop.score}", None]}},
        },
    ]
    report = validate({"steps": steps}, TOOLS)
    assert report.errors == []


def test_first_under_all_succeeded_is_a_warning() -> None:
    """$first in a step whose join is all_succeeded always takes its first candidate: warned."""
    steps = [
        SRC,
        {
            "id": "s",
            "tool": "u",
            "depends_on": ["src"],
            "args": {"x": {"$first": ["${src.name}", "d"]}},
        },
    ]
    report = validate({"steps": steps}, TOOLS)
    assert report.valid
    assert "first_always_first" in {w.code for w in report.warnings}


def test_a_first_value_is_type_checked_candidate_by_candidate() -> None:
    """Each $first candidate must fit the parameter; the $first object itself is no mismatch."""
    import planrail

    @planrail.tool
    def needs_int(n: int) -> int:
        return n

    steps = [
        SRC,
        {
            "id": "s",
            "tool": "needs_int",
            "depends_on": ["src"],
            "join": "all_finished",
            "args": {"n": {"$first": ["${src.score}", 0]}},
        },
    ]
    assert validate({"steps": steps}, [*TOOLS, needs_int]).valid
    steps[1]["args"] = {"n": {"$first": ["${src.name}", 0]}}
    found = [i.code for i in validate({"steps": steps}, [*TOOLS, needs_int]).errors]
    assert found == ["type_mismatch"]


def test_new_codes_are_listed_as_stable() -> None:
    """The codes this pass uses are all in CODES."""
    assert {
        "invalid_policy",
        "invalid_predicate",
        "invalid_reference",
        "unknown_output_field",
    } <= set(CODES)
