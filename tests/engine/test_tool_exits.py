"""A tool that raises ``SystemExit`` (``sys.exit()``, an ``argparse`` error) fails its attempt
with a ``ToolError``; the run goes on. Left alone, asyncio would stop the run's event loop and
the process would exit with the tool's code (``planrail run`` printed nothing and exited 3, the
code of an invalid plan). So do the other exceptions that are no ``Exception`` — and a sync
tool's ``StopIteration``, which no asyncio future can hold: each left its step's task dead (or
its future never done) and the run waiting for it for ever."""

from __future__ import annotations

import argparse
import asyncio
import sys
import threading
from typing import Any

import pytest

import planrail
from planrail.engine.runners import is_ctrl_c
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


class Abort(BaseException):
    """A tool's own BaseException (as some libraries define for "stop everything")."""


@planrail.tool(side_effects="none")
def sync_next() -> str:
    return next(iter([]))  # the usual way: next() on an empty iterator


@planrail.tool(side_effects="none")
def sync_abort() -> str:
    raise Abort("stop")


@planrail.tool(side_effects="none")
async def async_abort() -> str:
    raise Abort("stop")


@planrail.tool(side_effects="none")
async def async_generator_exit() -> str:
    raise GeneratorExit


@planrail.tool(side_effects="none")
async def async_cancelled() -> str:
    raise asyncio.CancelledError  # raised, not cancelled: nothing asked this step to stop


@planrail.tool(side_effects="none")
def sync_cancelled() -> str:
    raise asyncio.CancelledError


TOOLS = [
    sync_exit,
    async_exit,
    argparse_exit,
    fine,
    two,
    sync_next,
    sync_abort,
    async_abort,
    async_generator_exit,
    async_cancelled,
    sync_cancelled,
]


POLICIES = [
    pytest.param({}, id="plain"),
    pytest.param({"timeout": 60}, id="attempt-loop"),
    pytest.param({"retry": {"max_attempts": 3}}, id="retry"),
    pytest.param({"for_each": "${items}", "depends_on": ["items"]}, id="fan-out"),
]
"""The paths a step's call takes: alone, in the attempt loop, retried, one call per item."""


def bad_step_plan(tool: str, policy: dict[str, Any]) -> dict[str, Any]:
    """Step ``bad`` calls ``tool`` under ``policy``; ``other`` does not depend on it, and
    ``after`` on ``other``; ``skipped`` depends on ``bad``."""
    return {
        "steps": [
            {"id": "items", "tool": "two"},
            {"id": "bad", "tool": tool, **policy},
            {"id": "other", "tool": "fine", "args": {"x": 1}},
            {"id": "after", "tool": "fine", "args": {"x": "${other}"}, "depends_on": ["other"]},
            {"id": "skipped", "tool": "fine", "args": {"x": 1}, "depends_on": ["bad"]},
        ]
    }


@pytest.mark.parametrize(
    ("tool", "code"), [("sync_exit", "3"), ("async_exit", "'bye'"), ("argparse_exit", "2")]
)
@pytest.mark.parametrize("policy", POLICIES)
async def test_a_tool_exiting_fails_its_step_and_the_run_goes_on(
    tool: str, code: str, policy: dict[str, Any]
) -> None:
    result = await planrail.arun(bad_step_plan(tool, policy), TOOLS)
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


@pytest.mark.parametrize(
    ("tool", "said"),
    [
        ("sync_next", "RuntimeError: the tool raised StopIteration"),
        ("sync_abort", "ToolError: step 'bad' raised Abort('stop'), which is not an Exception"),
        ("async_abort", "ToolError: step 'bad' raised Abort('stop'), which is not an Exception"),
        ("async_generator_exit", "ToolError: step 'bad' raised GeneratorExit"),
        ("async_cancelled", "ToolError: step 'bad' raised CancelledError"),
        ("sync_cancelled", "ToolError: step 'bad' raised CancelledError"),
    ],
)
@pytest.mark.parametrize("policy", POLICIES)
async def test_a_tool_raising_what_is_no_exception_fails_its_step_and_the_run_ends(
    tool: str, said: str, policy: dict[str, Any]
) -> None:
    # a guard, not a measurement: before the fix this run never ended
    result = await asyncio.wait_for(planrail.arun(bad_step_plan(tool, policy), TOOLS), 60)
    steps = result.steps
    assert result.status == "failed"
    assert steps["bad"].status == "failed"
    error = steps["bad"].error
    assert error is not None
    kind, text = said.split(": ", 1)
    assert error["type"] == kind
    assert text in error["message"]  # after "item 0: " in a fan-out
    assert (steps["other"].output, steps["after"].output) == (2, 3)
    assert steps["skipped"].status == "skipped"


