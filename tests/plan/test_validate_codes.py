"""Every stable error code, each produced by a named miniature plan under tests/data/plans."""

from __future__ import annotations

import json

import pytest

from planrail.errors import PlanValidationError
from planrail.plan.model import Plan
from planrail.plan.tools import ToolRegistry
from planrail.plan.validate import CODES, Issue, load_plan, validate

from .helpers import PLANS, codes, warning_codes

# file → (code, step, path) of the one error it must produce
CASES: dict[str, tuple[str, str | None, str]] = {
    "parse_error.json": ("parse_error", None, "$"),
    "parse_error.yaml": ("parse_error", None, "$"),
    "schema_error.json": ("schema_error", "account", "$.steps[0].args"),
    "invalid_id.json": ("invalid_id", "my step", "$.steps[0].id"),
    "duplicate_id.json": ("duplicate_id", "page", "$.steps[1].id"),
    "unknown_dependency.json": ("unknown_dependency", "subscription", "$.steps[1].depends_on[0]"),
    "self_dependency.json": ("self_dependency", "page", "$.steps[0].depends_on[0]"),
    "cycle.yaml": ("cycle", "a", "$.steps[0].depends_on"),
    "invalid_reference.json": ("invalid_reference", "subscription", "$.steps[1].args.user_id"),
    "unknown_step_reference.json": (
        "unknown_step_reference",
        "subscription",
        "$.steps[1].args.user_id",
    ),
    "undeclared_dependency.json": (
        "undeclared_dependency",
        "subscription",
        "$.steps[1].args.user_id",
    ),
    "unknown_tool.json": ("unknown_tool", "account", "$.steps[0].tool"),
    "invalid_action.json": ("invalid_action", "page", "$.steps[0].action"),
    "missing_argument.json": ("missing_argument", "account", "$.steps[0].args.email"),
    "unknown_argument.json": ("unknown_argument", "account", "$.steps[0].args.emial"),
    "unknown_output_field.json": (
        "unknown_output_field",
        "subscription",
        "$.steps[1].args.user_id",
    ),
    "type_mismatch.json": ("type_mismatch", "welcome", "$.steps[2].args.subscription_id"),
    "limit_exceeded.yaml": ("limit_exceeded", None, "$"),
}

REQUIRED_CODES = {
    "parse_error", "schema_error", "invalid_id", "duplicate_id", "unknown_dependency",
    "self_dependency", "cycle", "invalid_reference", "unknown_step_reference",
    "undeclared_dependency", "unknown_tool", "invalid_action", "missing_argument",
    "unknown_argument", "unknown_output_field", "type_mismatch", "limit_exceeded",
}  # fmt: skip


def test_every_stable_code_has_a_miniature_plan() -> None:
    """The table below covers each of the 17 stable codes, and each is in ``CODES``."""
    assert {code for code, _, _ in CASES.values()} == REQUIRED_CODES
    assert set(CODES) >= REQUIRED_CODES


@pytest.mark.parametrize("name", sorted(CASES))
def test_miniature_plan_produces_exactly_its_code(name: str, catalog: ToolRegistry) -> None:
    """Each miniature plan yields exactly one error: its code, at the expected step and path."""
    report = validate(PLANS / name, catalog)
    code, step, path = CASES[name]
    assert not report.valid
    assert report.plan is None
    assert [(i.code, i.step, i.path) for i in report.errors] == [(code, step, path)]
    assert report.errors[0].message  # a message that says what is wrong


@pytest.mark.parametrize("name", sorted(CASES))
def test_issues_serialise_to_the_cli_json_shape(name: str, catalog: ToolRegistry) -> None:
    """``to_dict`` is the ``validate --json`` object: ``{valid, errors, warnings}`` of Issues."""
    data = validate(PLANS / name, catalog).to_dict()
    assert json.loads(json.dumps(data)) == data
    assert data["valid"] is False
    for issue in data["errors"]:
        assert set(issue) == {"code", "step", "path", "message"}


