"""The lints: ``side_effect_race`` and ``needless_dependency``, their levels and real counts."""

from __future__ import annotations

from typing import Any

import pytest

from planrail.plan.lints import MAX_RACES_SHOWN, critical_path
from planrail.plan.tools import ToolRegistry, ToolSpec
from planrail.plan.validate import LINT_CODES, ValidationOptions, check_plan, validate

from .helpers import DATA, TASKBENCH, load_script

DOCS = DATA.parent.parent / "docs" / "plan-format.md"

TOOLS = ToolRegistry(
    [
        ToolSpec(name="invite_user", resource="slack", side_effects="keyed"),
        ToolSpec(name="send_message", resource="slack"),
        ToolSpec(name="charge"),
        ToolSpec(name="refund"),
        ToolSpec(
            name="lookup",
            output_schema={"type": "object", "properties": {"id": {"type": "string"}}},
            side_effects="none",
        ),
    ]
)


def _issues(plan: dict[str, Any], code: str, **lints: Any) -> list[tuple[str | None, str]]:
    report = check_plan(plan, TOOLS, options=ValidationOptions(lints=lints))
    return [(i.step, i.path) for i in (*report.errors, *report.warnings) if i.code == code]


def _step(sid: str, tool: str, *deps: str, **extra: Any) -> dict[str, Any]:
    return {"id": sid, "tool": tool, "depends_on": list(deps), **extra}


def test_invite_and_message_on_one_resource_race() -> None:
    """The benchmark case: invite then message carry no data, but share the resource
    'slack'; with no path between them the lint says so and suggests the ordering edge."""
    plan = {"steps": [_step("invite", "invite_user"), _step("message", "send_message")]}
    report = validate(plan, TOOLS)
    (issue,) = [w for w in report.warnings if w.code == "side_effect_race"]
    assert (issue.step, issue.path) == ("message", "$.steps[1].depends_on")
    assert "resource 'slack'" in issue.message
    assert "add 'invite' to the depends_on of 'message' (a pure ordering edge)" in issue.message


def test_the_ordering_edge_fixes_it_and_is_not_needless() -> None:
    """With ``depends_on: [invite]`` neither lint fires: the edge orders two side effects."""
    plan = {"steps": [_step("invite", "invite_user"), _step("message", "send_message", "invite")]}
    assert validate(plan, TOOLS).warnings == []


@pytest.mark.parametrize(
    ("steps", "races"),
    [
        ([_step("a", "charge"), _step("b", "charge")], 1),  # the same tool, no resource
        ([_step("a", "charge"), _step("b", "refund")], 0),  # different things
        ([_step("a", "charge", resource="stripe"), _step("b", "refund", resource="stripe")], 1),
        ([_step("a", "charge"), _step("x", "lookup", "a"), _step("b", "charge", "x")], 0),
        ([_step("a", "lookup"), _step("b", "lookup")], 0),  # read-only never races
        ([_step("a", "charge"), _step("b", "charge"), _step("c", "charge")], 2),
    ],
)
def test_which_pairs_race(steps: list[dict[str, Any]], races: int) -> None:
    """Same tool or same resource (a step's own resource too), no path: a race; a path
    through any step orders them; read-only tools never race."""
    assert len(_issues({"steps": steps}, "side_effect_race")) == races


def test_many_races_on_one_resource_are_summed_up() -> None:
    """Past MAX_RACES_SHOWN pairs per resource, one more issue counts the rest."""
    steps = [_step(f"s{i}", "charge") for i in range(MAX_RACES_SHOWN + 6)]
    report = validate({"steps": steps}, TOOLS)
    races = [w for w in report.warnings if w.code == "side_effect_race"]
    assert len(races) == MAX_RACES_SHOWN + 1
    assert races[-1].message.startswith("5 more pairs of steps that change tool 'charge'")


def test_an_edge_without_data_or_side_effects_is_needless() -> None:
    """Two read-only lookups, the second waiting for the first for nothing: the edge is
    reported with the fix and the critical path it costs."""
    plan = {"steps": [_step("a", "lookup"), _step("b", "lookup", "a", args={"q": "b"})]}
    report = validate(plan, TOOLS)
    (issue,) = report.warnings
    assert (issue.code, issue.path) == ("needless_dependency", "$.steps[1].depends_on[0]")
    assert "reference it (such as ${a.id}); otherwise remove 'a' from depends_on" in issue.message
    assert "critical path: 2 steps with the plan's 1 needless edge(s), 1 without" in issue.message


@pytest.mark.parametrize(
    "steps",
    [
        [_step("a", "lookup"), _step("b", "lookup", "a", args={"q": "${a.id}"})],  # data
        [_step("a", "charge"), _step("b", "lookup", "a")],  # read after a write
        [_step("a", "lookup"), _step("b", "lookup", "a"), _step("c", "charge", "b")],  # read
        [_step("w", "charge"), _step("a", "lookup", "w"), _step("b", "lookup", "a")],  # ...
        [_step("a", "lookup"), _step("b", "lookup", "a", join="all_finished")],  # a join rule
        [_step("a", "nope"), _step("b", "lookup", "a")],  # an unknown tool may change things
    ],
)
def test_edges_that_carry_data_or_order_effects_are_not_needless(
    steps: list[dict[str, Any]],
) -> None:
    """Data, a side effect before or after through the edge, a join rule, an unknown tool:
    none is a needless dependency."""
    assert _issues({"steps": steps}, "needless_dependency") == []


@pytest.mark.parametrize("code", ["side_effect_race", "needless_dependency"])
def test_each_lint_can_be_turned_up_or_off(code: str) -> None:
    """``lints={code: "error"}`` makes it an error; ``"off"`` silences it."""
    plan = {
        "steps": [_step("a", "charge"), _step("b", "charge"), _step("c", "lookup"),
                  _step("d", "lookup", "c")]
    }  # fmt: skip
    up = check_plan(plan, TOOLS, options=ValidationOptions(lints={code: "error"}))
    assert [e.code for e in up.errors] == [code]
    off = check_plan(plan, TOOLS, options=ValidationOptions(lints={code: "off"}))
    assert code not in {w.code for w in off.warnings}


def test_lints_need_tools_and_an_acyclic_graph() -> None:
    """Without a registry side effects are unknown; with a cycle there is no order: no lint."""
    plan = {"steps": [_step("a", "charge"), _step("b", "charge")]}
    assert {w.code for w in validate(plan).warnings}.isdisjoint(LINT_CODES)
    cyclic = {"steps": [_step("a", "lookup", "b"), _step("b", "lookup", "a")]}
    assert _issues(cyclic, "needless_dependency") == []


def test_critical_path_counts_steps_on_the_longest_chain() -> None:
    """A diamond a -> (b, c) -> d has a critical path of 3 steps."""
    assert critical_path({"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"]}) == 3
    assert critical_path({}) == 0


def test_the_real_plan_counts_in_the_docs_are_current() -> None:
    """docs/plan-format.md shows both lints' counts on the 984 TaskBench plans."""
    summary = load_script(TASKBENCH / "confusion.py", "taskbench_confusion").lint_summary()
    assert summary in DOCS.read_text(encoding="utf-8")
