"""Helpers for the policy tests: run a plan dict in the test's (virtual-time) event loop."""

from __future__ import annotations

import asyncio
from typing import Any

from planrail.engine.result import RunResult
from planrail.policies import RunPolicy
from planrail.runs import prepare


async def run_plan(plan: dict[str, Any], tools: list[Any], **options: Any) -> RunResult:
    """Validate and run ``plan`` (a plan dict) with ``tools``; ``policy`` may be a dict."""
    options.setdefault("approve", True)  # these tests are about policies, not approval
    policy = options.pop("policy", None)
    if isinstance(policy, dict):
        policy = RunPolicy(**policy)
    return await prepare(plan, tools, policy=policy, **options).run()


def now() -> float:
    """The running loop's time (virtual under ``@pytest.mark.looptime``, starting at 0)."""
    return asyncio.get_running_loop().time()


def retry(max_attempts: int, initial_delay: float = 1.0, **more: Any) -> dict[str, Any]:
    """A retry object with no jitter unless given, so delays are exact."""
    return {"max_attempts": max_attempts, "initial_delay": initial_delay, "jitter": 0, **more}
