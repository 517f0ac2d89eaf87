"""``placeholder_literal``: other reference syntaxes and holes, with the reference meant."""

from __future__ import annotations

from typing import Any

import pytest

from planrail.plan.catalog import load_catalog
from planrail.plan.placeholders import SYNTAXES, find_placeholders
from planrail.plan.tools import ToolRegistry
from planrail.plan.validate import ValidationOptions, check_plan, validate

from .helpers import DATA, PLACEHOLDER_PLAN, PLANS, load_script

DOCS = DATA.parent.parent / "docs" / "plan-format.md"


corpus = load_script(DATA / "placeholders" / "corpus.py", "placeholder_corpus")


@pytest.fixture(scope="module")
def rows() -> list[Any]:
    """The corpus, validated."""
    return list(corpus.rows())


def test_no_near_miss_of_the_corpus_is_flagged(rows: list[Any]) -> None:
    """Prices, markdown, HTML, LaTeX, shell variables, templates a schema asks for: unflagged."""
    assert [r.text for r in rows if r.flagged and not r.placeholder] == []


def test_every_placeholder_is_flagged_except_the_documented_misses(rows: list[Any]) -> None:
    """Each syntax of the issue is caught; the misses are the ones the docs list."""
    missed = [r.text for r in rows if r.placeholder and not r.flagged]
    assert missed == ["Hello {name}", "$user_id", "[[user_id]]", "<<user_id>>", "%(user_id)s"]
    assert all("(missed)" in r.kind for r in rows if r.text in missed)


def test_the_hint_names_the_reference_meant(rows: list[Any]) -> None:
    """Every corpus line with a known step and field gets "did you mean `${...}`?"."""
    s = corpus.scores(rows)
    assert s["hints_right"] == s["hints"] == 20


def test_precision_and_recall_in_the_docs_are_current(rows: list[Any]) -> None:
    """docs/plan-format.md shows the corpus's real precision and recall."""
    s = corpus.scores(rows)
    text = DOCS.read_text(encoding="utf-8")
    assert (
        f"precision **{s['precision']:.2f}**, recall **{s['recall']:.2f}**"
        f" ({s['tp']} of {s['placeholders']} placeholders flagged, {s['fp']} false"
        f" alarms among {s['strings'] - s['placeholders']} near misses)"
    ) in text


def test_the_real_taskbench_plans_flag_only_real_placeholders() -> None:
    """On 984 real plans every flag is a ``<name>`` hole the model left; tool descriptions
    (140 of them) are never flagged."""
    tb = corpus.taskbench()
    assert len(tb["flags"]) == 8
    assert all("(<name> hole)" in f for f in tb["flags"])
    assert tb["description_flags"] == []


ACCOUNT_PLAN = PLACEHOLDER_PLAN


def test_the_message_suggests_the_reference_and_the_missing_edge(catalog: ToolRegistry) -> None:
    """The issue's example: "did you mean `${account.user_id}`?", and depends_on if absent."""
    report = validate(ACCOUNT_PLAN, catalog)
    assert report.valid  # a warning by default
    (issue,) = [w for w in report.warnings if w.code == "placeholder_literal"]
    assert issue.path == "$.steps[1].args.user_id"
    assert "did you mean `${account.user_id}`? (and add 'account' to depends_on)" in issue.message


def test_strict_makes_it_an_error(catalog: ToolRegistry) -> None:
    """``ValidationOptions(strict=True)`` (``--strict``): an error everywhere."""
    report = check_plan(ACCOUNT_PLAN, catalog, options=ValidationOptions(strict=True))
    assert [e.code for e in report.errors] == ["placeholder_literal"]


def test_a_policy_can_make_it_an_error_for_side_effecting_steps_only(
    catalog: ToolRegistry,
) -> None:
    """``placeholders_in_side_effects="error"``: create_subscription (keyed) fails; the same
    text given to a read-only tool stays a warning."""
    options = ValidationOptions(placeholders_in_side_effects="error")
    assert [e.code for e in check_plan(ACCOUNT_PLAN, catalog, options=options).errors] == [
        "placeholder_literal"
    ]
    read_only = {"steps": [{"id": "page", "tool": "fetch", "args": {"url": "{{account.url}}"}}]}
    report = check_plan(read_only, catalog, options=options)
    assert report.valid
    assert [w.code for w in report.warnings] == ["placeholder_literal"]


def test_prompts_fallbacks_and_the_plan_output_are_scanned() -> None:
    """Placeholders in a prompt, a fallback value and the plan's output are reported too."""
    plan = {
        "steps": [{"id": "a", "prompt": "Summarise <doc_text>", "fallback": {"value": "TBD"}}],
        "output": {"summary": "$a.answer"},
    }
    paths = [w.path for w in validate(plan).warnings if w.code == "placeholder_literal"]
    assert sorted(paths) == ["$.output.summary", "$.steps[0].fallback.value", "$.steps[0].prompt"]


def test_references_and_escapes_are_never_placeholders() -> None:
    """Real ``${...}`` references and a ``$${`` escape hold nothing to flag."""
    plan = {
        "steps": [
            {"id": "a", "tool": "t"},
            {"id": "b", "tool": "t", "args": {"x": "${a}", "y": "cost: $${p} for ${a.n}"},
             "depends_on": ["a"]},
        ]
    }  # fmt: skip
    assert [w for w in validate(plan).warnings if w.code == "placeholder_literal"] == []


def test_every_syntax_is_documented() -> None:
    """docs/plan-format.md names each syntax the messages use."""
    text = DOCS.read_text(encoding="utf-8")
    for syntax in SYNTAXES:
        assert f"`{syntax}`" in text or syntax in text, syntax


def test_the_miniature_plans_and_taskbench_catalogs_have_no_placeholders() -> None:
    """The project's own example plans are clean (no noise from the new warning)."""
    catalog = ToolRegistry(load_catalog(PLANS / "tools.catalog.json"))
    for path in sorted(PLANS.glob("*.json")) + sorted(PLANS.glob("*.yaml")):
        if path.name.endswith("catalog.json"):
            continue
        report = validate(path, catalog)
        assert [w for w in report.warnings if w.code == "placeholder_literal"] == [], path.name


@pytest.mark.parametrize(
    ("text", "ids", "syntax"),
    [
        ("{{ a.b }}", set(), "{{…}} template hole"),
        ("$var3$", set(), "$name$ (NESTFUL)"),
        ("$a.b", set(), "$name.field"),
        ("$2", {"step2"}, "$N (LLMCompiler)"),
        ("#E3", set(), "#E1 (ReWOO)"),
        ("<node-2>", set(), "<name> hole"),
        ("{a.b}", {"a"}, "{name} format hole"),
        ("FIXME", set(), "TBD-style sentinel"),
    ],
)
def test_each_syntax_is_found(text: str, ids: set[str], syntax: str) -> None:
    """find_placeholders names the syntax of each kind."""
    assert [h.syntax for h in find_placeholders(text, step_ids=frozenset(ids))] == [syntax]