def test_plan_text_and_path_give_the_same_issues(catalog: ToolRegistry) -> None:
    """Validating a file's path, its text or its bytes reports the same issues."""
    for name in CASES:
        path = PLANS / name
        by_path = validate(path, catalog).errors
        assert validate(path.read_text(encoding="utf-8"), catalog).errors == by_path, name
        assert validate(path.read_bytes(), catalog).errors == by_path, name


def test_a_plan_with_several_problems_gets_all_of_them_in_one_run(catalog: ToolRegistry) -> None:
    """Seven different problems in one plan are all reported by a single ``validate`` call."""
    report = validate(PLANS / "many_problems.yaml", catalog)
    assert codes(report) == {
        "unknown_tool", "undeclared_dependency", "unknown_step_reference", "missing_argument",
        "self_dependency", "invalid_id", "cycle",
    }  # fmt: skip
    by_code = {i.code: i for i in report.errors}
    assert by_code["unknown_tool"].step == "account"
    assert by_code["undeclared_dependency"].step == "subscription"
    assert by_code["missing_argument"].path == "$.steps[2].args.subscription_id"
    assert by_code["self_dependency"].path == "$.steps[2].depends_on[2]"


def test_cycle_issue_names_every_member_in_edge_order(catalog: ToolRegistry) -> None:
    """A cycle is one issue naming its members along the edges; steps outside it are not named."""
    report = validate(PLANS / "cycle.yaml", catalog)
    (issue,) = report.errors
    assert issue.code == "cycle"
    assert "a, c, b" in issue.message
    assert "a -> c -> b -> a" in issue.message
    assert "d" not in issue.message.replace("depends_on", "").replace("dependencies", "")


def test_two_separate_cycles_are_two_issues() -> None:
    """Each strongly connected component is reported once, with its own members."""
    plan = {
        "steps": [
            {"id": "a", "tool": "t", "depends_on": ["b"]},
            {"id": "b", "tool": "t", "depends_on": ["a"]},
            {"id": "c", "tool": "t", "depends_on": ["d"]},
            {"id": "d", "tool": "t", "depends_on": ["e"]},
            {"id": "e", "tool": "t", "depends_on": ["c"]},
        ]
    }
    cycles = [i for i in validate(plan).errors if i.code == "cycle"]
    assert [i.step for i in cycles] == ["a", "c"]
    assert "a, b" in cycles[0].message
    assert "c, d, e" in cycles[1].message


def test_a_cycle_made_by_references_alone_is_a_cycle() -> None:
    """References count as edges: ``${b}`` in a and ``${a}`` in b is a cycle even undeclared."""
    plan = {
        "steps": [
            {"id": "a", "tool": "t", "args": {"x": "${b}"}},
            {"id": "b", "tool": "t", "args": {"x": "${a}"}},
        ]
    }
    assert codes(validate(plan)) == {"cycle", "undeclared_dependency"}


def test_valid_plans_in_yaml_and_json_validate_and_build_a_plan(catalog: ToolRegistry) -> None:
    """The onboarding example is valid in both formats and yields a frozen ``Plan``."""
    for name in ("onboarding.yaml", "onboarding.json"):
        report = validate(PLANS / name, catalog)
        assert report.valid, report.errors
        assert report.errors == report.warnings == []
        assert isinstance(report.plan, Plan)
        assert [s.id for s in report.plan.steps] == ["account", "subscription", "welcome"]
        assert report.raise_for_errors() is report.plan


def test_load_plan_raises_with_every_issue(catalog: ToolRegistry) -> None:
    """``load_plan`` raises ``PlanValidationError`` carrying all issues, not just the first."""
    with pytest.raises(PlanValidationError) as info:
        load_plan(PLANS / "many_problems.yaml", catalog)
    assert len(info.value.issues) == 7
    assert all(isinstance(i, Issue) for i in info.value.issues)
    assert "and 4 more" in str(info.value)


