"""Schemas that refer back to themselves through ``anyOf``/``oneOf`` (which servers send, and
which JSON Schema allows): validation reads them without recursing for ever (``plan/schema.py``
was a RecursionError traceback), and a looping alternative admits nothing the others do not."""

from __future__ import annotations

from typing import Any

from planrail.plan.tools import ToolSpec
from planrail.plan.validate import validate


def _looping(alternative: dict[str, Any], key: str = "anyOf") -> dict[str, Any]:
    return {
        "type": "object",
        "$defs": {"a": {key: [{"$ref": "#/$defs/a"}, alternative]}},
        "properties": {"d": {"$ref": "#/$defs/a"}},
    }


SHAPE = {"type": "object", "properties": {"x": {"type": "string"}}}
TOOLS = [
    ToolSpec("make", output_schema=_looping(SHAPE), side_effects="none"),
    ToolSpec("take", input_schema=_looping({"type": "string"}, "oneOf"), side_effects="none"),
]


def _codes(steps: list[dict[str, Any]]) -> list[tuple[str, str]]:
    report = validate({"goal": "g", "steps": steps}, TOOLS)
    return [(i.code, i.path) for i in report.errors]


def test_a_literal_is_checked_against_the_alternatives_that_do_not_loop() -> None:
    assert _codes([{"id": "t", "tool": "take", "args": {"d": "text"}}]) == []
    assert _codes([{"id": "t", "tool": "take", "args": {"d": 5}}]) == [
        ("type_mismatch", "$.steps[0].args.d")
    ]


def test_a_reference_into_a_looping_output_schema_is_checked_against_its_fields() -> None:
    make = {"id": "m", "tool": "make", "args": {}}
    ok = {"id": "t", "tool": "take", "args": {"d": "${m.d.x}"}, "depends_on": ["m"]}
    assert _codes([make, ok]) == []
    bad = {**ok, "args": {"d": "${m.d.y}"}}
    report = validate({"goal": "g", "steps": [make, bad]}, TOOLS)
    (issue,) = report.errors
    assert "declared fields: x" in issue.message
