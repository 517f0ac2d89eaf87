"""Paths and small helpers shared by the plan-layer tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

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


def load_script(path: Path, name: str) -> ModuleType:
    """Import a script under ``tests/data`` (not a package) as module ``name``."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


# A placeholder literal in a side-effecting step (create_subscription is keyed).
PLACEHOLDER_PLAN: dict[str, Any] = {
    "steps": [
        {"id": "account", "tool": "create_account", "args": {"name": "A", "email": "a@x"}},
        {
            "id": "subscription",
            "tool": "create_subscription",
            "args": {"user_id": "{{account.user_id}}", "plan": "pro"},
        },
    ]
}
