"""What the planner says to the model: the instructions, the catalog, the schema, the repairs.

Everything here is a pure function of its arguments, so the exact prompts are easy to test
and to read in ``docs/planning.md``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from planrail.llm.base import Message
from planrail.plan.tools import ToolRegistry
from planrail.plan.validate import Issue
from planrail.planner.schema import DEFAULT_MAX_STEPS, STAGE_SCHEMA
from planrail.planner.schema import plan_schema as _plan_schema

__all__ = [
    "PLANNER_INSTRUCTIONS",
    "STAGE_SCHEMA",
    "catalog_text",
    "plan_schema",
    "planning_messages",
    "repair_message",
    "replan_messages",
]

PLANNER_INSTRUCTIONS = """\
You are a planner. You do not do the work yourself: you write a plan that a program executes.
A plan is a JSON object {"goal": string, "steps": [step, ...], "output": optional,
"stages": optional}.

Each step is an object:
- "id": a unique name matching ^[A-Za-z_][A-Za-z0-9_]{0,63}$ (e.g. "fetch_user").
- "action": "tool_call" to call one of the tools below, or "llm_call" to ask a language model.
- For "tool_call": "tool" (exactly one of the tool names below) and "args" (an object that
  follows that tool's input schema).
- For "llm_call": "prompt" (the instruction for the model) and, when later steps need fields
  of its answer, "output_schema" (a JSON Schema of the answer).
- "depends_on": the ids of every step this step needs to have finished first.

To use the output of an earlier step, write a reference: "${step_id}" is its whole output,
"${step_id.field}" a field of it, "${step_id.items.0.name}" walks into lists and objects. Only
reference fields that the producing tool's output schema (or the step's output_schema)
declares. Every step you reference MUST be listed in that step's "depends_on". A string that
is exactly one reference keeps the value's type; references inside longer text become text.
Never invent a value that a tool should produce: reference it. Literal values come only from
the goal. Steps that do not depend on each other run in parallel, so do not add needless
dependencies. "output" maps names to references: what the plan returns.

For a long task, cut the plan into stages, in the order they are reached: "stages" is a list of
{"id": a name like a step id, "goal": the sub-goal this stage must reach, "steps": the ids of
its steps, "confirm": true to have the finished stages checked against their sub-goals before
this stage starts}. A step is in at most one stage, and no step may depend on a step of a
later stage. Each model step sees its own stage's sub-goal. Leave "stages" out for short plans.

Answer with the plan as one JSON object and nothing else."""


def plan_schema(
    registry: ToolRegistry, *, llm_steps: bool = True, max_steps: int = DEFAULT_MAX_STEPS
) -> dict[str, Any]:
    """The JSON Schema the planner asks the model to follow: one step shape per tool, each
    with that tool's argument schema (see :mod:`planrail.planner.schema`)."""
    return _plan_schema(registry, llm_steps=llm_steps, max_steps=max_steps)


def catalog_text(registry: ToolRegistry) -> str:
    """The tools as the model sees them: name, description, input and output schemas."""
    entries = []
    for spec in registry:
        entry: dict[str, Any] = {
            "name": spec.name,
            "description": spec.description,
            "input_schema": spec.input_schema,
            "output_schema": spec.output_schema,
            "side_effects": spec.side_effects,
        }
        entries.append(entry)
    return json.dumps(entries, indent=1, ensure_ascii=False)


def _system(registry: ToolRegistry, instructions: str) -> Message:
    return Message("system", f"{instructions}\n\nTools:\n{catalog_text(registry)}")


def planning_messages(
    goal: str, registry: ToolRegistry, *, instructions: str = PLANNER_INSTRUCTIONS
) -> list[Message]:
    """The first request: instructions and catalog, then the goal."""
    return [_system(registry, instructions), Message("user", f"Goal: {goal}\n\nWrite the plan.")]


def _issue_line(issue: Issue) -> str:
    where = f"step '{issue.step}'" if issue.step else "the plan"
    return f"- [{issue.code}] {where} at {issue.path}: {issue.message}"


def repair_message(
    issues: Sequence[Issue], changes: Sequence[str], repaired: Mapping[str, Any] | None
) -> Message:
    """The follow-up after an invalid answer: every issue, what was fixed, the plan so far."""
    lines = ["Your plan cannot be executed. The validator found these problems:"]
    lines.extend(_issue_line(i) for i in issues)
    if changes:
        lines.append("")
        lines.append("These were fixed automatically (keep them):")
        lines.extend(f"- {c}" for c in changes)
    if repaired:
        lines.append("")
        lines.append("The plan after the automatic fixes:")
        lines.append(json.dumps(repaired, ensure_ascii=False))
    lines.append("")
    lines.append(
        "Fix every problem and answer with the complete corrected plan as one JSON object"
        " and nothing else."
    )
    return Message("user", "\n".join(lines))


def replan_messages(
    goal: str,
    registry: ToolRegistry,
    *,
    finished: str,
    failure: str,
    taken_ids: Iterable[str],
    instructions: str = PLANNER_INSTRUCTIONS,
) -> list[Message]:
    """The request for a plan of the remaining work after a step failed for good."""
    user = (
        f"Goal: {goal}\n\n"
        "A plan for this goal was executed, and a step failed for good.\n\n"
        f"Steps that finished, with their outputs (these will NOT run again):\n{finished}\n\n"
        f"The failure:\n{failure}\n\n"
        "Write a plan for the remaining work only: do not repeat finished steps. Your steps"
        ' may reference the outputs of finished steps ("${step_id.field}", with the step in'
        " depends_on); those outputs are reused as they are. Avoid what failed, or try another"
        " way. Do not use these step ids again: "
        f"{', '.join(sorted(taken_ids))}.\n\n"
        "Answer with the plan as one JSON object and nothing else."
    )
    return [_system(registry, instructions), Message("user", user)]