def test_without_tools_the_tool_passes_are_skipped() -> None:
    """No registry: unknown tools and argument problems are not reported (static shape only)."""
    for name in ("unknown_tool.json", "missing_argument.json", "type_mismatch.json"):
        assert validate(PLANS / name).valid, name


def test_check_tools_false_skips_the_tool_passes(catalog: ToolRegistry) -> None:
    """``check_tools=False`` ignores the registry for tool names, arguments and output fields."""
    assert validate(PLANS / "unknown_tool.json", catalog, check_tools=False).valid


# ---------------------------------------------------------------- warnings


def test_warnings_do_not_make_a_plan_invalid(catalog: ToolRegistry) -> None:
    """normalized, duplicate_dependency and unchecked_reference are warnings on a valid plan."""
    report = validate(PLANS / "warnings.yaml", catalog)
    assert report.valid, report.errors
    assert warning_codes(report) == {"normalized", "duplicate_dependency", "unchecked_reference"}
    normalized = [w.message for w in report.warnings if w.code == "normalized"]
    assert "'step_id' read as 'id'" in normalized
    assert "'arguments' read as 'args'" in normalized
    assert "action 'call_tool' read as 'tool_call'" in normalized
    assert report.plan is not None
    assert report.plan.steps[0].id == "page"


def test_empty_plan_is_valid_with_a_warning() -> None:
    """A plan with no steps is valid but warned about (``empty_plan``)."""
    report = validate(PLANS / "empty_plan.json")
    assert report.valid
    assert warning_codes(report) == {"empty_plan"}


def test_unchecked_reference_is_warned_once_per_producer(catalog: ToolRegistry) -> None:
    """Field references into a tool without an output schema warn once per producing step."""
    plan = {
        "steps": [
            {"id": "page", "tool": "fetch", "args": {"url": "u"}},
            {"id": "a", "tool": "fetch", "args": {"url": "${page.x}"}, "depends_on": ["page"]},
            {"id": "b", "tool": "fetch", "args": {"url": "${page.y}"}, "depends_on": ["page"]},
            {"id": "c", "tool": "fetch", "args": {"url": "${page}"}, "depends_on": ["page"]},
        ]
    }
    report = validate(plan, catalog)
    assert report.valid
    assert [w.code for w in report.warnings] == ["unchecked_reference"]


# ---------------------------------------------------------------- finer points of passes


@pytest.mark.parametrize(
    ("step", "code"),
    [
        ({"id": "s", "tool": "t", "retry": {"max_attempts": 0}}, "invalid_policy"),
        ({"id": "s", "tool": "t", "timeout": -1}, "invalid_policy"),
        ({"id": "s", "tool": "t", "bogus": 1}, "schema_error"),
        ({"id": "s"}, "schema_error"),
        ({"id": "s", "action": "llm_call"}, "schema_error"),
        ({"id": "s", "action": "llm_call", "prompt": "p", "tool": "t"}, "schema_error"),
        ({"id": "s", "action": "condition_check"}, "schema_error"),
        ({"id": 7, "tool": "t"}, "invalid_id"),
        ({"id": "x" * 65, "tool": "t"}, "invalid_id"),
        ({"id": "9lives", "tool": "t"}, "invalid_id"),
        ("not a step", "schema_error"),
    ],
)
def test_step_shape_errors(step: object, code: str) -> None:
    """Malformed steps get a shape code (policies get ``invalid_policy``) and nothing worse."""
    assert codes(validate({"steps": [step]})) == {code}


@pytest.mark.parametrize(
    ("plan", "code"),
    [
        ({"steps": "nope"}, "schema_error"),
        ({"goal": "g"}, "schema_error"),
        ({"steps": [], "goal": 3}, "schema_error"),
        ({"steps": [], "metadata": []}, "schema_error"),
        ({"steps": [], "extra": 1}, "schema_error"),
    ],
)
def test_plan_shape_errors(plan: dict[str, object], code: str) -> None:
    """The plan object itself is checked: steps list, goal string, metadata object, no extras."""
    assert codes(validate(plan)) == {code}


