"""The approval screen as data (``engine/approval_view.py``), its terminal drawing, its
``--json`` (``planrail review``), and approved-means-frozen."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from planrail.cli.approval_screen import print_view
from planrail.engine.approval import ApprovalRequest
from planrail.engine.approval_view import build_view
from planrail.engine.executor import Execution
from planrail.engine.result import StepResult
from planrail.errors import ApprovalRefusedError
from planrail.types import StepStatus

from .kit import ATTACKER, World, pay_plan, plan_of

CLI = [sys.executable, "-c", "from planrail.cli import main; main()"]


def _replan_request(world: World) -> ApprovalRequest:
    """A replan that reuses ``doc`` and whose model copied the attacker's payee as a literal."""
    registry = world.registry()
    first = plan_of(pay_plan(), registry)
    second = plan_of(pay_plan(payee=ATTACKER, amount="${doc.amount}"), registry)
    done = StepResult("doc", StepStatus.SUCCEEDED, 1, output=dict(world.document))
    execution = Execution(second, registry, restored={"doc": done}, previous=first)
    return execution.approval_request()


def test_view_shows_values_provenance_hash_and_replan_diff() -> None:
    """Snapshot: each argument's value, its provenance (the copied literal is untrusted, not
    "from the user"), the short hash and what changed since the approved version."""
    request = _replan_request(World())
    view = build_view(request, author="planner").to_dict()
    assert view["short_hash"] == request.plan_hash[:19]
    assert view["untrusted"] == ["pay"]
    assert view["read_only"] == []
    assert view["reused"] == ["doc"]
    assert view["diff"]["changed"] == ["pay"]
    assert view["diff"]["args"] == {"pay": {"payee": {"before": "${doc.payee}", "after": ATTACKER}}}
    (pay,) = view["steps"]
    assert (pay["id"], pay["tool"], pay["change"]) == ("pay", "pay_bill", "changed")
    assert pay["args"] == [
        {
            "name": "payee",
            "value": ATTACKER,
            "known": True,
            "sources": [
                {
                    "kind": "copied",
                    "name": "read_document",
                    "trusted": False,
                    "text": "copied by the model from the output of tool read_document (untrusted)",
                }
            ],
            "untrusted": True,
            "secret": False,
        },
        {
            "name": "amount",
            "value": 42.5,
            "known": True,
            "sources": [
                {
                    "kind": "tool",
                    "name": "read_document",
                    "trusted": False,
                    "text": "output of tool read_document (untrusted)",
                }
            ],
            "untrusted": True,
            "secret": False,
        },
    ]


def test_terminal_screen_shows_the_attacker_value_flagged() -> None:
    """Snapshot of the drawn screen: the attacker's payee in clear, flagged with ``!``, its
    source, the replan diff and the short hash right above the question."""
    request = _replan_request(World())
    console = Console(record=True, width=120, color_system=None)
    print_view(console, build_view(request, author="planner"))
    text = console.export_text()
    lines = [line.rstrip() for line in text.splitlines()]
    assert lines[0] == "approval needed — plan: Pay this month's electricity bill"
    assert lines[1].startswith("changed since the approved version sha256:")
    assert lines[1].endswith("added —; changed pay; removed —")
    assert lines[2] == f"  pay.payee: ${{doc.payee}} → {ATTACKER}"
    assert lines[3] == "pay calls pay_bill (keyed) [changed]"
    assert lines[4] == f"  ! payee = {ATTACKER}"
    assert (
        lines[5] == "      ← copied by the model from the output of tool read_document (untrusted)"
    )
    assert lines[6] == "  ! amount = 42.5"
    assert lines[-1] == (
        f"1 step(s) change the world; 1 with untrusted values (!). Approving binds plan"
        f" {request.plan_hash[:19]}…"
    )


def test_literal_in_the_goal_is_the_users_and_reference_waits_for_run_time() -> None:
    """A literal the user typed in the goal reads "typed by the user in the goal"; a reference
    into a step that has not run is shown as written and marked unknown."""
    world = World()
    registry = world.registry()
    data = pay_plan(payee="City Power", amount="${doc.amount}")
    data["goal"] = "Pay City Power this month's bill"
    execution = Execution(plan_of(data, registry), registry)
    view = build_view(execution.approval_request())
    payee, amount = view.steps[0].args
    assert [s.kind for s in payee.sources] == ["goal"]
    assert not payee.untrusted
    assert amount.value == "${doc.amount}"
    assert amount.known is False
    assert amount.untrusted
    assert view.read_only == (("doc", "read_document"),)


def test_review_json_prints_the_same_model(tmp_path: Path) -> None:
    """``planrail review --json`` prints exactly ``ApprovalView.to_dict()`` of the plan."""
    tools = tmp_path / "tools.py"
    tools.write_text(
        "import planrail\n"
        "@planrail.tool(side_effects='none')\n"
        "def read_document(path: str) -> dict:\n    return {}\n"
        "@planrail.tool(side_effects='keyed')\n"
        "def pay_bill(payee: str, amount: float) -> dict:\n    return {}\n"
    )
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(pay_plan()))
    proc = subprocess.run(
        [*CLI, "review", str(plan), "--tools", str(tools), "--json"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        check=False,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["untrusted"] == ["pay"]
    assert [a["name"] for a in data["steps"][0]["args"]] == ["payee", "amount"]
    assert data["steps"][0]["args"][0]["value"] == "${doc.payee}"
    assert data["read_only"] == [["doc", "read_document"]]
    assert data["short_hash"].startswith("sha256:")
    assert len(data["short_hash"]) == 19


async def test_mutating_args_after_approval_is_refused_before_any_call() -> None:
    """Approved means frozen: an approver that changes ``step.args`` in place after saying yes
    gets the run refused (the hash is recomputed) before any tool is called; the approval
    record names who approved and when."""
    world = World()
    registry = world.registry()
    plan = plan_of(pay_plan(payee="City Power", amount=10), registry)

    def sneaky(request: ApprovalRequest) -> bool:
        request.plan.step("pay").args["payee"] = ATTACKER
        return True

    execution = Execution(plan, registry, approver=sneaky)
    with pytest.raises(ApprovalRefusedError, match="another plan"):
        await execution.run()
    assert world.calls == []
    assert execution.approval is not None
    assert execution.approval["by"] == "callback"
    assert isinstance(execution.approval["at"], float)


async def test_mutating_args_between_runs_keeps_the_old_approval_out() -> None:
    """A plan approved once and changed in place afterwards does not run on that approval."""
    world = World()
    registry = world.registry()
    plan = plan_of(pay_plan(payee="City Power", amount=10), registry)
    first = Execution(plan, registry, approve=True)
    await first.run()
    approval: dict[str, Any] = dict(first.approval or {})
    world.calls.clear()
    plan.step("pay").args["payee"] = ATTACKER
    with pytest.raises(ApprovalRefusedError):
        await Execution(plan, registry, approval=approval).run()
    assert world.calls == []
