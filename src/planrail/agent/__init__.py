"""Layer 5: the agent loop — goal → plan → validate → approve → execute → replan.

::

    from planrail.agent import Agent, approve_all
    from planrail.llm import open_llm

    agent = Agent(open_llm("openai:gpt-4.1-mini"), [search, send_email], approval=approve_all)
    result = await agent.run("Email Alice the three newest papers on graph planning")
    result.status, result.output, result.trace
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from planrail.agent.agent import Agent
from planrail.agent.approval import (
    ApprovalCallback,
    ApprovalPolicy,
    ApprovalRequest,
    approve_all,
    every_step,
    refuse_all,
    side_effecting_steps,
    value_sources,
)
from planrail.agent.llm_step import LLMStepHandler, step_messages
from planrail.agent.result import AGENT_STATUSES, AgentResult, TraceEvent
from planrail.llm.base import LLM
from planrail.plan.tools import AnyTool, ToolRegistry

__all__ = [
    "AGENT_STATUSES",
    "Agent",
    "AgentResult",
    "ApprovalCallback",
    "ApprovalPolicy",
    "ApprovalRequest",
    "LLMStepHandler",
    "TraceEvent",
    "approve_all",
    "arun_goal",
    "every_step",
    "refuse_all",
    "run_goal",
    "side_effecting_steps",
    "step_messages",
    "value_sources",
]


async def arun_goal(
    goal: str,
    tools: ToolRegistry | Iterable[AnyTool],
    *,
    llm: LLM | None = None,
    model: str | None = None,
    base_url: str | None = None,
    **options: Any,
) -> AgentResult:
    """Plan and run ``goal`` with ``llm`` (or the client for ``model``).

    Other options are :class:`Agent`'s.
    """
    if llm is None:
        if model is None:
            raise ValueError("pass llm= (a client) or model= (e.g. 'openai:gpt-4.1-mini')")
        from planrail.llm.models import open_llm

        llm = open_llm(model, base_url=base_url)
    return await Agent(llm, tools, **options).run(goal)


def run_goal(goal: str, tools: ToolRegistry | Iterable[AnyTool], **options: Any) -> AgentResult:
    """The synchronous form of :func:`arun_goal` (runs its own event loop)."""
    return asyncio.run(arun_goal(goal, tools, **options))
