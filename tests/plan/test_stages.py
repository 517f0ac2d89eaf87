"""Stages in the plan format and the duplicate_call warning: shapes, codes and messages."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from planrail.plan import duplicates
from planrail.plan.stages import STAGE_CODES, stage_goals, stage_of
from planrail.plan.validate import CODES, validate


def staged(stages: Any, steps: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A three-step chain a -> b -> c (and an unstaged d) with the given stages."""
    return {
        "goal": "G",
        "steps": steps
        or [
            {"id": "a", "tool": "t", "args": {"n": 1}},
            {"id": "b", "tool": "t", "args": {"n": 2}, "depends_on": ["a"]},
            {"id": "c", "tool": "t", "args": {"n": 3}, "depends_on": ["b"]},
            {"id": "d", "tool": "t", "args": {"n": 4}},
        ],
        "stages": stages,
    }


def codes(plan: dict[str, Any]) -> list[tuple[str, str | None, str]]:
    return [(i.code, i.step, i.path) for i in validate(plan).errors]


def test_a_valid_staged_plan_keeps_its_stages_and_their_goals() -> None:
    """Stages in dependency order validate; the plan keeps them, unstaged steps are allowed,
    and each staged step maps to its stage's sub-goal."""
    report = validate(
        staged(
            [
                {"id": "collect", "goal": "Collect the data", "steps": ["a", "b"]},
                {"id": "report", "goal": "Report on it", "steps": ["c"], "confirm": True},
            ]
        )
    )
    assert report.valid, report.errors
    assert report.warnings == []
    plan = report.plan
    assert plan is not None
    assert [s.id for s in plan.stages] == ["collect", "report"]
    assert plan.stages[1].confirm is True
    assert stage_goals(plan) == {
        "a": "Collect the data",
        "b": "Collect the data",
        "c": "Report on it",
    }
    assert stage_of(plan)["c"].id == "report"


def test_a_plan_without_stages_hashes_as_before() -> None:
    """The optional field leaves the canonical JSON (and so every recorded hash) unchanged."""
    plan = validate({"steps": [{"id": "a", "tool": "t"}]}).plan
    assert plan is not None
    assert plan.canonical_json() == '{"steps":[{"id":"a","tool":"t"}]}'


def test_the_stage_codes_are_stable_codes() -> None:
    """Every code of the stages pass is one of the validator's stable codes."""
    assert set(STAGE_CODES) <= set(CODES)
    assert set(STAGE_CODES) == {
        "invalid_stage",
        "duplicate_stage",
        "unknown_stage_step",
        "duplicate_stage_step",
        "stage_order",
    }


@pytest.mark.parametrize(
    ("stages", "expected"),
    [
        ("research", [("invalid_stage", None, "$.stages")]),
        ([{"id": "s", "steps": ["a"]}], [("invalid_stage", None, "$.stages[0].goal")]),
        ([{"id": "s", "goal": "", "steps": []}], [("invalid_stage", None, "$.stages[0].goal")]),
        ([{"id": "my stage", "goal": "x"}], [("invalid_stage", None, "$.stages[0].id")]),
        ([{"id": "s", "goal": "x", "when": True}], [("invalid_stage", None, "$.stages[0].when")]),
        (
            [{"id": "s", "goal": "x", "steps": ["a"]}, {"id": "s", "goal": "y", "steps": ["b"]}],
            [("duplicate_stage", None, "$.stages[1].id")],
        ),
        (
            [{"id": "s", "goal": "x", "steps": ["a", "ghost"]}],
            [("unknown_stage_step", None, "$.stages[0].steps[1]")],
        ),
        (
            [{"id": "s", "goal": "x", "steps": ["a"]}, {"id": "t", "goal": "y", "steps": ["a"]}],
            [("duplicate_stage_step", "a", "$.stages[1].steps[0]")],
        ),
        (
            [{"id": "s", "goal": "x", "steps": ["a", "a"]}],
            [("duplicate_stage_step", "a", "$.stages[0].steps[1]")],
        ),
        (
            [
                {"id": "early", "goal": "x", "steps": ["b"]},
                {"id": "late", "goal": "y", "steps": ["a"]},
            ],
            [("stage_order", "b", "$.steps[1].depends_on")],
        ),
    ],
)
def test_each_stage_problem_has_its_code(stages: Any, expected: list[Any]) -> None:
    """Malformed stages, duplicate ids, unknown steps, a step in two stages and stages against
    the dependency order are each reported with their own code at the right path."""
    assert codes(staged(stages)) == expected


def test_stage_order_sees_through_unstaged_steps() -> None:
    """A step that needs a later stage's step only through an unstaged step still breaks the
    order, and the message names both stages and the step it needs."""
    steps = [
        {"id": "late_step", "tool": "t"},
        {"id": "middle", "tool": "t", "depends_on": ["late_step"]},
        {"id": "early_step", "tool": "t", "args": {"x": "${middle}"}, "depends_on": ["middle"]},
    ]
    plan = staged(
        [
            {"id": "first", "goal": "x", "steps": ["early_step"]},
            {"id": "second", "goal": "y", "steps": ["late_step"]},
        ],
        steps,
    )
    [issue] = validate(plan).errors
    assert issue.code == "stage_order"
    assert issue.message == (
        "step 'early_step' of stage 'first' needs 'late_step' of the later stage 'second';"
        " move one of them, or reorder the stages"
    )


