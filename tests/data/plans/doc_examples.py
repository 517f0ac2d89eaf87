"""Print the error-code examples of docs/plan-format.md: each miniature plan and its issues.

Run: ``python tests/data/plans/doc_examples.py`` (from the repository root). The messages are
the validator's own output; ``tests/plan/test_docs.py`` checks the docs still show them.
"""

from __future__ import annotations

from pathlib import Path

from planrail.plan.catalog import load_catalog
from planrail.plan.validate import Issue, validate

HERE = Path(__file__).resolve().parent

ERRORS = (
    ("parse_error", "parse_error.json"),
    ("schema_error", "schema_error.json"),
    ("invalid_id", "invalid_id.json"),
    ("duplicate_id", "duplicate_id.json"),
    ("unknown_dependency", "unknown_dependency.json"),
    ("self_dependency", "self_dependency.json"),
    ("cycle", "cycle.yaml"),
    ("invalid_reference", "invalid_reference.json"),
    ("unknown_step_reference", "unknown_step_reference.json"),
    ("undeclared_dependency", "undeclared_dependency.json"),
    ("unknown_tool", "unknown_tool.json"),
    ("invalid_action", "invalid_action.json"),
    ("missing_argument", "missing_argument.json"),
    ("unknown_argument", "unknown_argument.json"),
    ("unknown_output_field", "unknown_output_field.json"),
    ("type_mismatch", "type_mismatch.json"),
    ("limit_exceeded", "limit_exceeded.yaml"),
)
WARNINGS = (("normalized, duplicate_dependency, unchecked_reference", "warnings.yaml"),
            ("empty_plan", "empty_plan.json"))  # fmt: skip


def issues(name: str) -> tuple[list[Issue], list[Issue]]:
    report = validate(HERE / name, load_catalog(HERE / "tools.catalog.json"))
    return report.errors, report.warnings


def section(code: str, name: str, warnings: bool = False) -> str:
    lang = "json" if name.endswith(".json") else "yaml"
    text = (HERE / name).read_text(encoding="utf-8").rstrip("\n")
    errors, warns = issues(name)
    lines = [f"#### `{code}`", "", f"`tests/data/plans/{name}`:", "", f"```{lang}", text, "```",
             "", "```text"]  # fmt: skip
    lines.extend(str(i) for i in (warns if warnings else errors))
    lines.append("```")
    return "\n".join(lines)


def main() -> None:
    for code, name in ERRORS:
        print(section(code, name) + "\n")
    for code, name in WARNINGS:
        print(section(code, name, warnings=True) + "\n")


if __name__ == "__main__":
    main()
