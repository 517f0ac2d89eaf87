"""Security policies as pure values: rules, strict mode, static and value-dependent decisions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from planrail.plan.provenance import analyze
from planrail.policies.security import (
    ApprovalMismatchError,
    PolicyDeniedError,
    Rule,
    SecurityPolicy,
    SecurityPolicyError,
    check_approval,
    denial_of,
)

from .kit import World, pay_plan, plan_of

R = World().registry()


def _decide(policy: SecurityPolicy, data: dict[str, Any], step: str, args: Any = None) -> Any:
    plan = plan_of(data, R)
    return policy.decide(plan.step(step), analyze(plan, R), args)


ALLOW_PAY = Rule(tool="pay_bill", action="allow")


def test_without_strict_mode_and_rules_everything_is_allowed() -> None:
    """The default policy changes nothing: every call is allowed."""
    d = _decide(SecurityPolicy(), pay_plan(), "pay")
    assert (d.action, d.final) == ("allow", True)


def test_strict_mode_denies_a_side_effecting_tool_no_rule_allows() -> None:
    """Default-deny: under strict mode a tool with side effects needs an ``allow`` rule."""
    d = _decide(SecurityPolicy(strict=True), pay_plan(payee="Bob", amount=1), "pay")
    assert d.action == "deny"
    assert "no rule allows calling 'pay_bill'" in d.reason


def test_strict_mode_leaves_read_only_tools_alone() -> None:
    """A read-only tool (``side_effects="none"``) runs without any rule or approval."""
    d = _decide(SecurityPolicy(strict=True), pay_plan(), "doc")
    assert (d.action, d.reason) == ("allow", "read-only tool")


def test_strict_mode_asks_approval_for_an_argument_from_a_tool() -> None:
    """An allowed side-effecting tool whose argument derives from a tool's output needs
    approval; the reason names the argument and the source."""
    policy = SecurityPolicy(strict=True, rules=(ALLOW_PAY,))
    d = _decide(policy, pay_plan(payee="${doc.payee}", amount=3), "pay")
    assert d.action == "approve"
    assert "'payee' derives from tool:read_document" in d.reason
    assert d.sources["payee"] == ("tool:read_document", "user")
    assert _decide(policy, pay_plan(payee="Bob", amount=3), "pay").action == "allow"


def test_an_allow_rule_naming_an_argument_accepts_only_the_sources_it_lists() -> None:
    """``{arg: amount, from: [tool:read_document]}`` vouches for the amount from the bill, not
    for an amount from anywhere else, and never for the payee."""
    policy = SecurityPolicy(
        strict=True,
        rules=(
            ALLOW_PAY,
            Rule(tool="pay_bill", arg="amount", sources=("tool:read_document",), action="allow"),
        ),
    )
    assert _decide(policy, pay_plan(payee="Bob"), "pay").action == "allow"
    d = _decide(policy, pay_plan(), "pay")
    assert d.action == "approve"
    assert "'payee'" in d.reason
    assert "'amount'" not in d.reason
    other = pay_plan(payee="Bob", amount="${who.address}")
    other["steps"].append({"id": "who", "tool": "lookup", "args": {"name": "x"}})
    other["steps"][1]["depends_on"] = ["doc", "who"]
    assert _decide(policy, other, "pay").action == "approve"


def test_deny_beats_approve_beats_allow() -> None:
    """A matching deny rule wins over allow rules and over strict approvals."""
    policy = SecurityPolicy(
        strict=True,
        rules=(
            ALLOW_PAY,
            Rule(
                tool="pay_bill",
                arg="payee",
                sources=("external",),
                action="deny",
                reason="the payee must come from the user",
            ),
        ),
    )
    d = _decide(policy, pay_plan(), "pay")
    assert (d.action, d.reason, d.rule) == ("deny", "the payee must come from the user", 1)
    assert _decide(policy, pay_plan(payee="Bob"), "pay").action == "approve"  # the amount
    assert _decide(policy, pay_plan(payee="Bob", amount=3), "pay").action == "allow"


def test_a_when_rule_is_decided_on_the_resolved_values() -> None:
    """A rule with ``when`` cannot be decided before the run (``final`` is false); with the
    resolved arguments it is exact."""
    policy = SecurityPolicy(
        rules=(Rule(tool="pay_bill", action="approve", when={"gt": ["${args.amount}", 100]}),)
    )
    data = pay_plan(payee="Bob", amount=500)
    static = _decide(policy, data, "pay")
    assert (static.action, static.final) == ("allow", False)
    assert _decide(policy, data, "pay", {"payee": "Bob", "amount": 500}).action == "approve"
    assert _decide(policy, data, "pay", {"payee": "Bob", "amount": 5}).action == "allow"


def test_a_when_rule_that_cannot_be_evaluated_fails_closed() -> None:
    """A deny rule whose ``when`` errors (wrong type, missing argument) counts as matching; an
    allow rule that errors does not."""
    deny = SecurityPolicy(
        rules=(Rule(tool="pay_bill", action="deny", when={"gt": ["${args.amount}", 100]}),)
    )
    data = pay_plan(payee="Bob", amount=5)
    assert _decide(deny, data, "pay", {"payee": "Bob", "amount": "lots"}).action == "deny"
    allow = SecurityPolicy(
        strict=True,
        rules=(Rule(tool="pay_bill", action="allow", when={"lt": ["${args.nothing}", 100]}),),
    )
    assert _decide(allow, data, "pay", {"payee": "Bob", "amount": 5}).action == "deny"


def test_rules_use_globs_for_tools_and_arguments() -> None:
    """``tool: "pay_*"`` and ``arg: "pay*"`` match by fnmatch."""
    policy = SecurityPolicy(
        rules=(Rule(tool="pay_*", arg="pay*", sources=("tool",), action="deny"),)
    )
    assert _decide(policy, pay_plan(), "pay").action == "deny"
    assert _decide(policy, pay_plan(payee="Bob"), "pay").action == "allow"


def test_review_gives_the_static_decision_of_every_call() -> None:
    """``review`` lists each tool call (fallback calls as ``STEP.fallback``) before the run."""
    data = pay_plan()
    data["steps"][1]["fallback"] = {"tool": "send_email", "args": {"to": "me", "body": "failed"}}
    plan = plan_of(data, R)
    policy = SecurityPolicy(strict=True, rules=(ALLOW_PAY,))
    review = policy.review(analyze(plan, R), plan.steps)
    assert {k: d.action for k, d in review.items()} == {
        "doc": "allow",
        "pay": "approve",
        "pay.fallback": "deny",
    }


def test_a_policy_file_loads_from_json_and_yaml(tmp_path: Path) -> None:
    """JSON and YAML policy files give the same value; ``from`` may be one string."""
    data = {
        "strict": True,
        "max_tool_calls": 50,
        "rules": [
            {"tool": "pay_bill", "action": "allow"},
            {
                "tool": "pay_bill",
                "arg": "payee",
                "from": "external",
                "action": "deny",
                "reason": "typed by the user only",
            },
        ],
    }
    (tmp_path / "p.json").write_text(json.dumps(data))
    (tmp_path / "p.yaml").write_text(
        "strict: true\nmax_tool_calls: 50\nrules:\n"
        "  - {tool: pay_bill, action: allow}\n"
        "  - {tool: pay_bill, arg: payee, from: external, action: deny,"
        " reason: typed by the user only}\n"
    )
    a = SecurityPolicy.load(tmp_path / "p.json")
    assert a == SecurityPolicy.load(tmp_path / "p.yaml")
    assert a.rules[1].sources == ("external",)
    assert SecurityPolicy.from_mapping(a.to_dict()) == a


def test_every_problem_in_a_policy_is_reported_at_once() -> None:
    """A malformed policy raises one error listing each problem with where it is."""
    with pytest.raises(SecurityPolicyError) as err:
        SecurityPolicy.from_mapping(
            {
                "strict": "yes",
                "colour": 1,
                "max_tool_calls": -1,
                "rules": [
                    {"tool": "x", "action": "maybe"},
                    {"tool": "x", "action": "deny", "from": ["tools"]},
                    {"tool": "x", "action": "deny", "when": {"gt": [1]}},
                    {"tool": "x", "action": "allow", "colour": 2},
                    "not a rule",
                ],
            }
        )
    problems = err.value.problems
    assert len(problems) == 8, problems
    assert any(p.startswith("rules[2]: when.gt") for p in problems)


def test_approval_checks_and_denial_unwrapping() -> None:
    """``check_approval`` refuses another plan's approval (or one without a hash), and
    ``denial_of`` finds a denial inside a fan-out's exception group."""
    check_approval(None, "sha256:a")
    check_approval({"plan_hash": "sha256:a"}, "sha256:a")
    with pytest.raises(ApprovalMismatchError):
        check_approval({"plan_hash": "sha256:b"}, "sha256:a")
    with pytest.raises(ApprovalMismatchError, match="no plan hash"):
        check_approval({"by": "alice"}, "sha256:a")
    denied = PolicyDeniedError("no")
    group = ExceptionGroup("fan-out", [ExceptionGroup("inner", [denied])])
    assert denial_of(group) is denied
    assert denial_of(ValueError("x")) is None
