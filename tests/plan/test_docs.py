"""docs/plan-format.md stays true: its examples are the validator's real output."""

from __future__ import annotations

import pytest

from planrail.plan.loader import PlanLimits
from planrail.plan.model import Step
from planrail.plan.validate import CODES

from .helpers import DATA, PLANS, load_script

DOCS = DATA.parent.parent / "docs" / "plan-format.md"


examples = load_script(PLANS / "doc_examples.py", "plan_doc_examples")


@pytest.mark.parametrize(("code", "name"), examples.ERRORS)
def test_each_error_example_in_the_docs_is_current(code: str, name: str) -> None:
    """The docs show each code's miniature plan and exactly the issue the validator reports."""
    text = DOCS.read_text(encoding="utf-8")
    errors, _ = examples.issues(name)
    assert [i.code for i in errors] == [code]
    assert examples.section(code, name) in text


def test_warning_examples_in_the_docs_are_current() -> None:
    """The warning examples are the validator's real warnings."""
    text = DOCS.read_text(encoding="utf-8")
    for code, name in examples.WARNINGS:
        assert examples.section(code, name, warnings=True) in text


def test_docs_name_every_code_every_step_field_and_every_limit() -> None:
    """Every stable code, every Step field and every PlanLimits field is documented."""
    text = DOCS.read_text(encoding="utf-8")
    for code in (*CODES, "normalized", "unchecked_reference", "duplicate_dependency",
                 "empty_plan", "approval_not_waived"):  # fmt: skip
        assert f"`{code}`" in text, code
    for field in Step.model_fields:
        assert f"| `{field}` |" in text, field
    for field in PlanLimits.__dataclass_fields__:
        assert f"| `{field}` |" in text, field
