"""One compiled plan: validation's findings are what the run, the redactor, provenance and the
approval screen read — nothing parses the plan's strings again after validation."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import planrail
from planrail.errors import PlanValidationError
from planrail.plan import refs
from planrail.plan.compiled import CompiledPlan
from planrail.plan.effects import effects_of
from planrail.plan.tools import ToolRegistry
from planrail.plan.validate import check_plan
from planrail.policies.security import SecurityPolicy

CALLS: list[tuple[str, Any]] = []


@planrail.tool(side_effects="none")
def lookup(user: str) -> dict:
    """Find a user."""
    CALLS.append(("lookup", user))
    return {"id": f"u-{user}", "token": "tok-123456", "tags": ["a", "b"]}


@planrail.tool(side_effects="keyed", secret_params=["token"])
def notify(user_id: str, token: str, note: str) -> dict:
    """Notify a user (the token is secret)."""
    CALLS.append(("notify", (user_id, note)))
    return {"sent": True}


@planrail.tool(side_effects="none")
def tag(name: str) -> str:
    """Echo a tag."""
    CALLS.append(("tag", name))
    return name.upper()


PLAN: dict[str, Any] = {
    "goal": "notify ana",
    "steps": [
        {"id": "who", "tool": "lookup", "args": {"user": "ana"}},
        {
            "id": "send",
            "tool": "notify",
            "args": {
                "user_id": "${who.id}",
                "token": "${who.token}",
                "note": {"$first": ["hello ${who.id}", "hello"]},
            },
            "depends_on": ["who"],
            "when": {"exists": "${who.id}"},
        },
        {
            "id": "tags",
            "tool": "tag",
            "for_each": "${who.tags}",
            "args": {"name": "${item}"},
            "depends_on": ["who"],
        },
    ],
    "output": {"sent": "${send.sent}", "tags": "${tags}"},
}
TOOLS = ToolRegistry([lookup, notify, tag])


def _report() -> Any:
    report = check_plan(PLAN, TOOLS)
    assert report.valid, report.errors
    return report


def test_validation_hands_over_references_with_their_paths_effects_and_hash() -> None:
    compiled = _report().compiled
    assert isinstance(compiled, CompiledPlan)
    send = compiled.steps["send"]
    assert [(p, str(r)) for p, r in send.references] == [
        (("args", "user_id"), "${who.id}"),
        (("args", "token"), "${who.token}"),
        (("args", "note", "$first", 0), "${who.id}"),
        (("when", "exists"), "${who.id}"),
    ]
    assert send.reads == {"who"}
    assert [str(r) for r in compiled.steps["tags"].references_under("args")] == ["${item}"]
    assert compiled.steps["tags"].reads == {"who"}  # item is the fan-out's, not a step
    assert compiled.effects == effects_of(compiled.plan.steps, compiled.registry)
    assert compiled.hash == compiled.plan.fresh_hash()
    assert compiled.priority() == {"who": 2.0, "send": 1.0, "tags": 1.0}


def test_a_run_from_the_compiled_plan_parses_nothing_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Redactor, provenance (a security policy is on), the approval request, argument fillers,
    ``$first``, ``when`` and the fan-out all read the compiled plan's parsed strings."""
    report = _report()
    parsed: list[str] = []
    real = refs._parse_template

    def counting(text: str) -> Any:
        parsed.append(text)
        return real(text)

    monkeypatch.setattr(refs, "_parse_template", counting)
    CALLS.clear()
    execution = planrail.prepare(report.compiled, TOOLS, security=SecurityPolicy(), approve=True)
    execution.approval_request().view()
    result = asyncio.run(execution.run())
    assert result.status == "succeeded", result
    assert result.output == {"sent": True, "tags": ["A", "B"]}
    assert ("notify", ("u-ana", "hello u-ana")) in CALLS
    assert parsed == []
    redactor = execution.redactor
    assert redactor is not None  # it found who.token's path into a secret parameter
    assert redactor.text("the token is tok-123456") == "the token is ***"


def test_a_plan_given_as_text_is_validated_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """``planrail.run(plan)``: the strings are parsed by validation, and never by the run."""
    parsed: list[str] = []
    real = refs._parse_template
    monkeypatch.setattr(refs, "_parse_template", lambda t: parsed.append(t) or real(t))
    result = planrail.run(PLAN, TOOLS, approve=True)
    assert result.status == "succeeded"
    assert len(parsed) == len(set(parsed))  # each distinct string parsed exactly once


def test_a_compiled_plan_checked_otherwise_is_validated_again() -> None:
    """Validated without tools (or under other options), a compiled plan is not trusted by a
    run with tools: the run's own validation finds what the first one could not."""
    bad = {"goal": "g", "steps": [{"id": "who", "tool": "lookup", "args": {"usr": "ana"}}]}
    loose = check_plan(bad)  # no tools: arguments unchecked
    assert loose.valid
    assert loose.compiled is not None
    with pytest.raises(PlanValidationError) as caught:
        planrail.prepare(loose.compiled, TOOLS, approve=True)
    assert {i.code for i in caught.value.issues} >= {"unknown_argument", "missing_argument"}


def test_an_unvalidated_plan_is_compiled_by_the_execution() -> None:
    plan = _report().plan
    assert plan is not None
    execution = planrail.Execution(plan, TOOLS, approve=True)
    assert execution.compiled.plan is plan
    assert set(execution.compiled.steps) == {"who", "send", "tags"}
    assert asyncio.run(execution.run()).status == "succeeded"
