"""Streaming dispatch: read-only steps start while the plan streams; side effects wait."""

from __future__ import annotations

import json

from planrail.agent import Agent, ApprovalRequest, approve_all
from planrail.llm.openai_client import OpenAIClient
from planrail.testing.llm import Scripted, ScriptedLLM
from planrail.testing.llm_server import LLMTestServer, Reply

from .conftest import Kit
from .plans import GOAL, good_plan

_WAIT = 10.0
"""Safety bound (seconds) for the server to wait for the first step; never reached when the
code is right — and when it is wrong, the event-order assertion fails instead of hanging."""


def _split_after_first_step(plan: dict[str, object]) -> list[str]:
    """The plan's JSON text in two chunks: up to the end of its first step, then the rest."""
    text = json.dumps(plan)
    first = json.dumps(plan["steps"][0])  # type: ignore[index]
    cut = text.index(first) + len(first)
    return [text[:cut], text[cut:]]


def _index(result_trace: list[object], type_: str, step: str | None = None) -> int:
    for i, event in enumerate(result_trace):
        if event.type == type_ and (step is None or event.step_id == step):  # type: ignore[attr-defined]
            return i
    raise AssertionError(f"no {type_} event for {step}")


async def test_read_only_step_starts_before_plan_finishes_streaming(
    server: LLMTestServer, kit: Kit, openai_llm: OpenAIClient
) -> None:
    """Through the real SDK: the server holds the rest of the plan until the read-only first
    step has run, so the step provably started before the plan finished streaming; the
    side-effecting steps start only after approval."""
    chunks = _split_after_first_step(good_plan())

    def hold(i: int) -> None:
        if i == 1:
            kit.searched.wait(_WAIT)

    server.add(Reply(json.dumps(good_plan()), chunks=chunks, before_chunk=hold), "A summary.")
    calls_at_approval: list[str] = []

    def approve(request: ApprovalRequest) -> bool:
        calls_at_approval.extend(kit.names())
        return True

    result = await Agent(openai_llm, kit.tools, approval=approve, stream=True).run(GOAL)

    assert result.status == "succeeded", result.reason
    assert server.completions[0].stream
    trace = result.trace
    assert _index(trace, "step_started", "find") < _index(trace, "plan_streamed")
    approved = _index(trace, "approved")
    assert _index(trace, "step_started", "acct") > approved
    assert _index(trace, "step_started", "mail") > approved
    assert calls_at_approval == ["search"]
    assert result.usage["calls"] == 2
    assert result.usage["input_tokens"] > 0


async def test_streaming_refused_runs_no_side_effect(kit: Kit) -> None:
    """A refused streamed plan: the read-only step may have run, nothing else did."""
    llm = ScriptedLLM(
        [Scripted(json.dumps(good_plan()), chunks=_split_after_first_step(good_plan()))]
    )
    result = await Agent(llm, kit.tools, approval=lambda r: False, stream=True).run(GOAL)

    assert result.status == "refused"
    assert set(kit.names()) <= {"search"}
    assert "approval refused" in (result.reason or "")


async def test_side_effecting_step_first_in_stream_waits_for_approval(kit: Kit) -> None:
    """A side-effecting step that arrives first in the stream is not started early: the
    stream is held after it, and it still has not run."""
    plan = good_plan()
    plan["steps"] = [plan["steps"][2], plan["steps"][0], plan["steps"][1], plan["steps"][3]]
    text = json.dumps(plan)
    cut = text.index(json.dumps(plan["steps"][0])) + len(json.dumps(plan["steps"][0]))
    seen_during_stream: list[list[str]] = []

    async def on_chunk(i: int, chunk: str) -> None:
        seen_during_stream.append(kit.names())

    llm = ScriptedLLM(
        [Scripted(text, chunks=[text[:cut], text[cut:]]), "A summary."], on_chunk=on_chunk
    )
    result = await Agent(llm, kit.tools, approval=approve_all, stream=True).run(GOAL)

    assert result.status == "succeeded", result.reason
    assert all("create_account" not in names for names in seen_during_stream)
    trace = result.trace
    assert _index(trace, "step_started", "acct") > _index(trace, "approved")
    assert "step_dispatched_early" not in [e.type for e in trace if e.step_id == "acct"]


async def test_stream_with_repair_runs_the_repaired_plan(kit: Kit) -> None:
    """When the streamed plan needs a model repair, the early read-only step's output is
    reused by the final plan (not run twice)."""
    flawed = good_plan()
    flawed["steps"][2]["tool"] = "create_acount"
    llm = ScriptedLLM([json.dumps(flawed), json.dumps(good_plan()), "A summary."])
    result = await Agent(llm, kit.tools, approval=approve_all, stream=True).run(GOAL)

    assert result.status == "succeeded", result.reason
    assert kit.names().count("search") == 1
    assert [a.kind for a in result.attempts] == ["plan", "repair"]
    assert result.attempts[0].streamed
    assert not result.attempts[1].streamed
