"""Loading: format sniffing, limits, and alias normalisation (never silent)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from planrail.plan.loader import PlanLimits, _normalized_step, load_document, normalize
from planrail.plan.validate import validate


def test_format_is_sniffed_or_given() -> None:
    """Text starting with ``{`` or ``[`` is JSON, anything else YAML; ``fmt`` overrides."""
    assert load_document('{"a": 1}') == {"a": 1}
    assert load_document("a: 1") == {"a": 1}
    assert load_document('{"a": 1}', fmt="yaml") == {"a": 1}


def test_plan_limits_defaults() -> None:
    """The documented defaults of PlanLimits."""
    limits = PlanLimits()
    assert limits.max_plan_bytes == 4 * 1024 * 1024
    assert limits.max_steps == 10_000
    assert limits.max_depth == 64
    assert limits.max_nodes == 2_000_000
    assert limits.max_string_length == 256 * 1024
    assert limits.max_dependencies == 1_000


@pytest.mark.parametrize(
    ("alias", "canonical"),
    [("call_tool", "tool_call"), ("use_tool", "tool_call"), ("execute_function", "tool_call"),
     ("function_call", "tool_call"), ("Tool-Call", "tool_call"), ("llm", "llm_call"),
     ("condition", "condition_check"), ("check condition", "condition_check")],
)  # fmt: skip
def test_action_aliases_are_normalised_with_a_note(alias: str, canonical: str) -> None:
    """Common LLM spellings of an action are rewritten, and each rewrite is noted."""
    data, notes = normalize({"steps": [{"id": "a", "action": alias}]})
    assert data["steps"][0]["action"] == canonical
    assert notes == [("a", "$.steps[0].action", f"action '{alias}' read as '{canonical}'")]


@pytest.mark.parametrize(
    ("alias", "canonical"),
    [("step_id", "id"), ("dependencies", "depends_on"), ("dependsOn", "depends_on"),
     ("arguments", "args"), ("parameters", "args"), ("tool_name", "tool"), ("type", "action")],
)  # fmt: skip
def test_field_aliases_are_normalised_with_a_note(alias: str, canonical: str) -> None:
    """Field aliases move to the canonical field name, with a note."""
    value: Any = (
        "tool_call" if canonical == "action" else ["b"] if canonical == "depends_on" else "x"
    )
    data, notes = normalize({"steps": [{alias: value}]})
    assert data["steps"][0] == {canonical: value}
    assert notes[0][2] == f"'{alias}' read as '{canonical}'"


def test_an_alias_never_overwrites_the_canonical_field() -> None:
    """When both spellings are present the canonical one wins and the alias is left alone."""
    data, notes = normalize({"steps": [{"id": "a", "args": {"x": 1}, "params": {"y": 2}}]})
    assert data["steps"][0]["args"] == {"x": 1}
    assert notes == []
    assert validate(data).errors[0].code == "schema_error"  # 'params' is then unknown


def test_small_shape_repairs_are_all_noted() -> None:
    """A single dependency string becomes a list; null args/depends_on become empty: all noted."""
    data, notes = normalize(
        {"steps": [{"id": "a", "depends_on": "b", "args": None}, {"id": "b", "depends_on": None}]}
    )
    assert data["steps"][0] == {"id": "a", "depends_on": ["b"], "args": {}}
    assert data["steps"][1] == {"id": "b", "depends_on": []}
    assert [n[2] for n in notes] == [
        "a single dependency read as a list",
        "null args read as {}",
        "null depends_on read as []",
    ]


def test_action_is_inferred_from_prompt_or_condition() -> None:
    """A step with a prompt and no tool is an llm_call; with a condition, a condition_check."""
    data, _ = normalize({"steps": [{"id": "a", "prompt": "p"}, {"id": "b", "condition": {}}]})
    assert [s["action"] for s in data["steps"]] == ["llm_call", "condition_check"]


def test_normalize_does_not_modify_its_input() -> None:
    """The caller's document is left untouched."""
    original = {"steps": [{"step_id": "a", "type": "llm"}]}
    normalize(original)
    assert original == {"steps": [{"step_id": "a", "type": "llm"}]}


_VARIANTS: list[dict[str, Any]] = [
    {"id": "a", "tool": "t", "args": {}, "depends_on": ["b"]},
    {"id": "a", "action": "llm_call", "prompt": "p"},
    {"id": "a", "action": "call_tool", "tool": "t"},
    {"id": "a", "action": "teleport"},
    {"id": "a", "prompt": "p"},
    {"id": "a", "condition": {}},
    {"id": "a", "tool": "t", "prompt": "p"},
    {"id": "a", "depends_on": "b"},
    {"id": "a", "depends_on": None},
    {"id": "a", "args": None},
    {"step_id": "a"},
    {"id": "a", "params": {"x": 1}},
    {"id": "a", "args": {}, "params": {"x": 1}},
    {"id": "a", "type": 3},
]


@pytest.mark.parametrize("raw", _VARIANTS, ids=str)
def test_only_a_step_that_needs_a_change_is_copied(raw: dict[str, Any]) -> None:
    """Every step comes out as a copy rewritten would (the same notes too), but only one that
    needs a change is a copy (issue 21: no second copy of every step of a big plan while it
    is validated); the input is never modified."""
    before = copy.deepcopy(raw)
    expected_notes: list[tuple[str | None, str, str]] = []
    expected = _normalized_step(0, copy.deepcopy(raw), expected_notes)
    data, notes = normalize({"steps": [raw]})
    (out,) = data["steps"]
    assert raw == before
    assert out == expected
    assert notes == expected_notes
    if expected != raw:
        assert out is not raw


def test_canonical_steps_are_not_copied() -> None:
    steps = [_VARIANTS[0], _VARIANTS[1], {"id": "c", "tool": "t", "prompt": "p"}]
    data, notes = normalize({"goal": "g", "steps": steps})
    assert notes == []
    assert all(out is raw for out, raw in zip(data["steps"], steps, strict=True))


def test_unknown_actions_are_left_for_the_validator() -> None:
    """An action that is no known alias stays as written and becomes invalid_action."""
    data, notes = normalize({"steps": [{"id": "a", "action": "teleport"}]})
    assert data["steps"][0]["action"] == "teleport"
    assert notes == []
