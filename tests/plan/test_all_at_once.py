"""Every problem at once: a malformed field never hides a step's other problems.

The property: inject independent mistakes into a valid plan; every one is reported, and fixing
any of them never reveals an error that was not reported already.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planrail.plan.tools import ToolRegistry, ToolSpec
from planrail.plan.validate import validate

TOOLS = ToolRegistry(
    [
        ToolSpec(
            name="make",
            input_schema={
                "type": "object",
                "properties": {"n": {"type": "integer"}, "label": {"type": "string"}},
                "required": ["n"],
            },
            output_schema={
                "type": "object",
                "properties": {"value": {"type": "integer"}, "text": {"type": "string"}},
            },
            side_effects="none",
        )
    ]
)


def base_plan(k: int) -> dict[str, Any]:
    """A valid chain of ``k`` steps, each using the previous one's ``value``."""
    steps: list[dict[str, Any]] = []
    for i in range(k):
        step: dict[str, Any] = {
            "id": f"s{i}",
            "tool": "make",
            "args": {"n": 1 if i == 0 else f"${{s{i - 1}.value}}", "label": "x"},
            "retry": {"max_attempts": 2},
            "timeout": 5,
            "when": True,
        }
        if i:
            step["depends_on"] = [f"s{i - 1}"]
        steps.append(step)
    return {"goal": "a chain", "steps": steps}


Step = dict[str, Any]
# A mutation breaks one field of one step and returns the (code, path suffix) it must cause.
Mutation = Callable[[Step, int], tuple[str, str]]


def _set(key: str, value: Any, code: str, suffix: str) -> Mutation:
    def apply(step: Step, i: int) -> tuple[str, str]:
        step[key] = value
        return code, suffix

    return apply


def _ghost(step: Step, i: int) -> tuple[str, str]:
    deps = step.setdefault("depends_on", [])
    deps.append("ghost")
    return "unknown_dependency", f".depends_on[{len(deps) - 1}]"


def _drop_edge(step: Step, i: int) -> tuple[str, str]:
    step["depends_on"] = []
    return "undeclared_dependency", ".args.n"


def _bad_ref(step: Step, i: int) -> tuple[str, str]:
    step["args"]["n"] = "${s0.__class__}"
    return "invalid_reference", ".args.n"


def _missing(step: Step, i: int) -> tuple[str, str]:
    del step["args"]["n"]
    return "missing_argument", ".args.n"


def _arg(key: str, value: Any, code: str) -> Mutation:
    def apply(step: Step, i: int) -> tuple[str, str]:
        step["args"][key] = value
        return code, f".args.{key}"

    return apply


# Slots are fields a mutation owns; two mutations never share a slot. An unknown tool owns the
# argument slots too: which arguments a tool that does not exist takes cannot be known.
SLOTS: dict[str, list[Mutation]] = {
    "action": [_set("action", "teleport", "invalid_action", ".action")],
    "retry": [_set("retry", {"max_attempts": 0}, "invalid_policy", ".retry.max_attempts")],
    "timeout": [_set("timeout", -1, "invalid_policy", ".timeout")],
    "extra": [_set("colour", "red", "schema_error", ".colour")],
    "when": [_set("when", {"zz": 1}, "invalid_predicate", ".when")],
    "tool": [_set("tool", "mkae", "unknown_tool", ".tool")],
    "label": [_arg("label", 2.5, "type_mismatch")],
    "argx": [_arg("nn", 1, "unknown_argument")],
    "edge": [
        _ghost,
        _set("depends_on", 5, "schema_error", ".depends_on"),
        _missing,
        _drop_edge,
        _bad_ref,
    ],
}
FIRST_STEP_EDGE = 3  # the first step has no reference: only ghost, bad type, missing apply


