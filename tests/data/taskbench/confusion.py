"""Validate every TaskBench plan and print labels versus validator codes as Markdown tables.

Run: ``python tests/data/taskbench/confusion.py`` (from the repository root).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from planrail.plan.catalog import load_catalog
from planrail.plan.repair import repair
from planrail.plan.tools import ToolRegistry
from planrail.plan.validate import validate

HERE = Path(__file__).resolve().parent
DOMAINS = ("huggingface", "multimedia")
LABEL_KEYS = ("source", "issues", "inconsistent")
LABELS = ("cycle", "self_ref", "dangling_ref", "unknown_tool", "ambiguous_link", "inconsistent")
UNLABELLED = "(no label)"
COLUMNS = (
    "cycle",
    "self_dependency",
    "unknown_step_reference",
    "unknown_tool",
    "undeclared_dependency",
    "missing_argument",
    "unknown_argument",
    "type_mismatch",
)


@dataclass(frozen=True)
class Case:
    """One TaskBench plan: its labels, the plan without them, and the validator's codes."""

    domain: str
    source: str
    labels: frozenset[str]
    plan: dict[str, Any]
    codes: frozenset[str]
    warnings: frozenset[str] = frozenset()


def catalogs() -> dict[str, ToolRegistry]:
    return {d: ToolRegistry(load_catalog(HERE / f"{d}.catalog.json")) for d in DOMAINS}


def cases() -> Iterator[Case]:
    """Every plan of both domains, validated against its domain's catalog."""
    tools = catalogs()
    for domain in DOMAINS:
        with (HERE / f"{domain}.plans.jsonl").open(encoding="utf-8") as lines:
            for line in lines:
                raw = json.loads(line)
                labels = set(raw.get("issues", []))
                if raw.get("inconsistent"):
                    labels.add("inconsistent")
                plan = {k: v for k, v in raw.items() if k not in LABEL_KEYS}
                report = validate(plan, tools[domain])
                yield Case(
                    domain,
                    raw["source"],
                    frozenset(labels),
                    plan,
                    frozenset(i.code for i in report.errors),
                    frozenset(i.code for i in report.warnings),
                )


def confusion(all_cases: list[Case]) -> dict[str, Counter[str]]:
    """Per label (plus unlabelled): how many plans, how many valid, how many got each code."""
    table: dict[str, Counter[str]] = {label: Counter() for label in (*LABELS, UNLABELLED)}
    for case in all_cases:
        for label in case.labels or {UNLABELLED}:
            row = table.setdefault(label, Counter())
            row["plans"] += 1
            if not case.codes:
                row["valid"] += 1
            for code in case.codes:
                row[code] += 1
    return table


def markdown(all_cases: list[Case]) -> str:
    table = confusion(all_cases)
    extra = sorted({c for row in table.values() for c in row} - {"plans", "valid", *COLUMNS})
    columns = [*COLUMNS, *extra]
    head = ["label", "plans", "valid", *(f"`{c}`" for c in columns)]
    out = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for label, row in table.items():
        if not row["plans"]:
            continue
        name = label if label == UNLABELLED else f"`{label}`"
        cells = [name, str(row["plans"]), str(row["valid"]), *(str(row[c]) for c in columns)]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


WARNINGS = ("placeholder_literal", "side_effect_race", "needless_dependency", "unchecked_reference")


def warnings_markdown(all_cases: list[Case]) -> str:
    """Per label: how many plans got each warning code."""
    head = ["label", "plans", *(f"`{c}`" for c in WARNINGS)]
    out = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    rows: dict[str, Counter[str]] = {label: Counter() for label in (*LABELS, UNLABELLED)}
    for case in all_cases:
        for label in case.labels or {UNLABELLED}:
            rows[label]["plans"] += 1
            for code in case.warnings:
                rows[label][code] += 1
    for label, row in rows.items():
        if row["plans"]:
            name = label if label == UNLABELLED else f"`{label}`"
            cells = [name, str(row["plans"]), *(str(row[c]) for c in WARNINGS)]
            out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


_CRITICAL = re.compile(r"critical path: (\d+) steps with .* (\d+) without")


def lint_summary() -> str:
    """The two lints on every plan, with the catalogs as published (no side-effect hints, so
    MCP's default: every tool may change the world) and with every tool read-only (TaskBench's
    tools are model inferences), and the critical path with and without needless edges."""
    out = [
        "| tools | plans | with a data-less edge | `needless_dependency` plans | edges"
        " | critical path with → without (steps, those plans) | `side_effect_race` plans"
        " | races |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for variant in ("as published", "read-only"):
        plans = dataless = needless_plans = edges = races_plans = races = 0
        cp_with = cp_without = 0
        for domain, registry in catalogs().items():
            if variant == "read-only":
                registry = ToolRegistry(
                    dataclasses.replace(t, side_effects="none") for t in registry
                )
            with (HERE / f"{domain}.plans.jsonl").open(encoding="utf-8") as lines:
                for line in lines:
                    raw = json.loads(line)
                    plan = {k: v for k, v in raw.items() if k not in LABEL_KEYS}
                    plans += 1
                    dataless += _has_dataless_edge(plan)
                    report = validate(plan, registry)
                    found = [w for w in report.warnings if w.code == "needless_dependency"]
                    race = [w for w in report.warnings if w.code == "side_effect_race"]
                    if found:
                        needless_plans += 1
                        edges += len(found)
                        m = _CRITICAL.search(found[0].message)
                        assert m is not None
                        cp_with += int(m.group(1))
                        cp_without += int(m.group(2))
                    races_plans += bool(race)
                    races += len(race)
        out.append(
            f"| {variant} | {plans} | {dataless} | {needless_plans} | {edges}"
            f" | {cp_with} → {cp_without} | {races_plans} | {races} |"
        )
    return "\n".join(out)


def _has_dataless_edge(plan: dict[str, Any]) -> bool:
    for step in plan["steps"]:
        used = set(re.findall(r"\$\{(\w+)", json.dumps(step.get("args", {}))))
        if any(d not in used and d != step["id"] for d in step.get("depends_on") or []):
            return True
    return False


def repair_summary(all_cases: list[Case]) -> str:
    """How many plans :func:`repair` turns valid, per label group."""
    tools = catalogs()
    rows: list[str] = ["| plans | count | valid before | valid after repair | edges added |",
                       "|---|---:|---:|---:|---:|"]  # fmt: skip
    groups = {
        "`inconsistent`": [c for c in all_cases if "inconsistent" in c.labels],
        "all": all_cases,
    }
    for name, group in groups.items():
        before = sum(1 for c in group if not c.codes)
        after = added = 0
        for c in group:
            result = repair(c.plan, tools[c.domain])
            after += result.valid
            added += sum("depends_on: added" in ch for ch in result.changes)
        rows.append(f"| {name} | {len(group)} | {before} | {after} | {added} |")
    return "\n".join(rows)


def main() -> None:
    all_cases = list(cases())
    for domain in DOMAINS:
        subset = [c for c in all_cases if c.domain == domain]
        print(f"### {domain} ({len(subset)} plans)\n")
        print(markdown(subset) + "\n")
    print(f"### both domains ({len(all_cases)} plans)\n")
    print(markdown(all_cases) + "\n")
    print("### warnings, both domains\n")
    print(warnings_markdown(all_cases) + "\n")
    print("### lints\n")
    print(lint_summary() + "\n")
    print("### repair\n")
    print(repair_summary(all_cases))


if __name__ == "__main__":
    main()
