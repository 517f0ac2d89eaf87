"""``planrail demo`` and ``examples/onboarding``: the onboarding story really runs, leaves
exactly one consistent customer in the CRM, and shows the flat plan being refused first."""

from __future__ import annotations

import json
import os
import shlex
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

import planrail
from planrail.demo import onboarding

from .conftest import Cli

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "onboarding"
PLANRAIL = Path(sys.executable).with_name("planrail")


def check_crm(path: Path) -> dict[str, tuple[object, ...]]:
    """Exactly one row in each CRM table, every foreign key pointing at the one account, and
    the welcome email naming the subscription's plan and the workspace's URL."""
    with closing(sqlite3.connect(path)) as conn:
        rows = {
            table: conn.execute(f"SELECT * FROM {table}").fetchall()
            for table in ("accounts", "subscriptions", "workspaces", "outbox")
        }
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    assert {t: len(r) for t, r in rows.items()} == dict.fromkeys(rows, 1)
    account, sub, ws, mail = (rows[t][0] for t in rows)
    user_id = account[0]
    assert account[1:] == ("Alice", "alice@example.com")
    assert sub[1] == ws[1] == mail[1] == user_id
    assert sub[2:] == ("pro", 29.0)
    assert mail[2] == "Welcome, Alice!"
    assert f"Your pro plan is active. Your workspace: {ws[2]}" == mail[3]
    return {"account": account, "subscription": sub, "workspace": ws, "outbox": mail}


def test_demo_fast_onboards_exactly_one_customer(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """``planrail demo --fast`` exits 0; its output shows the flat to-do list rejected (with
    the validator's codes) before the graph runs; the CRM it leaves in the working directory
    holds one account, subscription, workspace and outbox row with consistent keys, and the
    printed run output names them."""
    # run_demo sets these globally; registering them first makes monkeypatch restore them.
    monkeypatch.setenv("PLANRAIL_DEMO_CRM", "unused")
    monkeypatch.setenv("PLANRAIL_DEMO_LATENCY", "0")
    monkeypatch.setattr(onboarding, "LATENCY", 0.0)
    result = cli("demo", "--fast")
    assert result.exit_code == 0, result.output
    out = result.stdout
    rejected = out.index("the flat plan is invalid")
    assert "[undeclared_dependency]" in out
    assert "[unknown_output_field]" in out
    assert rejected < out.index("2. The same work as a dependency graph") < out.index("succeeded")
    rows = check_crm(cli.cwd / ".planrail" / "demo" / "crm.sqlite")
    run_output = json.loads(out.rsplit("run output:", 1)[1].strip())
    assert run_output["user"] == rows["account"][0]
    assert run_output["subscription"] == rows["subscription"][0]
    assert run_output["email"] == rows["outbox"][0]


def test_demo_can_run_twice_in_the_same_directory(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Running the demo again starts from a fresh CRM: still exactly one customer."""
    monkeypatch.setenv("PLANRAIL_DEMO_CRM", "unused")
    monkeypatch.setenv("PLANRAIL_DEMO_LATENCY", "0")
    monkeypatch.setattr(onboarding, "LATENCY", 0.0)
    assert cli("demo", "--fast").exit_code == 0
    assert cli("demo", "--fast").exit_code == 0
    check_crm(cli.cwd / ".planrail" / "demo" / "crm.sqlite")


def test_the_example_is_the_demo_plan_with_the_demo_tools() -> None:
    """``examples/onboarding/plan.json`` is the shipped demo plan, and ``tools.py`` exposes
    exactly the demo's tools (so ``--tools`` on it registers all five)."""
    demo_plan = REPO / "src" / "planrail" / "demo" / "plan.json"
    assert json.loads((EXAMPLE / "plan.json").read_text()) == json.loads(demo_plan.read_text())
    tools = planrail.load_tools(str(EXAMPLE / "tools.py"))
    assert sorted(t.name for t in tools) == sorted(t.name for t in onboarding.TOOLS)
    report = planrail.validate(EXAMPLE / "plan.json", planrail.ToolRegistry(tools))
    assert report.valid, report.errors


def subprocess_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLANRAIL_")}
    env.update(PYTHONUNBUFFERED="1", PYTHONIOENCODING="utf-8", COLUMNS="200", NO_COLOR="1")
    env.update(extra)
    return env


def test_the_example_command_from_its_readme_succeeds(tmp_path: Path) -> None:
    """The README's command, run as is by the installed ``planrail`` script from a directory
    holding ``examples/``, exits 0 and onboards exactly one customer."""
    assert PLANRAIL.exists(), f"the planrail script is not installed next to {sys.executable}"
    (tmp_path / "examples").symlink_to(REPO / "examples", target_is_directory=True)
    crm = tmp_path / "crm.sqlite"
    env = subprocess_env(tmp_path, PLANRAIL_DEMO_LATENCY="0", PLANRAIL_DEMO_CRM=str(crm))
    command = (
        "planrail run examples/onboarding/plan.json --tools examples/onboarding/tools.py --yes"
    )
    proc = run_readme_command(command, tmp_path, env)
    assert "succeeded" in proc.stdout
    check_crm(crm)


def run_readme_command(
    command: str, cwd: Path, env: dict[str, str], *extra: str
) -> subprocess.CompletedProcess[str]:
    """Run ``command`` — which the example's README must show as is — with the installed
    script (plus ``extra`` arguments); it must exit 0."""
    assert command in (EXAMPLE / "README.md").read_text()
    proc = subprocess.run(
        [str(PLANRAIL), *shlex.split(command)[1:], *extra],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def test_installed_entry_point_smoke(tmp_path: Path) -> None:
    """The installed ``planrail`` script answers ``--help`` and ``validate --json`` with the
    contract's exit codes and output (no traceback)."""
    env = subprocess_env(tmp_path)
    help_ = subprocess.run(
        [str(PLANRAIL), "--help"], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert help_.returncode == 0
    for command in ("validate", "run", "demo"):
        assert command in help_.stdout
    plan = tmp_path / "bad.json"
    plan.write_text('{"steps": [{"id": "a", "tool": "t", "depends_on": ["a"]}]}')
    proc = subprocess.run(
        [str(PLANRAIL), "validate", str(plan), "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 3
    report = json.loads(proc.stdout)
    assert report["valid"] is False
    assert "self_dependency" in {i["code"] for i in report["errors"]}
    missing = subprocess.run(
        [str(PLANRAIL), "run", str(tmp_path / "nope.json"), "--tools", "x"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert missing.returncode == 2
    assert "Traceback" not in missing.stderr


def test_python_dash_m_planrail_is_the_command(tmp_path: Path) -> None:
    """``python -m planrail`` is the ``planrail`` command (for a venv whose scripts folder is
    not on PATH): the same help, program name and exit codes."""
    env = subprocess_env(tmp_path)

    def module(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "planrail", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    help_ = module("--help")
    assert help_.returncode == 0, help_.stderr
    assert "Usage: planrail " in help_.stdout
    plan = tmp_path / "bad.json"
    plan.write_text('{"steps": [{"id": "a", "tool": "t", "depends_on": ["a"]}]}')
    invalid = module("validate", str(plan), "--json")
    assert invalid.returncode == 3
    assert "self_dependency" in {i["code"] for i in json.loads(invalid.stdout)["errors"]}
    missing = module("validate", str(tmp_path / "nope.json"))
    assert missing.returncode == 2
    assert "Traceback" not in missing.stderr