@st.composite
def mutated(draw: st.DrawFn) -> tuple[int, list[tuple[int, str, int]]]:
    """A plan size and (step, slot, variant) mutations, at most one per slot of a step."""
    k = draw(st.integers(2, 5))
    chosen: list[tuple[int, str, int]] = []
    for i in range(k):
        slots = draw(st.sets(st.sampled_from(sorted(SLOTS)), max_size=5))
        if "tool" in slots:
            slots -= {"label", "argx", "edge"}
        for slot in sorted(slots):
            n = FIRST_STEP_EDGE if slot == "edge" and i == 0 else len(SLOTS[slot])
            chosen.append((i, slot, draw(st.integers(0, n - 1))))
    if draw(st.booleans()):  # a bad id, on the last step (no other step names it)
        chosen.append((k - 1, "id", 0))
    return k, chosen


def apply(k: int, mutations: list[tuple[int, str, int]]) -> tuple[dict[str, Any], set[Any]]:
    """The base plan with ``mutations`` applied, and the (code, path) each must cause."""
    plan = copy.deepcopy(base_plan(k))
    expected = set()
    for i, slot, variant in mutations:
        step = plan["steps"][i]
        if slot == "id":
            step["id"] = f"bad id {i}"
            code, suffix = "invalid_id", ".id"
        else:
            code, suffix = SLOTS[slot][variant](step, i)
        expected.add((code, f"$.steps[{i}]{suffix}"))
    return plan, expected


def errors(plan: dict[str, Any]) -> set[tuple[str, str]]:
    return {(e.code, e.path) for e in validate(plan, TOOLS).errors}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=mutated(), data=st.data())
def test_fixing_reported_errors_never_reveals_one_that_was_there(
    case: tuple[int, list[tuple[int, str, int]]], data: st.DataObject
) -> None:
    """Each injected mistake is reported in the one run; undoing any subset of them yields
    only errors that the full run already reported."""
    k, mutations = case
    plan, expected = apply(k, mutations)
    reported = errors(plan)
    assert expected <= reported
    fixed = data.draw(st.sets(st.sampled_from(range(len(mutations))))) if mutations else set()
    rest = [m for j, m in enumerate(mutations) if j not in fixed]
    partly_fixed, _ = apply(k, rest)
    assert errors(partly_fixed) <= reported


def test_the_issue_example_is_reported_in_one_run() -> None:
    """The case from the issue: a step with a bad id, a bad policy and an unknown field still
    gets its unknown tool, ``__class__`` reference, unknown step reference, two bad predicates
    and unknown dependency reported in the same run."""
    plan = {
        "steps": [
            {"id": "s0", "tool": "make", "args": {"n": 1}},
            {
                "id": "bad id",
                "tool": "mkae",
                "colour": "red",
                "retry": {"max_attempts": 0},
                "args": {"n": "${s0.__class__}", "label": "${nope.text}"},
                "when": {"zz": 1},
                "condition": {"all": []},
                "action": "condition_check",
                "depends_on": ["s0", "ghost"],
            },
        ]
    }
    found = {e.code for e in validate(plan, TOOLS).errors}
    assert found >= {
        "invalid_id",
        "schema_error",
        "invalid_policy",
        "invalid_reference",
        "unknown_step_reference",
        "invalid_predicate",
        "unknown_dependency",
    }
    plan["steps"][1]["action"] = "tool_call"
    del plan["steps"][1]["condition"]
    assert "unknown_tool" in {e.code for e in validate(plan, TOOLS).errors}


def test_a_repeated_id_is_still_checked() -> None:
    """The second step with an id gets ``duplicate_id`` and its own problems too."""
    plan = {
        "steps": [
            {"id": "a", "tool": "make", "args": {"n": 1}},
            {"id": "a", "tool": "make", "args": {"n": 2.5}},
        ]
    }
    found = {(e.code, e.path) for e in validate(plan, TOOLS).errors}
    assert found == {("duplicate_id", "$.steps[1].id"), ("type_mismatch", "$.steps[1].args.n")}