def test_references_in_the_output_mapping_are_checked(catalog: ToolRegistry) -> None:
    """``output`` may reference any step (no depends_on needed); unknown steps/fields are errors."""
    base = json.loads((PLANS / "onboarding.json").read_text(encoding="utf-8"))
    assert validate({**base, "output": {"u": "${welcome.sent}"}}, catalog).valid
    bad = {**base, "output": {"u": "${welcom.sent}", "v": "${account.nope}", "w": "${x."}}
    assert codes(validate(bad, catalog)) == {
        "unknown_step_reference",
        "unknown_output_field",
        "invalid_reference",
    }


@pytest.mark.parametrize(
    "field",
    [
        {"prompt": "Summarise ${page}"},
        {"when": {"equals": ["${page}", "x"]}},
        {"for_each": "${page}"},
        {"fallback": {"value": "${page}"}},
        {"repeat": {"until": {"equals": ["${page}", 1]}, "max_iterations": 3}},
    ],
)
def test_references_in_every_step_field_need_their_dependency(field: dict[str, object]) -> None:
    """Prompts, guards, fan-outs, fallbacks and repeat predicates are searched for references."""
    step: dict[str, object] = {"id": "use", "tool": "t", **field}
    if "prompt" in field:
        step = {"id": "use", "action": "llm_call", **field}
    plan = {"steps": [{"id": "page", "tool": "t"}, step]}
    assert codes(validate(plan)) == {"undeclared_dependency"}
    step["depends_on"] = ["page"]
    assert validate(plan).valid


def test_item_and_self_are_local_names_only_where_defined() -> None:
    """``${item}`` needs ``for_each``, ``${self}`` needs ``repeat``; elsewhere they are errors."""
    ok = {
        "steps": [
            {"id": "list", "tool": "t"},
            {"id": "each", "tool": "t", "for_each": "${list}", "args": {"x": "${item.name}"},
             "depends_on": ["list"]},
            {"id": "poll", "tool": "t", "repeat": {"until": {"eq": ["${self.done}", True]},
             "max_iterations": 5}},
        ]
    }  # fmt: skip
    assert validate(ok).valid
    bad = {"steps": [{"id": "s", "tool": "t", "args": {"x": "${item}", "y": "${self}"}}]}
    assert [i.code for i in validate(bad).errors] == ["invalid_reference"] * 2


def test_undeclared_dependency_is_reported_once_per_missing_edge() -> None:
    """Three references to the same undeclared step give one ``undeclared_dependency``."""
    plan = {
        "steps": [
            {"id": "a", "tool": "t"},
            {"id": "b", "tool": "t", "args": {"x": "${a.x}", "y": "${a.y}", "z": "n ${a}"}},
        ]
    }
    assert [i.code for i in validate(plan).errors] == ["undeclared_dependency"]


def test_pure_ordering_edges_are_allowed() -> None:
    """``depends_on`` may name a step whose output is never referenced (ordering only)."""
    plan = {"steps": [{"id": "invite", "tool": "t"}, {"id": "msg", "tool": "t",
                                                       "depends_on": ["invite"]}]}  # fmt: skip
    assert validate(plan).valid


def test_did_you_mean_hints_stay_linear_on_thousands_of_typos() -> None:
    """5,000 misspelt dependencies are all reported; hints are budgeted so this cannot hang."""
    steps = [{"id": f"step_{i}", "tool": "t", "depends_on": [f"stp_{i}x"]} for i in range(5000)]
    report = validate({"steps": steps})
    assert [i.code for i in report.errors] == ["unknown_dependency"] * 5000
    assert "did you mean 'step_0'?" in report.errors[0].message
    assert "did you mean" not in report.errors[-1].message  # budget spent


def test_validating_a_plan_object_round_trips(catalog: ToolRegistry) -> None:
    """A ``Plan`` passed back to ``validate`` is valid and equal to the original."""
    plan = load_plan(PLANS / "onboarding.yaml", catalog)
    again = validate(plan, catalog)
    assert again.valid
    assert again.plan == plan
