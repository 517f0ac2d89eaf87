"""``planrail validate``: static checks only; exit 0 valid, 2 usage error, 3 invalid."""

from __future__ import annotations

import pytest

from .conftest import DATA, TOOLS, Cli

ISSUE_KEYS = {"code", "step", "path", "message"}


def test_a_valid_plan_exits_0(cli: Cli) -> None:
    """A valid plan checked against its tools exits 0 and says it is valid."""
    result = cli("validate", str(DATA / "ok.json"), "--tools", TOOLS)
    assert result.exit_code == 0, result.output
    assert "is valid" in result.stdout


def test_yaml_plans_are_accepted(cli: Cli) -> None:
    """The same plan written in YAML validates too."""
    assert cli("validate", str(DATA / "ok.yaml"), "--tools", TOOLS).exit_code == 0


def test_without_tools_only_the_structure_is_checked(cli: Cli) -> None:
    """Without ``--tools``/``--catalog`` the plan's structure is checked, exit 0, and the
    output says the tools were not checked."""
    result = cli("validate", str(DATA / "ok.json"))
    assert result.exit_code == 0
    assert "tools were not checked" in result.stdout


def test_an_invalid_plan_exits_3_and_names_each_step_and_code(cli: Cli) -> None:
    """Every problem is reported in one pass; the human output names the step and the stable
    code of each, and says nothing was executed."""
    result = cli("validate", str(DATA / "invalid.json"), "--tools", TOOLS)
    assert result.exit_code == 3
    out = result.stdout
    assert "nothing was executed" in out
    assert "[undeclared_dependency]" in out
    assert "step 'loud'" in out
    assert "[unknown_tool]" in out
    assert "step 'ghost'" in out
    assert "$.steps[1].args.text" in out
    assert cli.calls == []


def test_validate_json_shape_for_an_invalid_plan(cli: Cli) -> None:
    """``--json`` prints exactly ``{valid, errors, warnings}``; each issue is exactly
    ``{code, step, path, message}``; all errors come in one report."""
    code, data = cli.json("validate", str(DATA / "invalid.json"), "--tools", TOOLS, "--json")
    assert code == 3
    assert set(data) == {"valid", "errors", "warnings"}
    assert data["valid"] is False
    assert isinstance(data["warnings"], list)
    assert all(set(issue) == ISSUE_KEYS for issue in data["errors"] + data["warnings"])
    found = {(i["code"], i["step"]) for i in data["errors"]}
    assert found == {("undeclared_dependency", "loud"), ("unknown_tool", "ghost")}
    loud = next(i for i in data["errors"] if i["step"] == "loud")
    assert loud["path"] == "$.steps[1].args.text"
    assert "depends_on" in loud["message"]


def test_validate_json_shape_for_a_valid_plan(cli: Cli) -> None:
    """A valid plan's JSON report has ``valid: true`` and no errors."""
    code, data = cli.json("validate", str(DATA / "ok.json"), "--tools", TOOLS, "--json")
    assert code == 0
    assert data["valid"] is True
    assert data["errors"] == []
    assert set(data) == {"valid", "errors", "warnings"}


def test_unparsable_plan_is_invalid_with_parse_error(cli: Cli) -> None:
    """A file that is not JSON is an invalid plan (exit 3) with code ``parse_error``."""
    code, data = cli.json("validate", str(DATA / "unparsable.json"), "--json")
    assert code == 3
    assert [i["code"] for i in data["errors"]] == ["parse_error"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["missing.json"], "no such file", id="missing-plan"),
        pytest.param([str(DATA)], "is a directory", id="directory"),
        pytest.param(
            [str(DATA / "ok.json"), "--tools", "no_such_module_xyz"],
            "module not found",
            id="unknown-module",
        ),
        pytest.param(
            [str(DATA / "ok.json"), "--tools", "missing_tools.py"],
            "no such file",
            id="missing-tools-file",
        ),
        pytest.param(
            [str(DATA / "ok.json"), "--tools", str(DATA / "no_tools.py")],
            "no @planrail.tool",
            id="module-without-tools",
        ),
        pytest.param(
            [str(DATA / "ok.json"), "--tools", str(DATA / "broken_tools.py")],
            "broken on purpose",
            id="module-that-raises",
        ),
        pytest.param(
            [str(DATA / "ok.json"), "--catalog", "missing.catalog.json"],
            "cannot read",
            id="missing-catalog",
        ),
    ],
)
def test_usage_errors_exit_2_with_one_line_saying_why(
    cli: Cli, args: list[str], message: str
) -> None:
    """A missing or unreadable plan, tools module or catalog is a usage error: exit 2, an
    ``error:`` line naming the problem, no traceback."""
    result = cli("validate", *args)
    assert result.exit_code == 2, result.output
    assert "error:" in result.output
    assert message in result.output
    assert "Traceback" not in result.output
