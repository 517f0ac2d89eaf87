"""Exact literal types, fallback values, predicate operands and guards, and the call-time rule."""

from __future__ import annotations

from typing import Any

import pytest

import planrail
from planrail.errors import ArgumentError
from planrail.plan.tools import ToolRegistry, ToolSpec
from planrail.plan.validate import validate

COUNT = {"type": "object", "properties": {"count": {"type": "integer"}, "name": {"type": "string"},
         "ok": {"type": "boolean"}, "tags": {"type": "array"}}}  # fmt: skip
TOOLS = ToolRegistry(
    [
        ToolSpec(
            name="page",
            input_schema={
                "type": "object",
                "properties": {
                    "size": {"type": "integer"},
                    "ratio": {"type": "number"},
                    "flag": {"type": "boolean"},
                    "either": {"type": ["integer", "string"]},
                },
            },
            output_schema=COUNT,
            side_effects="none",
        )
    ]
)


def _errors(plan: dict[str, Any]) -> list[tuple[str, str]]:
    return [(e.code, e.path) for e in validate(plan, TOOLS).errors]


def _one(args: dict[str, Any]) -> list[tuple[str, str]]:
    return _errors({"steps": [{"id": "a", "tool": "page", "args": args}]})


@pytest.mark.parametrize(
    ("args", "bad"),
    [
        ({"size": 2.5}, "size"),
        ({"size": "5"}, "size"),
        ({"size": True}, "size"),
        ({"ratio": "0.5"}, "ratio"),
        ({"flag": 1}, "flag"),
        ({"flag": "true"}, "flag"),
    ],
)
def test_a_literal_of_another_json_type_is_a_type_mismatch(args: dict[str, Any], bad: str) -> None:
    """2.5 is not an integer, "5" not a number, true not 1: literals are never converted."""
    assert _one(args) == [("type_mismatch", f"$.steps[0].args.{bad}")]


@pytest.mark.parametrize(
    "args", [{"size": 2}, {"size": 2.0}, {"ratio": 3}, {"either": "5"}, {"either": 5}]
)
def test_literals_json_schema_accepts_are_accepted(args: dict[str, Any]) -> None:
    """2.0 is an integer and 3 a number (as JSON Schema says); a schema may accept strings."""
    assert _one(args) == []


def test_the_message_shows_the_literal() -> None:
    """The message names the value and both types."""
    report = validate({"steps": [{"id": "a", "tool": "page", "args": {"size": 2.5}}]}, TOOLS)
    assert "the value 2.5 is number but the parameter expects integer" in report.errors[0].message


def test_a_referenced_number_may_still_feed_an_integer() -> None:
    """A reference is judged by its declared type: a declared number may hold an integer."""
    tools = ToolRegistry(
        [
            *TOOLS,
            ToolSpec(name="ratio", output_schema={"type": "number"}, side_effects="none"),
        ]
    )
    plan = {
        "steps": [
            {"id": "r", "tool": "ratio"},
            {"id": "a", "tool": "page", "args": {"size": "${r}"}, "depends_on": ["r"]},
        ]
    }
    assert validate(plan, tools).errors == []


def test_a_fallback_value_must_fit_the_output_schema() -> None:
    """``fallback.value`` stands in for the output: checked against the output schema."""
    plan = {
        "steps": [
            {"id": "a", "tool": "page", "fallback": {"value": {"count": "none", "name": "x"}}},
            {"id": "b", "tool": "page", "fallback": {"value": {"count": 0}}},
        ]
    }
    assert _errors(plan) == [("type_mismatch", "$.steps[0].fallback.value.count")]


def test_a_fan_out_fallback_value_stands_in_for_one_item() -> None:
    """Inside ``for_each`` the fallback replaces one item's output, not the list."""
    plan = {
        "steps": [
            {"id": "a", "tool": "page"},
            {
                "id": "b",
                "tool": "page",
                "for_each": "${a.tags}",
                "depends_on": ["a"],
                "fallback": {"value": {"count": 0}},
            },
        ]
    }
    assert _errors(plan) == []


@pytest.mark.parametrize(
    ("predicate", "where"),
    [
        ("${a.count}", ""),
        ({"not": "${a.name}"}, ".not"),
        ({"gt": ["${a.name}", 3]}, ".gt"),
        ({"lt": ["${a.count}", "ten"]}, ".lt"),
        ({"all": [True, {"in": ["x", "${a.count}"]}]}, ".all[1].in"),
        ({"in": ["${a.count}", "${a.name}"]}, ".in"),
    ],
)
def test_predicate_operands_that_can_never_work_are_type_mismatches(
    predicate: Any, where: str
) -> None:
    """A guard that is not a boolean, an ordering of a string and a number, ``in`` on a
    number or a non-string in a string: reported from the referenced output schemas."""
    plan = {
        "steps": [
            {"id": "a", "tool": "page"},
            {"id": "b", "tool": "page", "when": predicate, "depends_on": ["a"]},
        ]
    }
    assert _errors(plan) == [("type_mismatch", f"$.steps[1].when{where}")]


@pytest.mark.parametrize(
    "predicate",
    ["${a.ok}", {"gt": ["${a.count}", 3]}, {"in": ["x", "${a.tags}"]}, {"eq": ["${a.name}", 1]}],
)
def test_well_typed_predicates_pass(predicate: Any) -> None:
    """Booleans, numbers against numbers, membership in a list, equality of anything."""
    plan = {
        "steps": [
            {"id": "a", "tool": "page"},
            {"id": "b", "tool": "page", "when": predicate, "depends_on": ["a"]},
        ]
    }
    assert _errors(plan) == []


def test_a_condition_check_is_checked_like_a_guard() -> None:
    """``condition`` of a condition_check step gets the same operand checks."""
    plan = {
        "steps": [
            {"id": "a", "tool": "page"},
            {"id": "c", "condition": {"ge": ["${a.name}", 1]}, "depends_on": ["a"]},
        ]
    }
    assert _errors(plan) == [("type_mismatch", "$.steps[1].condition.ge")]


@planrail.tool(side_effects="none")
def paged(size: int) -> int:
    """A Python tool with an integer parameter."""
    return size


def test_call_time_validation_is_pydantic_lax_mode() -> None:
    """The documented rule at call time: 2.5 is refused for an int, as statically; Pydantic's
    lax mode converts "5" to 5 there (the validator still refuses the literal "5")."""
    with pytest.raises(ArgumentError):
        paged.call_kwargs({"size": 2.5}, None)
    assert paged.call_kwargs({"size": "5"}, None) == {"size": 5}
    assert paged.call_kwargs({"size": 2.0}, None) == {"size": 2}
    plan = {"steps": [{"id": "a", "tool": "paged", "args": {"size": "5"}}]}
    assert [e.code for e in validate(plan, [paged]).errors] == ["type_mismatch"]