async def test_a_real_cancellation_still_cancels() -> None:
    """A step's task cancelled by the run (fail-fast, once another step failed) stays a
    cancellation: it is not taken for its tool raising CancelledError."""

    @planrail.tool(side_effects="none")
    async def waits() -> str:
        await asyncio.Event().wait()
        return "never"

    @planrail.tool(side_effects="none")
    async def fails() -> str:
        await asyncio.sleep(0)  # one loop turn: 'w' is waiting by then
        raise ValueError("no")

    plan = {"steps": [{"id": "w", "tool": "waits"}, {"id": "f", "tool": "fails"}]}
    result = await asyncio.wait_for(
        planrail.arun(plan, [waits, fails], failure_mode="fail_fast"), 60
    )
    assert result.steps["f"].status == "failed"
    assert result.steps["w"].status == "cancelled"


class Unreadable(Exception):
    """An error whose message cannot be read (its ``__str__`` raises)."""

    def __str__(self) -> str:
        raise RuntimeError("no message")


@planrail.tool(side_effects="none")
def unreadable() -> int:
    raise Unreadable


@pytest.mark.parametrize(
    "policy",
    [
        *POLICIES,
        pytest.param(
            {"repeat": {"until": {"eq": ["${self}", 1]}, "max_iterations": 2}}, id="repeat"
        ),
    ],
)
async def test_an_error_whose_message_cannot_be_read_is_recorded(
    policy: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    """Every path records the attempt and the error, read by its ``repr``: nothing is logged
    as a crash of the engine (a ``repeat`` step's reason read ``str()`` unguarded: a logged
    traceback and no attempt recorded)."""
    result = await planrail.arun(bad_step_plan("unreadable", policy), [*TOOLS, unreadable])
    bad = result.steps["bad"]
    assert bad.status == "failed"
    assert bad.attempts >= 1
    assert bad.error is not None
    assert "its message cannot be read" in bad.error["message"]
    assert (result.steps["other"].output, result.steps["after"].output) == (2, 3)
    assert not [r for r in caplog.records if r.levelname == "ERROR"]


@planrail.tool(side_effects="none")
def sync_interrupt() -> str:
    raise KeyboardInterrupt


@planrail.tool(side_effects="none")
async def async_interrupt() -> str:
    raise KeyboardInterrupt


def _interrupting(tool: str) -> dict[str, Any]:
    return {
        "goal": "g",
        "steps": [
            {"id": "k", "tool": tool, "args": {}},
            {"id": "after", "tool": "fine", "args": {"x": 1}},
        ],
    }


async def test_a_sync_tool_raising_keyboard_interrupt_fails_its_attempt() -> None:
    """A sync tool runs in a worker thread, which no Ctrl-C reaches (signals go to the main
    thread): its ``KeyboardInterrupt`` is its own, and fails its attempt — it stopped the whole
    run as a Ctrl-C would (``planrail run`` exited 130, a served run never answered)."""
    result = await planrail.arun(_interrupting("sync_interrupt"), [sync_interrupt, fine])
    assert result.status == "failed"
    assert result.steps["k"].error is not None
    assert result.steps["k"].error["type"] == "ToolError"
    said = result.steps["k"].error["message"]
    assert "tool 'sync_interrupt' raised KeyboardInterrupt in its thread" in said
    assert said.endswith("the attempt failed instead")
    assert result.steps["after"].output == 2


def test_only_a_keyboard_interrupt_on_the_main_thread_is_taken_for_a_ctrl_c() -> None:
    """The one rule the runner's worker threads and the step runner ask: a
    ``KeyboardInterrupt`` may be a Ctrl-C on the main thread only (signals go there); nothing
    else ever is."""
    assert is_ctrl_c(KeyboardInterrupt())
    assert not is_ctrl_c(SystemExit(1))
    assert not is_ctrl_c(asyncio.CancelledError())
    off_main: list[bool] = []
    thread = threading.Thread(target=lambda: off_main.append(is_ctrl_c(KeyboardInterrupt())))
    thread.start()
    thread.join(60)
    assert off_main == [False]


def test_a_run_driven_off_the_main_thread_takes_no_keyboard_interrupt_for_a_ctrl_c() -> None:
    """Driven on another thread (as the dashboard drives its resumes), an async tool's
    ``KeyboardInterrupt`` fails its attempt: no Ctrl-C arrives there. It ended the thread with a
    traceback and left the run ``running``. On the main thread it is still taken for one."""
    found: list[Any] = []

    def drive() -> None:
        try:
            found.append(planrail.run(_interrupting("async_interrupt"), [async_interrupt, fine]))
        except BaseException as exc:  # the failure the test reports
            found.append(exc)

    thread = threading.Thread(target=drive)
    thread.start()
    thread.join(60)
    assert not thread.is_alive()
    [result] = found
    assert isinstance(result, planrail.RunResult), result
    assert result.steps["k"].error is not None
    assert "off the main thread" in result.steps["k"].error["message"]
    assert result.steps["after"].output == 2
    with pytest.raises(KeyboardInterrupt):
        planrail.run(_interrupting("async_interrupt"), [async_interrupt, fine])
