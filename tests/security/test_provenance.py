"""Static provenance: the sources every argument of every step can carry."""

from __future__ import annotations

from typing import Any

import pytest

from planrail.plan.provenance import USER, Provenance, Source, analyze, check_pattern, labels

from .kit import World, plan_of

R = World().registry()


def _arg_labels(data: dict[str, Any], step: str) -> dict[str, list[str]]:
    plan = plan_of(data, R)
    prov = analyze(plan, R)
    return {k: labels(v) for k, v in prov.args(plan.step(step)).items()}


def test_literals_come_from_the_user_and_references_from_their_producer() -> None:
    """A literal argument is ``user``; ``"${doc.payee}"`` carries what ``doc``'s output
    carries: ``tool:read_document``, and ``user`` for the path the user chose."""
    data = {
        "steps": [
            {"id": "doc", "tool": "read_document", "args": {"path": "bill.pdf"}},
            {
                "id": "mail",
                "tool": "send_email",
                "args": {"to": "${doc.payee}", "body": "Paid ${doc.amount} today"},
                "depends_on": ["doc"],
            },
        ]
    }
    assert _arg_labels(data, "doc") == {"path": ["user"]}
    assert _arg_labels(data, "mail") == {
        "to": ["tool:read_document", "user"],
        "body": ["tool:read_document", "user"],
    }


def test_an_llm_answer_inherits_the_sources_of_its_inputs() -> None:
    """An ``llm_call`` that read a document carries ``llm:STEP`` *and* the document's tool, so
    laundering attacker text through a model does not clean it."""
    data = {
        "steps": [
            {"id": "doc", "tool": "read_document", "args": {"path": "bill.pdf"}},
            {
                "id": "extract",
                "action": "llm_call",
                "prompt": "Who is the payee of: ${doc.note}",
                "depends_on": ["doc"],
            },
            {
                "id": "pay",
                "tool": "pay_bill",
                "args": {"payee": "${extract}", "amount": 1},
                "depends_on": ["extract"],
            },
        ]
    }
    assert _arg_labels(data, "pay") == {
        "payee": ["llm:extract", "tool:read_document", "user"],
        "amount": ["user"],
    }


def test_a_tool_output_carries_the_sources_of_its_arguments() -> None:
    """``lookup(name=${doc.payee})`` answers what the document chose: its output carries
    ``tool:read_document`` as well as ``tool:lookup``."""
    data = {
        "steps": [
            {"id": "doc", "tool": "read_document", "args": {"path": "bill.pdf"}},
            {
                "id": "who",
                "tool": "lookup",
                "args": {"name": "${doc.payee}"},
                "depends_on": ["doc"],
            },
            {
                "id": "mail",
                "tool": "send_email",
                "args": {"to": "${who.address}", "body": "hi"},
                "depends_on": ["who"],
            },
        ]
    }
    assert _arg_labels(data, "mail")["to"] == ["tool:lookup", "tool:read_document", "user"]


def test_item_carries_the_sources_of_the_for_each_list() -> None:
    """``${item.payee}`` in a fan-out over a tool's list derives from that tool."""
    data = {
        "steps": [
            {"id": "all", "tool": "bills", "args": {"month": "May"}},
            {
                "id": "pay",
                "tool": "pay_bill",
                "for_each": "${all}",
                "args": {"payee": "${item.payee}", "amount": 5},
                "depends_on": ["all"],
            },
        ]
    }
    assert _arg_labels(data, "pay") == {"payee": ["tool:bills", "user"], "amount": ["user"]}


def test_first_counts_every_candidate_statically_and_the_chosen_one_at_run_time() -> None:
    """``$first`` is the union of its candidates before the run; given which steps have an
    output, only the candidate the resolver will pick."""
    data = {
        "steps": [
            {"id": "doc", "tool": "read_document", "args": {"path": "bill.pdf"}},
            {"id": "who", "tool": "lookup", "args": {"name": "Alice"}},
            {
                "id": "pay",
                "tool": "pay_bill",
                "join": "all_finished",
                "args": {"payee": {"$first": ["${doc.payee}", "${who.address}"]}, "amount": 1},
                "depends_on": ["doc", "who"],
            },
        ]
    }
    plan = plan_of(data, R)
    prov = analyze(plan, R)
    step = plan.step("pay")
    assert labels(prov.args(step)["payee"]) == ["tool:lookup", "tool:read_document", "user"]
    runtime = prov.args(step, available={"who"})["payee"]
    assert labels(runtime) == ["tool:lookup", "user"]


