"""``check_plan(..., warnings=False)``, a run's validation: the same errors and compiled plan as
with warnings, no warnings, and the checks that could only warn not run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

import planrail
from planrail.plan import placeholders
from planrail.plan.catalog import load_catalog
from planrail.plan.compiled import CompiledPlan
from planrail.plan.tools import ToolRegistry
from planrail.plan.validate import ValidationOptions, ValidationReport, check_plan

from .helpers import PLANS, TASKBENCH, load_script
from .test_all_at_once import TOOLS, apply, mutated

confusion = load_script(TASKBENCH / "confusion.py", "taskbench_confusion")

OPTIONS = {
    "default": ValidationOptions(),
    "strict": ValidationOptions(strict=True),
    "side effects": ValidationOptions(placeholders_in_side_effects="error"),
    "lints": ValidationOptions(lints={"side_effect_race": "error", "needless_dependency": "off"}),
}


def _shape(compiled: CompiledPlan | None) -> Any:
    """What a run reads of a compiled plan: the plan, and per step its references and effect."""
    if compiled is None:
        return None
    steps = {sid: (c.flat, c.effect) for sid, c in compiled.steps.items()}
    return compiled.plan, steps, compiled.checked_with


def _same_without_warnings(
    source: Any, tools: ToolRegistry, options: ValidationOptions
) -> ValidationReport:
    """Check ``source`` both ways and compare; the report with warnings."""
    full = check_plan(source, tools, options=options)
    run = check_plan(source, tools, options=options, warnings=False)
    assert run.errors == full.errors
    assert run.warnings == []
    assert _shape(run.compiled) == _shape(full.compiled)
    return full


@pytest.fixture(scope="module")
def taskbench() -> list[tuple[dict[str, Any], ToolRegistry]]:
    tools = confusion.catalogs()
    return [(case.plan, tools[case.domain]) for case in confusion.cases()]


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_real_plans_get_the_same_errors_and_compiled_plan(
    name: str, taskbench: list[tuple[dict[str, Any], ToolRegistry]]
) -> None:
    """984 LLM-written plans (valid ones, and ones with every kind of error), each option."""
    warned = invalid = 0
    for plan, tools in taskbench:
        full = _same_without_warnings(plan, tools, OPTIONS[name])
        warned += bool(full.warnings)
        invalid += bool(full.errors)
    assert warned  # plans with warnings were compared
    assert invalid  # and plans with errors


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_the_example_plans_get_the_same_errors_and_compiled_plan(name: str) -> None:
    tools = ToolRegistry(load_catalog(PLANS / "tools.catalog.json"))
    files = sorted(p for p in PLANS.iterdir() if p.suffix in (".json", ".yaml"))
    for path in files:
        if path.name != "tools.catalog.json":
            _same_without_warnings(Path(path), tools, OPTIONS[name])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=mutated())
def test_plans_with_many_mistakes_get_the_same_errors(
    case: tuple[int, list[tuple[int, str, int]]],
) -> None:
    plan, _ = apply(*case)
    for options in OPTIONS.values():
        _same_without_warnings(plan, TOOLS, options)


def _warned_plan() -> dict[str, Any]:
    """A valid plan with a ``placeholder_literal`` and a ``duplicate_call`` warning."""
    args = {"user": "<user_id>"}
    steps = [{"id": sid, "tool": "lookup", "args": args} for sid in ("a", "b")]
    return {"goal": "warned", "steps": steps}


@planrail.tool(side_effects="none")
async def lookup(user: str) -> str:
    return user


def _scans(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts the placeholder check looks at from now on."""
    seen: list[str] = []
    real = placeholders.find_placeholders

    def spy(text: str, **kwargs: Any) -> Any:
        seen.append(text)
        return real(text, **kwargs)

    monkeypatch.setattr(placeholders, "find_placeholders", spy)
    return seen


def test_validation_reports_the_warnings_a_run_does_not_look_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scans = _scans(monkeypatch)
    report: ValidationReport = planrail.validate(_warned_plan(), [lookup])
    assert {w.code for w in report.warnings} == {"duplicate_call", "placeholder_literal"}
    assert scans  # the check ran
    scans.clear()
    execution = planrail.prepare(_warned_plan(), [lookup])
    assert scans == []  # a run's validation did not scan for placeholders
    assert execution.compiled.checked_with is not None


async def test_a_strict_run_still_refuses_a_placeholder_it_does_not_warn_about(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Under a strict policy the placeholder is an error: the run's validation looks for it."""
    scans = _scans(monkeypatch)

    @planrail.tool(side_effects="keyed")
    async def pay(to: str) -> str:
        return to

    plan = {"goal": "pay", "steps": [{"id": "p", "tool": "pay", "args": {"to": "<user_id>"}}]}
    with pytest.raises(planrail.PlanValidationError) as err:
        await planrail.arun(plan, [pay], security=planrail.SecurityPolicy(strict=True))
    assert [i.code for i in err.value.issues] == ["placeholder_literal"]
    assert scans


def test_a_plan_checked_with_warnings_is_not_checked_again_by_its_run() -> None:
    """``checked_with`` does not depend on ``warnings``: the CLI's report (with warnings) is
    what its run executes."""
    registry = ToolRegistry([lookup])
    compiled = check_plan(_warned_plan(), registry).compiled_or_raise()
    assert planrail.prepare(compiled, registry).compiled is compiled