def test_every_problem_is_reported_at_once() -> None:
    """One pass reports an unknown step, a duplicate and a malformed stage together."""
    plan = staged(
        [
            {"id": "s", "goal": "x", "steps": ["a", "zz"]},
            {"id": "t", "goal": "y", "steps": ["a"]},
            {"goal": "no id"},
        ]
    )
    assert {c for c, _, _ in codes(plan)} == {
        "unknown_stage_step",
        "duplicate_stage_step",
        "invalid_stage",
    }


def test_stage_warnings() -> None:
    """An empty stage and ``confirm`` on the first stage are warnings, not errors."""
    report = validate(
        staged(
            [
                {"id": "s", "goal": "x", "steps": ["a"], "confirm": True},
                {"id": "empty", "goal": "y"},
            ]
        )
    )
    assert report.valid
    assert [(w.code, w.path) for w in report.warnings] == [
        ("empty_stage", "$.stages[1].steps"),
        ("unused_policy", "$.stages[0].confirm"),
    ]


def test_stage_order_is_not_checked_on_a_cyclic_plan() -> None:
    """A cycle is reported once, by its own pass; the stage pass does not trip over it."""
    steps = [
        {"id": "a", "tool": "t", "depends_on": ["b"]},
        {"id": "b", "tool": "t", "depends_on": ["a"]},
    ]
    plan = staged([{"id": "s", "goal": "x", "steps": ["a"]}], steps)
    assert [c for c, _, _ in codes(plan)] == ["cycle"]


def test_duplicate_call_warns_on_the_same_tool_with_the_same_arguments() -> None:
    """Two steps calling one tool with identical arguments (keys in any order, references
    included) get a ``duplicate_call`` warning on the later step; different arguments, another
    tool or a for_each step do not."""
    plan = {
        "steps": [
            {"id": "a", "tool": "search", "args": {"q": "paris", "n": 3}},
            {"id": "b", "tool": "search", "args": {"n": 3, "q": "paris"}},
            {"id": "c", "tool": "search", "args": {"q": "rome", "n": 3}},
            {"id": "d", "tool": "fetch", "args": {"q": "paris", "n": 3}},
            {"id": "e", "tool": "fetch", "args": {"u": "${a.top}"}, "depends_on": ["a"]},
            {"id": "f", "tool": "fetch", "args": {"u": "${a.top}"}, "depends_on": ["a"]},
            {"id": "g", "tool": "fetch", "for_each": "${a.items}", "args": {"u": "${item}"},
             "depends_on": ["a"]},
            {"id": "h", "tool": "fetch", "for_each": "${a.items}", "args": {"u": "${item}"},
             "depends_on": ["a"]},
        ]
    }  # fmt: skip
    report = validate(plan)
    assert report.valid
    dupes = [(w.step, w.path, w.message) for w in report.warnings if w.code == "duplicate_call"]
    assert dupes == [
        (
            "b",
            "$.steps[1].args",
            "step 'b' calls 'search' with the same arguments as step 'a'; reference ${a}"
            " instead of calling it again",
        ),
        (
            "f",
            "$.steps[5].args",
            "step 'f' calls 'fetch' with the same arguments as step 'e'; reference ${e}"
            " instead of calling it again",
        ),
    ]


def test_duplicate_call_tells_apart_calls_whose_keys_share_a_hash(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The pass keeps the first step of each call by the hash of its key: with every key given
    the same hash it reports exactly what it reports with real hashes."""
    plan = {
        "steps": [
            {"id": "a", "tool": "search", "args": {"q": "paris", "n": 3}},
            {"id": "b", "tool": "search", "args": {"q": "rome", "n": [3]}},
            {"id": "c", "tool": "search", "args": {"n": 3, "q": "paris"}},
            {"id": "d", "tool": "search", "args": {"q": "rome", "n": [3]}},
            {"id": "e", "tool": "fetch", "args": {"q": "paris", "n": 3}},
            {"id": "f", "tool": "search", "args": {"q": "paris", "n": 3}},
        ]
    }

    def dupes() -> list[tuple[str | None, str]]:
        report = validate(copy.deepcopy(plan))
        return [(w.step, w.message) for w in report.warnings if w.code == "duplicate_call"]

    real = dupes()
    assert [(s, m.split("as step ")[1][:3]) for s, m in real] == [
        ("c", "'a'"),
        ("d", "'b'"),
        ("f", "'a'"),
    ]
    monkeypatch.setattr(duplicates, "hash", lambda _: 0, raising=False)
    assert dupes() == real
