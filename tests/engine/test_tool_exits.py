"""A tool that raises ``SystemExit`` (``sys.exit()``, an ``argparse`` error) fails its attempt
with a ``ToolError``; the run goes on. Left alone, asyncio would stop the run's event loop and
the process would exit with the tool's code (``planrail run`` printed nothing and exited 3, the
code of an invalid plan)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import pytest

import planrail
from planrail.errors import ToolError


@planrail.tool(side_effects="none")
def sync_exit() -> str:
    raise SystemExit(3)


@planrail.tool(side_effects="none")
async def async_exit() -> str:
    sys.exit("bye")


@planrail.tool(side_effects="none")
async def argparse_exit() -> str:
    argparse.ArgumentParser(prog="tool").parse_args(["--nope"])
    return "parsed"


@planrail.tool(side_effects="none")
def fine(x: int) -> int:
    return x + 1


@planrail.tool(side_effects="none")
def two() -> list[int]:
    return [1, 2]


TOOLS = [sync_exit, async_exit, argparse_exit, fine, two]


@pytest.mark.parametrize(
    ("tool", "code"), [("sync_exit", "3"), ("async_exit", "'bye'"), ("argparse_exit", "2")]
)
@pytest.mark.parametrize(
    "policy",
    [
        pytest.param({}, id="plain"),
        pytest.param({"timeout": 60}, id="attempt-loop"),
        pytest.param({"retry": {"max_attempts": 3}}, id="retry"),
        pytest.param({"for_each": "${items}", "depends_on": ["items"]}, id="fan-out"),
    ],
)
async def test_a_tool_exiting_fails_its_step_and_the_run_goes_on(
    tool: str, code: str, policy: dict[str, Any]
) -> None:
    plan = {
        "steps": [
            {"id": "items", "tool": "two"},
            {"id": "bad", "tool": tool, **policy},
            {"id": "other", "tool": "fine", "args": {"x": 1}},
            {"id": "after", "tool": "fine", "args": {"x": "${other}"}, "depends_on": ["other"]},
            {"id": "skipped", "tool": "fine", "args": {"x": 1}, "depends_on": ["bad"]},
        ]
    }
    result = await planrail.arun(plan, TOOLS)
    steps = result.steps
    assert result.status == "failed"
    assert steps["bad"].status == "failed"
    # not retried (the same call would exit again): one attempt, one per item of a fan-out
    assert steps["bad"].attempts == (2 if "for_each" in policy else 1)
    error = steps["bad"].error
    assert error is not None
    assert error["type"] == ToolError.__name__
    assert f"SystemExit({code})" in error["message"]
    assert (steps["other"].output, steps["after"].output) == (2, 3)
    assert steps["skipped"].status == "skipped"
