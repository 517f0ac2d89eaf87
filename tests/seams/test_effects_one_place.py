"""One module answers "does this step change the world?": :mod:`planrail.plan.effects`."""

from __future__ import annotations

import ast
from pathlib import Path

import planrail
from planrail.plan.effects import step_effect, tool_effect
from planrail.plan.model import Step
from planrail.plan.tools import ToolRegistry, ToolSpec

SRC = Path(planrail.__file__).parent
DECIDES = {"side_effects", "requires_approval"}
# Where these fields are defined, loaded from catalogs, or decided: nowhere else may decide.
OWNERS = {"plan/effects.py", "plan/tools.py", "plan/catalog.py", "plan/model.py"}


def _decisions(tree: ast.AST) -> list[int]:
    """Lines that compare a side-effect field or read ``requires_approval``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            parts = [node.left, *node.comparators]
            if any(isinstance(p, ast.Attribute) and p.attr in DECIDES for p in parts):
                found.append(node.lineno)
        elif isinstance(node, ast.Attribute) and node.attr == "requires_approval":
            found.append(node.lineno)
    return found


def test_no_module_but_effects_decides_what_changes_the_world() -> None:
    """No module outside plan/effects.py compares ``side_effects`` or reads
    ``requires_approval``: the executor, checkpoints, the security guard, the CLI, the agent
    and streaming all ask :func:`step_effect` (six modules used to decide on their own)."""
    offenders = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel in OWNERS:
            continue
        lines = _decisions(ast.parse(path.read_text(encoding="utf-8")))
        if lines:
            offenders[rel] = lines
    assert offenders == {}


def test_the_rules_for_unknown_tools_waivers_and_fallbacks() -> None:
    """Unknown tools are unsafe and need approval; a tool's waiver holds unless the step asks,
    and a step's own waiver is no waiver;
    a read-only step that asks for approval may not start early; a fallback's tool counts."""
    registry = ToolRegistry(
        [
            ToolSpec("read", side_effects="none"),
            ToolSpec("pay", side_effects="unsafe"),
            ToolSpec("log", side_effects="keyed", requires_approval=False),
        ]
    )

    def step(**data: object) -> Step:
        return Step.model_validate({"id": "s", **data})

    unknown = step_effect(step(tool="nope"), registry)
    assert (unknown.side_effects, unknown.needs_approval, unknown.may_rerun) == (
        "unsafe",
        True,
        False,
    )
    assert step_effect(step(tool="read"), registry).may_start_early
    asks = step_effect(step(tool="read", requires_approval=True), registry)
    assert asks.needs_approval
    assert not asks.may_start_early
    assert not asks.changes_world
    waived = step_effect(step(tool="log"), registry)
    assert waived.changes_world
    assert not waived.needs_approval
    assert waived.may_rerun
    # a step cannot waive approval (its requires_approval: false counts as unset)
    assert step_effect(step(tool="pay", requires_approval=False), registry).needs_approval
    assert not step_effect(step(tool="read", requires_approval=False), registry).needs_approval
    assert step_effect(step(tool="log", requires_approval=True), registry).needs_approval
    fallback = step_effect(step(tool="read", fallback={"tool": "pay", "args": {}}), registry)
    assert fallback.side_effects == "unsafe"
    assert fallback.needs_approval
    llm = step_effect(step(action="llm_call", prompt="hi"), registry)
    assert not llm.changes_world
    assert llm.may_start_early
    assert tool_effect(None).needs_approval
