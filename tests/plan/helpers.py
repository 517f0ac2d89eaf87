"""Paths and small helpers shared by the plan-layer tests."""

from __future__ import annotations

from pathlib import Path

from planrail.plan.validate import ValidationReport

DATA = Path(__file__).resolve().parent.parent / "data"
PLANS = DATA / "plans"
TASKBENCH = DATA / "taskbench"


def codes(report: ValidationReport) -> set[str]:
    """The error codes of a report, as a set."""
    return {issue.code for issue in report.errors}


def warning_codes(report: ValidationReport) -> set[str]:
    """The warning codes of a report, as a set."""
    return {issue.code for issue in report.warnings}
