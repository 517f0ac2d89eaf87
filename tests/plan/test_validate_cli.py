"""``planrail validate --strict`` and ``--lint``: the new checks' levels from the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planrail.cli import app

from .helpers import PLACEHOLDER_PLAN, PLANS

CATALOG = str(PLANS / "tools.catalog.json")
PLAN = {
    "steps": [
        *PLACEHOLDER_PLAN["steps"],
        {"id": "again", "tool": "create_subscription", "args": {"user_id": "u", "plan": "pro"}},
    ]
}


@pytest.fixture
def plan_file(tmp_path: Path) -> str:
    """The plan above: a placeholder literal and two unordered subscriptions."""
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(PLAN), encoding="utf-8")
    return str(path)


def _run(*args: str) -> tuple[int, dict[str, list[str]]]:
    result = CliRunner().invoke(app, ["validate", *args, "--catalog", CATALOG, "--json"])
    if result.exit_code == 2:
        return 2, {}
    data = json.loads(result.stdout)
    return result.exit_code, {k: [i["code"] for i in data[k]] for k in ("errors", "warnings")}


def test_by_default_both_are_warnings(plan_file: str) -> None:
    """Without options the placeholder and the race are warnings: exit 0."""
    code, issues = _run(plan_file)
    assert code == 0
    assert issues == {"errors": [], "warnings": ["placeholder_literal", "side_effect_race"]}


def test_strict_makes_placeholders_errors(plan_file: str) -> None:
    """``--strict``: the placeholder is an error (exit 3); the lint stays a warning."""
    code, issues = _run(plan_file, "--strict")
    assert code == 3
    assert issues == {"errors": ["placeholder_literal"], "warnings": ["side_effect_race"]}


@pytest.mark.parametrize(
    ("lint", "errors", "warnings"),
    [
        ("error", ["side_effect_race"], ["placeholder_literal"]),
        ("side_effect_race=error", ["side_effect_race"], ["placeholder_literal"]),
        ("off", [], ["placeholder_literal"]),
        ("needless_dependency=off", [], ["placeholder_literal", "side_effect_race"]),
    ],
)
def test_lint_turns_the_lints_up_or_off(
    plan_file: str, lint: str, errors: list[str], warnings: list[str]
) -> None:
    """``--lint LEVEL`` sets both lints, ``--lint CODE=LEVEL`` one of them."""
    code, issues = _run(plan_file, "--lint", lint)
    assert issues == {"errors": errors, "warnings": warnings}
    assert code == (3 if errors else 0)


@pytest.mark.parametrize(
    "lint", ["loud", "side_effect_race=loud", "no_such_lint=off", "=error", "=off"]
)
def test_an_unknown_lint_level_or_code_is_a_usage_error(plan_file: str, lint: str) -> None:
    """A level or code ``--lint`` does not know exits 2 before anything is checked."""
    assert _run(plan_file, "--lint", lint)[0] == 2
