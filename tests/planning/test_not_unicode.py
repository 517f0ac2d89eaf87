"""Text that is not Unicode — a lone surrogate, from JSON's ``"\\ud800"`` escape or from
undecodable command-line bytes — on the agent's ways in: a model's plan, a model's answer to
an ``llm_call`` step, the goal itself. Each is refused where it enters, with a message that can
be printed; none reaches a store, a tool or a request as a crash."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from planrail.agent import Agent, approve_all
from planrail.llm.base import Message
from planrail.llm.openai_client import OpenAIClient
from planrail.store import open_store
from planrail.testing.llm import ScriptedLLM
from planrail.testing.llm_server import LLMTestServer, Reply

from .conftest import Kit
from .plans import GOAL, good_plan


def _with_surrogate() -> dict[str, object]:
    plan = good_plan()
    plan["steps"][0]["args"] = {"query": "graph \ud800 planning"}  # type: ignore[index]
    return plan


async def test_a_plan_with_a_lone_surrogate_is_repaired_over_http(
    server: LLMTestServer, kit: Kit, openai_llm: OpenAIClient
) -> None:
    """The loader refuses the plan naming the place; the repair request quoting the answer
    back is sent (the surrogate as its escape) and the repaired plan runs; no tool saw it."""
    server.add(Reply.json(_with_surrogate()), Reply.json(good_plan()), "A summary.")
    result = await Agent(openai_llm, kit.tools, approval=approve_all).run(GOAL)

    assert result.status == "succeeded", result.reason
    _first, repair, _step = server.completions
    asked = repair.messages[-1]["content"]
    assert "$.steps[0].args.query: the string holds a lone surrogate ('\\ud800')" in asked
    assert "\ud800" not in repair.text
    assert [a.kind for a in result.attempts] == ["plan", "repair"]
    assert ("search", {"query": "graph planning"}) in kit.calls
    assert all("\ud800" not in str(args) for _, args in kit.calls)


def test_a_message_is_sent_as_text_whatever_it_holds() -> None:
    """What a client sends can always be encoded: lone surrogates become their escapes; a
    pair (an emoji) and other text are left as they are."""
    sent = Message("user", "a \udcff b \U0001f600 é").to_dict()
    assert sent == {"role": "user", "content": "a \\udcff b \U0001f600 é"}
    sent["content"].encode("utf-8")


async def test_an_llm_step_answer_with_a_lone_surrogate_fails_its_attempt(
    tmp_path: Path,
) -> None:
    """The answer is refused as a bad answer (retryable: a model may answer better), the
    step fails with that reason in a SQLite store, and nothing crashed the store."""
    import planrail

    plan = {"goal": "g", "steps": [{"id": "a", "action": "llm_call", "prompt": "say"}]}
    store = open_store(f"sqlite:///{tmp_path / 'runs.db'}")
    try:
        result = await planrail.arun(plan, llm=ScriptedLLM(["x\ud800y"]), store=store)
    finally:
        store.close()
    error = result.steps["a"].error
    assert result.steps["a"].status == "failed"
    assert error is not None
    assert error["type"] == "LLMAnswerError"
    assert error["retryable"] is True
    assert "lone surrogate ('\\ud800')" in error["message"]


async def test_a_goal_that_is_not_unicode_is_invalid_without_a_model_call(kit: Kit) -> None:
    llm = ScriptedLLM([])
    result = await Agent(llm, kit.tools, approval=approve_all).run("say \udcff hi")
    assert result.status == "invalid"
    assert result.reason is not None
    assert "lone surrogate ('\\udcff')" in result.reason
    assert llm.requests == []
    assert kit.calls == []


def test_planrail_plan_with_undecodable_goal_bytes_exits_3(
    server: LLMTestServer, tmp_path: Path
) -> None:
    """``planrail plan $'say \\xff hi'``: exit 3 (invalid), the reason printed, no traceback,
    no model call."""
    (tmp_path / "tools.py").write_text(
        "import planrail\n\n@planrail.tool(side_effects='none')\n"
        "def echo(text: str) -> str:\n    '''Echo.'''\n    return text\n"
    )
    planrail_bin = str(Path(sys.executable).with_name("planrail")).encode()
    cmd = [planrail_bin, b"plan", b"say \xff hi", b"--tools", b"tools.py"]
    cmd += [b"--model", b"openai:test-model", b"--base-url", server.url.encode(), b"--yes"]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, timeout=120)
    said = (proc.stdout + proc.stderr).decode("utf-8", "replace")
    assert proc.returncode == 3, said
    assert "lone surrogate" in said
    assert "Traceback" not in said
    assert server.requests == []
