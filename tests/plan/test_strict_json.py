"""Strict reading: duplicate keys are errors with a path; every normalisation warns."""

from __future__ import annotations

import pytest

from planrail.errors import PlanLoadError
from planrail.plan.loader import DuplicateKeyError, load_document
from planrail.plan.tools import ToolRegistry, ToolSpec
from planrail.plan.validate import validate

TOOLS = ToolRegistry(
    [
        ToolSpec(
            name="fetch",
            input_schema={"type": "object", "properties": {"url": {"type": "string"}}},
            output_schema={"type": "object"},
            side_effects="none",
        )
    ]
)

JSON_TWICE = (
    '{"steps": [{"id": "a", "tool": "fetch", "args": {"url": "https://one"},'
    ' "args": {"url": "https://two"}}]}'
)


def test_a_json_key_written_twice_is_an_error_at_its_path() -> None:
    """``"args"`` twice in one step: ``duplicate_key`` at ``$.steps[0].args``."""
    report = validate(JSON_TWICE, TOOLS)
    assert [(e.code, e.path) for e in report.errors] == [("duplicate_key", "$.steps[0].args")]
    assert "appears twice" in report.errors[0].message


def test_every_duplicate_is_reported_and_the_rest_still_checked() -> None:
    """Two repeated keys give two issues, and the plan's other problems are reported too."""
    text = (
        '{"goal": "g", "goal": "h", "steps": [{"id": "a", "tool": "nope",'
        ' "args": {"url": "x", "url": "y"}}]}'
    )
    found = {(e.code, e.path) for e in validate(text, TOOLS).errors}
    assert found == {
        ("duplicate_key", "$.goal"),
        ("duplicate_key", "$.steps[0].args.url"),
        ("unknown_tool", "$.steps[0].tool"),
    }


def test_a_yaml_key_written_twice_is_an_error_with_its_line() -> None:
    """YAML too: the path and the line of the second occurrence."""
    text = "steps:\n  - id: a\n    tool: fetch\n    args: {url: 'https://one'}\n    tool: fetch\n"
    report = validate(text, TOOLS)
    assert [(e.code, e.path) for e in report.errors] == [("duplicate_key", "$.steps[0].tool")]
    assert "line 5" in report.errors[0].message


def test_yaml_merge_keys_may_be_overridden() -> None:
    """``<<: *base`` followed by a key it brings in is an override, not a repeat."""
    text = (
        "defaults: &d {tool: fetch, args: {url: 'https://one'}}\n"
        "steps:\n  - <<: *d\n    id: a\n    tool: fetch\n"
    )
    data = load_document(text)
    assert data["steps"][0]["tool"] == "fetch"


def test_load_document_raises_for_a_duplicate_without_a_list() -> None:
    """Outside the validator, a repeated key is a :class:`DuplicateKeyError` naming the path."""
    with pytest.raises(DuplicateKeyError, match=r"\$\.steps\[0\]\.args") as info:
        load_document(JSON_TWICE)
    assert isinstance(info.value, PlanLoadError)
    assert info.value.code == "duplicate_key"


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("args", None, "null args read as {}"),
        ("depends_on", None, "null depends_on read as []"),
        ("timeout", "5", "'5' (string) read as a number; write a number"),
        ("requires_approval", 1, "1 (integer) read as a boolean; write a boolean"),
        ("retry", {"max_attempts": "3"}, "'3' (string) read as an integer; write an integer"),
    ],
)
def test_every_silent_normalisation_warns(field: str, value: object, message: str) -> None:
    """``null`` args/depends_on and policy scalars Pydantic converts all get ``normalized``."""
    step = {"id": "a", "tool": "fetch", "args": {"url": "u"}, field: value}
    report = validate({"steps": [step]}, TOOLS)
    assert report.valid
    assert [(w.code, w.message) for w in report.warnings if w.code == "normalized"] == [
        ("normalized", message)
    ]


def test_a_field_into_an_object_of_unknown_shape_warns_unchecked_reference() -> None:
    """``-> dict`` (an object schema without properties): references into it are not
    checked, and an ``unchecked_reference`` warning says so once per producer."""
    plan = {
        "steps": [
            {"id": "a", "tool": "fetch", "args": {"url": "u"}},
            {"id": "b", "tool": "fetch", "args": {"url": "${a.x}"}, "depends_on": ["a"]},
            {"id": "c", "tool": "fetch", "args": {"url": "${a.y}"}, "depends_on": ["a"]},
        ]
    }
    report = validate(plan, TOOLS)
    assert report.valid
    assert [(w.code, w.path) for w in report.warnings] == [
        ("unchecked_reference", "$.steps[1].args.url")
    ]


def test_a_repeated_key_that_is_no_identifier_is_quoted_in_its_path() -> None:
    """``"my key"`` twice, in JSON and in YAML: the path is ``$.steps[0].args['my key']``, the
    form every other issue uses (``$.steps[0].args.my key`` read as two things)."""
    text = (
        '{"steps": [{"id": "a", "tool": "fetch", "args": {"url": "x", "h x": {"my key": 1,'
        ' "my key": 2}}}]}'
    )
    paths = [e.path for e in validate(text, TOOLS).errors if e.code == "duplicate_key"]
    assert paths == ["$.steps[0].args['h x']['my key']"]
    yaml_text = (
        "steps:\n  - id: a\n    tool: fetch\n    args: {url: x, 'h x': {my key: 1, my key: 2}}\n"
    )
    paths = [e.path for e in validate(yaml_text, TOOLS).errors if e.code == "duplicate_key"]
    assert paths == ["$.steps[0].args['h x']['my key']"]


def test_repeats_are_reported_object_by_object_as_the_objects_open_in_the_text() -> None:
    """The outer object's repeat first (its keys are read before the objects inside it are
    walked), then each inner object's in the order they open."""
    found: list[tuple[str, str]] = []
    load_document(
        '{"steps": [{"id": "a", "id": "b"}, {"id": "c", "tool": "x", "tool": "y"}],'
        ' "goal": "g", "goal": "h"}',
        duplicates=found,
    )
    assert [path for path, _ in found] == ["$.goal", "$.steps[0].id", "$.steps[1].tool"]
