"""``planrail run --policy FILE --strict``: the command line wires the security policy in."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from .kit import ATTACKER, LEGIT, pay_plan

TOOLS = f"""
import planrail

@planrail.tool(side_effects="none")
def read_document(path: str) -> dict:
    return {{"payee": {ATTACKER!r}, "amount": 42.5}}

@planrail.tool(side_effects="keyed")
def pay_bill(payee: str, amount: float) -> dict:
    with open({{path!r}}, "a") as f:
        f.write(payee + "\\n")
    return {{"paid": amount}}
"""


def _setup(tmp_path: Path, plan: dict[str, Any], policy: dict[str, Any] | None) -> list[str]:
    paid = tmp_path / "paid.txt"
    (tmp_path / "tools.py").write_text(TOOLS.replace("{path!r}", repr(str(paid))))
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    args = [
        "run",
        str(tmp_path / "plan.json"),
        "--tools",
        str(tmp_path / "tools.py"),
        "--store",
        f"sqlite:///{tmp_path / 'runs.db'}",
        "--yes",
        "--json",
    ]
    if policy is not None:
        (tmp_path / "policy.yaml").write_text(json.dumps(policy))
        args += ["--policy", str(tmp_path / "policy.yaml")]
    return args


class _Done:
    def __init__(self, proc: subprocess.CompletedProcess[str]) -> None:
        self.exit_code = proc.returncode
        self.stdout = proc.stdout
        self.output = proc.stdout + proc.stderr


def _invoke(args: list[str]) -> _Done:
    """The real command in a fresh interpreter (no terminal: stdin is closed)."""
    proc = subprocess.run(
        [sys.executable, "-c", "from planrail.cli import main; main()", *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    return _Done(proc)


def _paid(tmp_path: Path) -> list[str]:
    paid = tmp_path / "paid.txt"
    return paid.read_text().splitlines() if paid.exists() else []


POLICY = {
    "rules": [
        {"tool": "pay_bill", "action": "allow"},
        {"tool": "pay_bill", "arg": "amount", "from": ["tool:read_document"], "action": "allow"},
    ]
}


def test_strict_run_refuses_the_attacker_payee_without_a_terminal(tmp_path: Path) -> None:
    """``--strict`` with a policy: a payee from the document needs a runtime approval, which
    ``--yes`` does not give and no terminal can: exit 1, nothing paid."""
    args = [*_setup(tmp_path, pay_plan(), POLICY), "--strict"]
    result = _invoke(args)
    assert result.exit_code == 1, result.output
    out = json.loads(result.stdout.strip().splitlines()[-1])
    pay = next(s for s in out["steps"] if s["id"] == "pay")
    assert pay["error"]["type"] == "CallNotApprovedError"
    assert _paid(tmp_path) == []


def test_strict_run_pays_a_payee_typed_by_the_user(tmp_path: Path) -> None:
    """The same policy and plan with the payee written in the plan: exit 0, paid."""
    args = [*_setup(tmp_path, pay_plan(payee=LEGIT), POLICY), "--strict"]
    result = _invoke(args)
    assert result.exit_code == 0, result.output
    assert _paid(tmp_path) == [LEGIT]


def test_strict_without_rules_denies_every_side_effect(tmp_path: Path) -> None:
    """``--strict`` alone: default-deny for side-effecting tools, read-only tools still run."""
    args = [*_setup(tmp_path, pay_plan(payee=LEGIT), None), "--strict"]
    result = _invoke(args)
    assert result.exit_code == 1
    out = json.loads(result.stdout.strip().splitlines()[-1])
    steps = {s["id"]: s for s in out["steps"]}
    assert steps["doc"]["status"] == "succeeded"
    assert steps["pay"]["error"]["type"] == "PolicyDeniedError"


def test_a_malformed_policy_file_is_a_usage_error(tmp_path: Path) -> None:
    """A policy file with mistakes exits 2 naming them, before anything runs."""
    args = _setup(tmp_path, pay_plan(payee=LEGIT), {"rules": [{"tool": "x", "action": "?"}]})
    result = _invoke(args)
    assert result.exit_code == 2
    assert "action must be one of" in " ".join(result.output.split())
    assert " ".join(result.output.split()).count(str(tmp_path / "policy.yaml")) == 1
    assert _paid(tmp_path) == []


def test_a_policy_file_that_cannot_be_read_is_named_once(tmp_path: Path) -> None:
    """``--policy`` naming no file: exit 2, the path said once with why."""
    args = _setup(tmp_path, pay_plan(payee=LEGIT), None)
    missing = tmp_path / "nope.json"
    result = _invoke([*args, "--policy", str(missing)])
    assert result.exit_code == 2
    said = " ".join(result.output.split())
    assert f"{missing}: cannot read it" in said
    assert said.count(str(missing)) == 1
    assert _paid(tmp_path) == []


def test_strict_review_refuses_a_placeholder_as_run_does(tmp_path: Path) -> None:
    """``review --strict`` validates with the strict policy's options, as ``run --strict``
    does: a placeholder payee in a side-effecting step is an invalid plan (exit 3, the issue
    printed as by ``validate``) on both, and nothing is paid."""
    args = [*_setup(tmp_path, pay_plan(payee="<payee_name>"), None), "--strict"]
    review = ["review", *args[1:4], "--strict", "--json"]
    for command in (review, args):
        result = _invoke(command)
        assert result.exit_code == 3, result.output
        issues = json.loads(result.stdout)["errors"]
        assert [i["code"] for i in issues] == ["placeholder_literal"], issues
    assert _paid(tmp_path) == []
