"""``planrail run``: validate, approve, execute. Exit 0 ok, 1 a step failed, 2 usage error,
3 invalid plan (nothing executed), 4 approval refused; ``--json`` prints the run object."""

from __future__ import annotations

import json

import pytest

from .conftest import DATA, TOOLS, Cli

STEP_KEYS = {"id", "status", "attempts", "started_at", "finished_at", "output", "error", "reason"}
STEP_STATUSES = {"succeeded", "failed", "skipped", "cancelled", "pending", "running", "in_doubt"}


def check_run_shape(data: dict[str, object]) -> dict[str, dict[str, object]]:
    """The ``run --json`` object of the contract; returns its steps by id."""
    assert {"run_id", "status", "output", "steps"} <= set(data)
    assert set(data) - {"run_id", "status", "output", "steps"} <= {"error"}
    assert data["status"] in {"succeeded", "failed", "cancelled", "awaiting_approval"}
    assert isinstance(data["run_id"], str)
    assert data["run_id"]
    steps = data["steps"]
    assert isinstance(steps, list)
    for step in steps:
        assert set(step) == STEP_KEYS
        assert step["status"] in STEP_STATUSES
        assert isinstance(step["attempts"], int)
        error = step["error"]
        assert error is None or set(error) == {"type", "message", "retryable"}
    return {s["id"]: s for s in steps}


def test_a_successful_run_exits_0_with_the_run_object(cli: Cli) -> None:
    """A plan whose steps all succeed exits 0; ``--json`` prints the run with every step
    ``succeeded``, its real output, start and end times, and the plan's resolved output."""
    code, data = cli.json("run", str(DATA / "ok.json"), "--tools", TOOLS, "--json")
    assert code == 0
    steps = check_run_shape(data)
    assert data["status"] == "succeeded"
    assert data["output"] == {"greeting": "HELLO ADA", "who": "Ada"}
    assert list(steps) == ["hello", "loud"]
    assert steps["hello"]["output"] == {"text": "hello Ada", "name": "Ada"}
    for step in steps.values():
        assert step["status"] == "succeeded"
        assert step["attempts"] == 1
        assert step["error"] is None
        assert step["reason"] is None
        assert step["started_at"] <= step["finished_at"]  # type: ignore[operator]
    assert steps["hello"]["finished_at"] <= steps["loud"]["started_at"]  # type: ignore[operator]
    assert cli.calls == ["hello", "loud"]


def test_run_id_is_used(cli: Cli) -> None:
    """``--run-id`` names the run; the tools' idempotency keys use it."""
    code, data = cli.json(
        "run", str(DATA / "effects.json"), "--tools", TOOLS, "--yes", "--json", "--run-id", "r42"
    )
    assert code == 0
    assert data["run_id"] == "r42"
    assert data["output"] == "r42:save=hello Ada"


def test_a_failed_step_exits_1_and_skips_only_its_dependents(cli: Cli) -> None:
    """When a step fails the run exits 1: the failure carries ``{type, message, retryable}``,
    its dependent is ``skipped`` with a reason naming it, the independent branch succeeds."""
    code, data = cli.json("run", str(DATA / "failing.json"), "--tools", TOOLS, "--json")
    assert code == 1
    steps = check_run_shape(data)
    assert data["status"] == "failed"
    assert steps["boom"]["status"] == "failed"
    assert steps["boom"]["error"] == {
        "type": "ValueError",
        "message": "the upstream said no",
        "retryable": False,
    }
    assert steps["after_boom"]["status"] == "skipped"
    assert "boom" in str(steps["after_boom"]["reason"])
    assert steps["after_boom"]["started_at"] is None
    assert steps["loud"]["status"] == "succeeded"
    assert "after_boom" not in cli.calls


def test_human_output_of_a_failed_run_names_the_step_and_the_error(cli: Cli) -> None:
    """Without ``--json`` the summary names the failed step, its error and the skip reason."""
    result = cli("run", str(DATA / "failing.json"), "--tools", TOOLS)
    assert result.exit_code == 1
    out = result.stdout
    assert "failed" in out
    assert "boom" in out
    assert "ValueError: the upstream said no" in out
    assert "dependency 'boom' failed" in out


def test_an_invalid_plan_exits_3_and_nothing_runs(cli: Cli) -> None:
    """An invalid plan is reported like ``validate`` (exit 3, every issue, step and code) and
    no tool is called — not even the steps that would have been fine."""
    result = cli("run", str(DATA / "invalid.json"), "--tools", TOOLS, "--yes")
    assert result.exit_code == 3
    assert "[undeclared_dependency]" in result.stdout
    assert "step 'loud'" in result.stdout
    assert cli.calls == []
    code, data = cli.json("run", str(DATA / "invalid.json"), "--tools", TOOLS, "--yes", "--json")
    assert code == 3
    assert data["valid"] is False
    assert {i["code"] for i in data["errors"]} == {"undeclared_dependency", "unknown_tool"}
    assert cli.calls == []


