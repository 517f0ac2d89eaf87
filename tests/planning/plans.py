"""Named plan answers the planning tests script the model with."""

from __future__ import annotations

import json
from typing import Any

GOAL = "Email Alice a summary of papers on graph planning"

FIRST_ANSWER_STEPS: list[dict[str, Any]] = [
    {"id": "find", "action": "use_tool", "tool": "search", "args": {"query": "graph planning"}},
    {
        "id": "summary",
        "action": "llm",
        "prompt": "Summarise these titles in one sentence: ${find.titles}",
        "depends_on": ["find"],
    },
    {
        "id": "acct",
        "tool": "create_acount",
        "args": {"name": "Alice", "email": "alice@example.com"},
    },
    {
        "id": "mail",
        "action": "call_tool",
        "tool": "send_email",
        "args": {"user_id": "${acct.user_id}", "subject": "Papers", "body": "${summary}"},
        "depends_on": ["acct"],
    },
]
"""A first answer with an aliased action, an undeclared dependency (mail uses ${summary})
and an unknown tool (create_acount)."""


def fenced(data: Any) -> str:
    """``data`` as JSON in a code fence, with prose around it, as chat models write it."""
    return f"Here is the plan:\n```json\n{json.dumps(data, indent=1)}\n```\nHope this helps!"


def good_plan(goal: str = GOAL) -> dict[str, Any]:
    """A valid plan: search → summary (llm) ; create_account → send_email(summary)."""
    return {
        "goal": goal,
        "steps": [
            {
                "id": "find",
                "action": "tool_call",
                "tool": "search",
                "args": {"query": "graph planning"},
            },
            {
                "id": "summary",
                "action": "llm_call",
                "prompt": "Summarise these titles in one sentence: ${find.titles}",
                "depends_on": ["find"],
            },
            {
                "id": "acct",
                "action": "tool_call",
                "tool": "create_account",
                "args": {"name": "Alice", "email": "alice@example.com"},
                "depends_on": [],
            },
            {
                "id": "mail",
                "action": "tool_call",
                "tool": "send_email",
                "args": {"user_id": "${acct.user_id}", "subject": "Papers", "body": "${summary}"},
                "depends_on": ["acct", "summary"],
            },
        ],
        "output": {"message": "${mail.message_id}"},
    }
