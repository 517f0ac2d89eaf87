"""The compact prompt: same facts in at most half the tokens, chosen by option or context."""

from __future__ import annotations

import json

from planrail.llm.base import Usage
from planrail.plan.tools import ToolRegistry
from planrail.planner import Planner
from planrail.planner.compact import compact_catalog, type_text
from planrail.testing.llm import ScriptedLLM

from .conftest import Kit
from .plans import GOAL

GOOD = {
    "steps": [
        {"id": "find", "tool": "search", "args": {"query": "graph planning"}, "depends_on": []},
    ]
}
BAD = {"steps": [{"id": "find", "tool": "serch", "args": {"query": "x"}, "depends_on": []}]}


def _tokens(messages: list[dict[str, str]]) -> int:
    return Usage.estimate("\n".join(m["content"] for m in messages), "").input_tokens


def test_compact_catalog_is_one_line_per_tool(kit: Kit) -> None:
    """Each tool is name(args) -> {output fields} [effects] description, with no titles."""
    lines = compact_catalog(ToolRegistry(kit.tools)).splitlines()
    assert lines[0] == (
        "search(query: string) -> {titles: string[], top: string} Search the paper index;"
        " read-only."
    )
    assert lines[2].startswith("send_email(user_id: string, subject: string, body: string)")
    assert "[unsafe]" in lines[2]
    assert "title" not in "\n".join(lines).lower().replace("titles", "")
    assert type_text({"anyOf": [{"type": "integer"}, {"type": "null"}]}) == "integer"


async def test_compact_prompt_tokens_per_attempt_are_at_most_half(kit: Kit) -> None:
    """For the same catalog and the same answers, every attempt's prompt in compact mode is at
    most half the full mode's (estimated tokens), the first request and the repair alike."""
    sizes = {}
    for mode in ("full", "compact"):
        llm = ScriptedLLM([json.dumps(BAD), json.dumps(GOOD)])
        result = await Planner(llm, kit.tools, prompt=mode).plan(GOAL)
        assert [a.prompt for a in result.attempts] == [mode, mode]
        sizes[mode] = [_tokens(a.messages) for a in result.attempts]
    assert all(c * 2 <= f for c, f in zip(sizes["compact"], sizes["full"], strict=True)), sizes


async def test_compact_repair_shows_only_the_steps_concerned(kit: Kit) -> None:
    """The compact repair lists the errors and the failing steps, and the conversation does
    not grow: first request, last answer, repair."""
    llm = ScriptedLLM([json.dumps(BAD), json.dumps(BAD | {"goal": "g"}), json.dumps(GOOD)])
    result = await Planner(llm, kit.tools, prompt="compact").plan(GOAL)
    third = result.attempts[2].messages
    assert [m["role"] for m in third] == ["system", "user", "assistant", "user"]
    assert "[unknown_tool]" in third[-1]["content"]
    assert '"tool": "serch"' in third[-1]["content"]


def test_auto_picks_compact_for_a_small_context(kit: Kit) -> None:
    """prompt="auto" is compact when the model says its context is small, full otherwise."""
    small = ScriptedLLM([])
    small.context_window = 4096  # type: ignore[attr-defined]
    assert Planner(small, kit.tools).prompt == "compact"
    assert Planner(ScriptedLLM([]), kit.tools).prompt == "full"