def _with_placeholder(cli: Cli) -> str:
    """``ok.json`` with a placeholder literal for the name: valid, with one warning."""
    plan = json.loads((DATA / "ok.json").read_text())
    plan["steps"][0]["args"]["name"] = "{{user.name}}"
    path = cli.cwd / "placeholder.json"
    path.write_text(json.dumps(plan))
    return str(path)


def test_a_valid_plans_warnings_are_shown_before_it_runs(cli: Cli) -> None:
    """A valid plan with warnings runs, and its warnings (code, step, path, message) are
    printed first — before the summary; on stderr with ``--json``, whose stdout stays the run
    object. A plan without warnings prints none."""
    plan = _with_placeholder(cli)
    result = cli("run", plan, "--tools", TOOLS)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "is valid, with 1 warning" in out
    warning = out.index("warning [placeholder_literal] step 'hello' at $.steps[0].args.name")
    assert warning < out.index("succeeded")
    assert cli.calls == ["hello", "loud"]
    result = cli("run", plan, "--tools", TOOLS, "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["status"] == "succeeded"
    assert "[placeholder_literal]" in result.stderr
    assert "warning" not in cli("run", str(DATA / "ok.json"), "--tools", TOOLS).output


def test_review_shows_a_valid_plans_warnings(cli: Cli) -> None:
    """``review`` prints the warnings ``run`` would print, then the approval screen."""
    result = cli("review", _with_placeholder(cli), "--tools", TOOLS)
    assert result.exit_code == 0, result.output
    assert "warning [placeholder_literal] step 'hello'" in result.stdout
    assert cli.calls == []


def test_side_effects_without_a_terminal_or_yes_are_refused_with_4(cli: Cli) -> None:
    """A plan with a side-effecting tool, run without ``--yes`` and with no terminal to ask
    on, is refused: exit 4, the plan is shown with what changes the world, nothing runs."""
    result = cli("run", str(DATA / "effects.json"), "--tools", TOOLS)
    assert result.exit_code == 4
    assert "save" in result.output
    assert "keyed" in result.output
    assert "--yes" in result.output
    assert cli.calls == []
    code, data = cli.json("run", str(DATA / "effects.json"), "--tools", TOOLS, "--json")
    assert code == 4
    assert data["status"] == "awaiting_approval"
    assert "refused" in data["error"]
    assert {s["status"] for s in data["steps"]} == {"pending"}
    assert cli.calls == []


def test_yes_approves_side_effects(cli: Cli) -> None:
    """With ``--yes`` the same plan runs and exits 0."""
    result = cli("run", str(DATA / "effects.json"), "--tools", TOOLS, "--yes")
    assert result.exit_code == 0, result.output
    assert cli.calls == ["hello", "save"]


def test_read_only_plans_need_no_approval(cli: Cli) -> None:
    """A plan whose tools are all read-only runs without ``--yes`` and without a terminal."""
    assert cli("run", str(DATA / "ok.json"), "--tools", TOOLS).exit_code == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["missing.json", "--tools", "TOOLS"], "no such file", id="missing-plan"),
        pytest.param([str(DATA / "ok.json")], "needs --tools", id="no-tools"),
        pytest.param(
            [str(DATA / "ok.json"), "--tools", "no_such_module_xyz"],
            "module not found",
            id="unknown-module",
        ),
        pytest.param(
            [str(DATA / "ok.json"), "--tools", str(DATA / "broken_tools.py")],
            "broken on purpose",
            id="module-that-raises",
        ),
        *(
            pytest.param([str(DATA / "ok.json"), "--tools", "TOOLS", *more], message, id=name)
            for name, more, message in [
                (
                    "two-tools-one-name",
                    ["--tools", str(DATA / "same_name_tools.py")],
                    "a tool named 'greet' is defined by --tools",
                ),
                (
                    "endless-policy",
                    ["--policy", "/dev/zero"],
                    "the policy is more than 1,048,576 bytes",
                ),
                ("endless-catalog", ["--catalog", "/dev/zero"], "the catalog is more than"),
                ("concurrency-zero", ["--max-concurrency", "0"], "max-concurrency"),
                ("bad-store-url", ["--store", "nosuch://x"], ""),
            ]
        ),
    ],
)
def test_usage_errors_exit_2_and_run_nothing(cli: Cli, args: list[str], message: str) -> None:
    """Missing plan, missing or broken ``--tools``, a bad option value or store URL: exit 2
    with a message saying what is wrong, and nothing runs."""
    args = [TOOLS if a == "TOOLS" else a for a in args]
    result = cli("run", *args, "--yes")
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output
    assert cli.calls == []
