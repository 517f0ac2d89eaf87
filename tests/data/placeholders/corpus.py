"""Precision and recall of ``placeholder_literal`` on the placeholder corpus, and its counts on
the TaskBench plans and tool descriptions, as the tables in ``docs/plan-format.md`` show them.

Each corpus line is a string given as an argument to a tool in a small plan (``account`` with
``user_id`` and ``name``, ``s1`` and ``s2`` with one field ``result``), ``placeholder`` says
whether it is one, ``hint`` the reference the message must suggest. A string counts as
flagged when it gets ``placeholder_literal`` (or, for ``${1}``, ``invalid_reference``).

Run: ``python tests/data/placeholders/corpus.py`` (from the repository root).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from planrail.plan.catalog import load_catalog
from planrail.plan.placeholders import find_placeholders
from planrail.plan.tools import ToolRegistry, ToolSpec
from planrail.plan.validate import Issue, validate

HERE = Path(__file__).resolve().parent
TASKBENCH = HERE.parent / "taskbench"
FLAGGING = ("placeholder_literal", "invalid_reference")
LABEL_KEYS = ("source", "issues", "inconsistent")

_RESULT = {"type": "object", "properties": {"result": {"type": "string"}}}
TOOLS = ToolRegistry(
    [
        ToolSpec(
            name="create_account",
            output_schema={
                "type": "object",
                "properties": {"user_id": {"type": "string"}, "name": {"type": "string"}},
            },
        ),
        ToolSpec(name="search", output_schema=_RESULT, side_effects="none"),
        ToolSpec(
            name="send",
            input_schema={
                "type": "object",
                "properties": {
                    "text": {"type": "string"},
                    "price": {"type": "string", "description": "Price in USD"},
                    "body_template": {"type": "string"},
                    "layout": {"type": "string", "format": "template"},
                },
            },
        ),
    ]
)


@dataclass(frozen=True)
class Row:
    """One corpus line and what the validator said about it."""

    text: str
    placeholder: bool
    kind: str
    hint: str | None
    issues: tuple[Issue, ...]

    @property
    def flagged(self) -> bool:
        return bool(self.issues)


def plan_for(text: str, param: str) -> dict[str, Any]:
    return {
        "steps": [
            {"id": "account", "tool": "create_account"},
            {"id": "s1", "tool": "search"},
            {"id": "s2", "tool": "search"},
            {
                "id": "target",
                "tool": "send",
                "args": {param: text},
                "depends_on": ["account", "s1", "s2"],
            },
        ]
    }


def rows() -> list[Row]:
    out = []
    with (HERE / "corpus.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            case = json.loads(line)
            report = validate(plan_for(case["text"], case["param"]), TOOLS)
            issues = tuple(i for i in (*report.errors, *report.warnings) if i.code in FLAGGING)
            out.append(Row(case["text"], case["placeholder"], case["kind"], case["hint"], issues))
    return out


def scores(all_rows: list[Row]) -> dict[str, Any]:
    tp = sum(r.flagged and r.placeholder for r in all_rows)
    fp = sum(r.flagged and not r.placeholder for r in all_rows)
    fn = sum(not r.flagged and r.placeholder for r in all_rows)
    hinted = [r for r in all_rows if r.hint]
    hints_right = sum(
        any(f"did you mean `{r.hint}`" in i.message for i in r.issues) for r in hinted
    )
    return {
        "strings": len(all_rows),
        "placeholders": sum(r.placeholder for r in all_rows),
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "precision": tp / (tp + fp) if tp + fp else 1.0,
        "recall": tp / (tp + fn) if tp + fn else 1.0,
        "hints": len(hinted),
        "hints_right": hints_right,
    }


def taskbench() -> dict[str, Any]:
    """placeholder_literal on the 984 real plans, and on every tool and parameter description."""
    flags: list[str] = []
    strings = 0
    descriptions = 0
    described_flags: list[str] = []
    for domain in ("huggingface", "multimedia"):
        tools = ToolRegistry(load_catalog(TASKBENCH / f"{domain}.catalog.json"))
        with (TASKBENCH / f"{domain}.plans.jsonl").open(encoding="utf-8") as lines:
            for line in lines:
                raw = json.loads(line)
                plan = {k: v for k, v in raw.items() if k not in LABEL_KEYS}
                strings += sum(_count_strings(s.get("args")) for s in plan["steps"])
                report = validate(plan, tools)
                flags += [str(w) for w in report.warnings if w.code == "placeholder_literal"]
        for spec in tools:
            props = spec.input_schema.get("properties", {})
            for text in [spec.description, *(p.get("description", "") for p in props.values())]:
                descriptions += 1
                if find_placeholders(text, step_ids=frozenset({"s1", "s2", "s3"})):
                    described_flags.append(text)
    return {
        "arg_strings": strings,
        "flags": flags,
        "descriptions": descriptions,
        "description_flags": described_flags,
    }


def _count_strings(value: Any) -> int:
    if isinstance(value, str):
        return 1
    if isinstance(value, dict):
        return sum(_count_strings(v) for v in value.values())
    if isinstance(value, list):
        return sum(_count_strings(v) for v in value)
    return 0


def main() -> None:
    all_rows = rows()
    s = scores(all_rows)
    print(
        f"corpus: {s['strings']} strings, {s['placeholders']} placeholders; flagged"
        f" {s['tp']} of them and {s['fp']} others: precision {s['precision']:.2f}, recall"
        f" {s['recall']:.2f}; hints right {s['hints_right']} of {s['hints']}"
    )
    print("\n| string | placeholder | kind | flagged |\n|---|---|---|---|")
    for r in all_rows:
        shown = r.text.replace("|", "\\|").replace("\n", "\\n")
        print(f"| `{shown}` | {'yes' if r.placeholder else 'no'} | {r.kind} |"
              f" {'yes' if r.flagged else 'no'} |")  # fmt: skip
    tb = taskbench()
    print(
        f"\ntaskbench: {len(tb['flags'])} flags in {tb['arg_strings']} argument strings;"
        f" {len(tb['description_flags'])} in {tb['descriptions']} tool/parameter descriptions"
    )
    for flag in tb["flags"]:
        print("  " + flag)


if __name__ == "__main__":
    main()