def test_fallbacks_and_conditions_are_tracked() -> None:
    """A fallback tool's source joins the step's output; a fallback value adds ``user``; a
    ``condition_check`` output carries its condition's sources."""
    data = {
        "steps": [
            {
                "id": "doc",
                "tool": "read_document",
                "args": {"path": "bill.pdf"},
                "fallback": {"tool": "lookup", "args": {"name": "fallback"}},
            },
            {
                "id": "big",
                "action": "condition_check",
                "condition": {"gt": ["${doc.amount}", 100]},
                "depends_on": ["doc"],
            },
            {
                "id": "inbox",
                "tool": "read_inbox",
                "args": {"folder": "in"},
                "fallback": {"value": {"latest": "", "sender": ""}},
            },
        ]
    }
    plan = plan_of(data, R)
    prov = analyze(plan, R)
    assert labels(prov.output("doc")) == ["tool:lookup", "tool:read_document", "user"]
    assert labels(prov.output("big")) == ["tool:lookup", "tool:read_document", "user"]
    assert labels(prov.output("inbox")) == ["tool:read_inbox", "user"]
    assert Source("tool", "read_inbox", "private") in prov.output("inbox")


def test_sensitivity_travels_with_the_source() -> None:
    """A ``private`` tool's output stays ``private`` through an LLM step."""
    data = {
        "steps": [
            {"id": "inbox", "tool": "read_inbox", "args": {"folder": "in"}},
            {
                "id": "sum",
                "action": "llm_call",
                "prompt": "Summarise ${inbox}",
                "depends_on": ["inbox"],
            },
        ]
    }
    plan = plan_of(data, R)
    out = analyze(plan, R).output("sum")
    assert any(s.matches("private") for s in out)
    assert not any(s.matches("secret") for s in out)


def test_a_ten_thousand_step_chain_is_analysed_without_recursion() -> None:
    """Provenance walks iteratively: a 10,000-step chain is fine, and sets stay small because
    sources are per tool, not per step."""
    steps: list[dict[str, Any]] = [{"id": "s0", "tool": "lookup", "args": {"name": "x"}}]
    for i in range(1, 10_000):
        steps.append(
            {
                "id": f"s{i}",
                "tool": "lookup",
                "args": {"name": f"${{s{i - 1}.address}}"},
                "depends_on": [f"s{i - 1}"],
            }
        )
    plan = plan_of({"steps": steps}, R)
    prov = Provenance(plan.by_id, R)
    assert labels(prov.output("s9999")) == ["tool:lookup", "user"]


@pytest.mark.parametrize(
    ("source", "pattern", "expected"),
    [
        (USER, "user", True),
        (USER, "external", False),
        (USER, "*", True),
        (Source("tool", "read_document"), "tool", True),
        (Source("tool", "read_document"), "tool:read_*", True),
        (Source("tool", "read_document"), "tool:pay_*", False),
        (Source("tool", "read_document"), "external", True),
        (Source("tool", "read_document"), "llm", False),
        (Source("llm", "extract"), "llm:extract", True),
        (Source("llm", "extract"), "external", True),
        (Source("tool", "inbox", "private"), "private", True),
        (Source("tool", "vault", "secret"), "private", True),
        (Source("tool", "vault", "secret"), "secret", True),
        (Source("tool", "inbox", "private"), "secret", False),
    ],
)
def test_source_patterns(source: Source, pattern: str, expected: bool) -> None:
    """Each pattern word of a rule's ``from`` names exactly the sources it says it does."""
    assert source.matches(pattern) is expected


@pytest.mark.parametrize("pattern", ["", "tools", "tool:", "file:x", "USER"])
def test_malformed_patterns_are_reported(pattern: str) -> None:
    """An unknown pattern is an error naming the accepted words, not a silent non-match."""
    assert check_pattern(pattern) is not None
