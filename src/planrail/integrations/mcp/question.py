"""What ``planrail mcp serve`` asks the client's user (MCP elicitation) before it runs a plan.

Built from the CLI approval screen's data (:class:`~planrail.engine.approval_view.ApprovalView`):
each step that changes the world with its arguments (secrets masked) and where each comes from,
then the read-only steps, then the goal. Everything in it but planrail's own words was written
by the calling agent, which is what the user is asked to judge — so every such text is put on
one line with its control characters escaped (a goal or an argument cannot forge a line of the
question, or hide one behind blank lines), and the goal comes last, labelled as the agent's.
Over MCP even the goal is the agent's, not the user's: a value found in it is not "typed by the
user", and the question says so.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

from planrail.engine.approval import ApprovalRequest
from planrail.engine.approval_view import ApprovalView, build_view
from planrail.plan.effects import effects_of
from planrail.plan.model import Plan
from planrail.plan.tools import ToolRegistry

__all__ = ["question", "render"]

MAX_VALUE = 160
"""Characters of one value in the question (as on the CLI approval screen)."""
_AGENTS = "written in the plan by the calling agent"
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}


def question(plan: Plan, registry: ToolRegistry, steps: list[str]) -> str:
    """The question asked to approve ``steps`` of ``plan``."""
    request = ApprovalRequest.build(plan, registry, effects_of(plan.steps, registry), steps)
    return render(build_view(request))


def render(view: ApprovalView) -> str:
    lines = [
        f"planrail: approve this plan? {len(view.steps)} step(s) change the world;"
        " the plan was written by the calling agent."
    ]
    for step in view.steps:
        lines.append(f"Step {one_line(step.id)} calls {one_line(step.tool)} ({step.side_effects})")
        for arg in step.args:
            flag = "! " if arg.untrusted else ""
            later = "" if arg.known else " (known at run time)"
            lines.append(f"  {flag}{one_line(arg.name)} = {_value(arg.value)}{later}")
            origins = [_AGENTS if s.kind in ("goal", "plan", "planner") else s.text
                       for s in arg.sources]  # fmt: skip
            if origins:
                lines.append(f"      from: {one_line('; '.join(dict.fromkeys(origins)))}")
        if not step.args:
            lines.append("  (no arguments)")
    if view.read_only:
        ro = ", ".join(f"{one_line(sid)} ({one_line(tool)})" for sid, tool in view.read_only)
        lines.append(f"Read-only, run without asking: {ro}")
    lines.append(f"Goal, as the calling agent wrote it: {_quoted(view.goal or '')}")
    lines.append(f"Approving binds plan {view.short_hash}…")
    return "\n".join(lines)


def one_line(text: str) -> str:
    """``text`` on one line: newlines and other control or invisible format characters (line
    separators, bidirectional overrides) escaped, so it reads as exactly what it is."""
    out = []
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif unicodedata.category(ch)[0] in "CZ" and ch != " ":
            out.append(f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08x}")
        else:
            out.append(ch)
    return "".join(out)


def _quoted(text: str) -> str:
    return '"' + one_line(text).replace('"', '\\"') + '"'


def _value(value: Any) -> str:
    text = _quoted(value) if isinstance(value, str) else one_line(_json(value))
    return text if len(text) <= MAX_VALUE else f"{text[:MAX_VALUE]}… ({len(text):,} chars)"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
