"""The validator on 984 real LLM-written plans (TaskBench, CodeLlama-13b) against their labels."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from planrail.plan.repair import repair

from .helpers import TASKBENCH, load_script

confusion = load_script(TASKBENCH / "confusion.py", "taskbench_confusion")


@pytest.fixture(scope="module")
def cases() -> list[Any]:
    """Every TaskBench plan with its labels and the codes the validator gives it."""
    return list(confusion.cases())


# converter label → the code the validator must give that plan (and only such plans)
LABEL_TO_CODE = {
    "cycle": "cycle",
    "unknown_tool": "unknown_tool",
    "self_ref": "self_dependency",
    "dangling_ref": "unknown_step_reference",
}


def test_every_plan_is_read(cases: list[Any]) -> None:
    """Both domains load completely: 497 huggingface and 487 multimedia plans."""
    counts = {d: sum(1 for c in cases if c.domain == d) for d in confusion.DOMAINS}
    assert counts == {"huggingface": 497, "multimedia": 487}
    assert all(set(c.plan) == {"goal", "steps"} for c in cases)


@pytest.mark.parametrize(("label", "code"), sorted(LABEL_TO_CODE.items()))
def test_each_labelled_plan_gets_its_code(label: str, code: str, cases: list[Any]) -> None:
    """Every plan the converter labelled ``label`` is rejected with ``code``."""
    labelled = [c for c in cases if label in c.labels]
    assert labelled, label
    missed = [c.source for c in labelled if code not in c.codes]
    assert missed == []


@pytest.mark.parametrize(("label", "code"), sorted(LABEL_TO_CODE.items()))
def test_the_code_appears_only_on_plans_with_the_label(
    label: str, code: str, cases: list[Any]
) -> None:
    """Conversely the validator raises ``code`` on no plan without the label (no false alarms)."""
    extra = [c.source for c in cases if code in c.codes and label not in c.labels]
    assert extra == []


def test_unlabelled_plans_fail_only_on_argument_checks(cases: list[Any]) -> None:
    """Plans with no label are rejected only for arguments the converter does not label.

    The LLM often wrote ``arg2`` or ``input_file`` for a tool whose only parameter is ``text``,
    or wrapped a string as ``{"name": ...}``; the catalog's input schemas make those errors.
    """
    unlabelled = [c for c in cases if not c.labels]
    assert len(unlabelled) == 630
    codes = set().union(*(c.codes for c in unlabelled))
    assert codes == {"missing_argument", "unknown_argument", "type_mismatch"}
    assert sum(1 for c in unlabelled if not c.codes) == 359


def test_inconsistent_plans_declare_every_reference(cases: list[Any]) -> None:
    """No converted plan uses an output without declaring it, so none is undeclared_dependency.

    ``inconsistent`` flags the original prediction (its link list disagreed with its
    arguments); the conversion already put every referenced step into ``depends_on``. This
    test pins that reading of the data with an independent regex oracle.
    """
    ref = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)")
    for case in cases:
        ids = {s["id"] for s in case.plan["steps"]}
        for step in case.plan["steps"]:
            used = set(ref.findall(json.dumps(step["args"]))) & ids - {step["id"]}
            assert used <= set(step["depends_on"]), case.source
        assert "undeclared_dependency" not in case.codes


def test_confusion_table_is_markdown_with_every_label(cases: list[Any]) -> None:
    """The confusion script renders one row per label present, with counts that add up."""
    table = confusion.markdown(cases)
    lines = table.splitlines()
    assert lines[0].startswith("| label | plans | valid |")
    for label in ("`cycle`", "`self_ref`", "`dangling_ref`", "`unknown_tool`", "`inconsistent`"):
        assert any(line.startswith(f"| {label} |") for line in lines), label
    rows = confusion.confusion(cases)
    assert rows["unknown_tool"]["plans"] == rows["unknown_tool"]["unknown_tool"] == 294
    assert rows["(no label)"]["plans"] == 630


def test_confusion_table_in_the_docs_is_current(cases: list[Any]) -> None:
    """docs/plan-format.md shows exactly the table the script prints for both domains."""
    docs = TASKBENCH.parent.parent.parent / "docs" / "plan-format.md"
    assert confusion.markdown(cases) in docs.read_text(encoding="utf-8")


def test_repair_changes_nothing_it_cannot_justify_on_real_plans(cases: list[Any]) -> None:
    """On the real plans repair adds no edge (all references are declared) and keeps verdicts."""
    tools = confusion.catalogs()
    inconsistent = [c for c in cases if "inconsistent" in c.labels]
    assert len(inconsistent) == 37
    valid_after = 0
    for case in inconsistent:
        result = repair(case.plan, tools[case.domain])
        assert result.changes == []
        assert {i.code for i in result.report.errors} == case.codes
        valid_after += result.valid
    assert valid_after == 7


def test_repair_restores_stripped_reference_edges_on_real_plans(cases: list[Any]) -> None:
    """Remove every depends_on edge that a reference justifies; repair puts each one back.

    Where a restored edge would close a cycle (a few plans loop through pure ordering edges),
    repair leaves it out, and the plan keeps exactly its original codes plus
    ``undeclared_dependency``.
    """
    tools = confusion.catalogs()
    ref = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)")
    restored = 0
    for case in cases:
        stripped = json.loads(json.dumps(case.plan))
        removed = 0
        for step in stripped["steps"]:
            used = set(ref.findall(json.dumps(step["args"])))
            kept = [d for d in step["depends_on"] if d not in used]
            removed += len(step["depends_on"]) - len(kept)
            step["depends_on"] = kept
        result = repair(stripped, tools[case.domain])
        found = {i.code for i in result.report.errors}
        if "cycle" in case.codes:
            assert found - {"undeclared_dependency"} == case.codes, case.source
        else:
            assert found == case.codes, case.source
            original = {s["id"]: set(s["depends_on"]) for s in case.plan["steps"]}
            repaired = {s["id"]: set(s["depends_on"]) for s in result.plan_data["steps"]}
            assert repaired == original, case.source
            restored += removed
    assert restored > 1000


def test_the_warnings_table_in_the_docs_is_current(cases: list[Any]) -> None:
    """docs/plan-format.md shows the new warnings per label exactly as the script prints them."""
    docs = TASKBENCH.parent.parent.parent / "docs" / "plan-format.md"
    assert confusion.warnings_markdown(cases) in docs.read_text(encoding="utf-8")
