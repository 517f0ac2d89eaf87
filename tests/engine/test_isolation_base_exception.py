"""A tool with ``isolation="process"`` raising what is no ``Exception`` — ``KeyboardInterrupt``,
``SystemExit``, a ``BaseException`` of its own — fails its attempt with a ``ToolError``: the
exception was raised in the worker process, so it is never this process's Ctrl-C. The run
records the step and goes on (a ``KeyboardInterrupt`` from a worker stopped ``planrail run``
as a Ctrl-C, exit 130, and left a ``planrail mcp serve`` run unanswered), and the worker, which
ends after such an exception, is never handed another call (the next call met a dead worker:
``CallCrashedError``, "died mid-call", ``in_doubt``)."""

from __future__ import annotations

import asyncio
import json
import textwrap
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import pytest
from typer.testing import CliRunner

import planrail
from planrail.cli import app
from planrail.engine.isolation import ProcessWorkers
from planrail.errors import ToolError
from planrail.plan.catalog import load_tools
from planrail.plan.tools import Tool

T = TypeVar("T")
GUARD = 120.0
"""Seconds after which a run or a command has hung (a guard only: no timing is asserted)."""

TOOLS = textwrap.dedent(
    '''
    import os
    import planrail

    class Abort(BaseException):
        """A tool's own BaseException (as some libraries define for "stop everything")."""

    @planrail.tool(side_effects="none", isolation="process")
    def interrupted(x: int) -> int:
        raise KeyboardInterrupt

    @planrail.tool(side_effects="none", isolation="process")
    def aborts(x: int) -> int:
        raise Abort("stop")

    class Unpicklable(BaseException):
        def __reduce__(self):
            raise TypeError("not sent back as it is")

    @planrail.tool(side_effects="none", isolation="process")
    def unpicklable(x: int) -> int:
        raise Unpicklable("stop")

    @planrail.tool(side_effects="none", isolation="process")
    def exits(x: int) -> int:
        raise SystemExit(3)

    @planrail.tool(side_effects="none", isolation="process")
    def where(x: int) -> int:
        """The pid of the worker the call ran in."""
        return os.getpid()
    '''
)

CASES = [
    pytest.param("interrupted", "raised KeyboardInterrupt() in its worker process", id="ctrl-c"),
    pytest.param("aborts", "raised Abort('stop') in its worker process", id="own"),
    pytest.param("unpicklable", "raised Unpicklable: stop in its worker process", id="no-pickle"),
    pytest.param("exits", "tried to end its worker process (SystemExit(3))", id="exit"),
]


@pytest.fixture
def tools(tmp_path: Path) -> dict[str, Tool]:
    """The isolated tools, from a file a worker imports them from."""
    path = tmp_path / "isolated_tools.py"
    path.write_text(TOOLS)
    return {t.name: t for t in load_tools(str(path))}


def _plan(bad: str) -> dict[str, Any]:
    """``bad`` first, then ``after`` (whatever became of it: ``join: all_finished``) in the
    same run, so in the same workers."""
    return {
        "steps": [
            {"id": "bad", "tool": bad, "args": {"x": 1}},
            {"id": "after", "tool": "where", "args": {"x": 2},
             "depends_on": ["bad"], "join": "all_finished"},
        ]
    }  # fmt: skip


def _run(work: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(work)`` in a thread of its own: a ``KeyboardInterrupt`` escaping the
    run (what this file pins never happens) fails the test instead of ending the session."""
    with ThreadPoolExecutor(1) as pool:
        try:
            return pool.submit(asyncio.run, work).result(timeout=GUARD)
        except KeyboardInterrupt:
            pytest.fail("the worker's KeyboardInterrupt went on as this process's Ctrl-C")


@pytest.mark.parametrize(("bad", "said"), CASES)
def test_the_step_fails_with_a_tool_error_and_the_run_goes_on(
    tools: dict[str, Tool], bad: str, said: str
) -> None:
    result = _run(planrail.arun(_plan(bad), list(tools.values())))
    bad_step, after = result.steps["bad"], result.steps["after"]
    assert (after.status, after.error) == ("succeeded", None)  # in a live worker
    assert isinstance(after.output, int)
    assert bad_step.status == "failed"
    assert bad_step.attempts == 1
    assert bad_step.error is not None
    assert bad_step.error["type"] == ToolError.__name__
    assert f"tool '{bad}' {said}, which is not an Exception" in bad_step.error["message"]


@pytest.mark.parametrize(("bad", "said"), CASES)
def test_the_worker_that_raised_it_is_not_used_again(
    tools: dict[str, Tool], bad: str, said: str
) -> None:
    """With one worker slot: the call after it runs in a new worker, and succeeds."""

    async def calls() -> tuple[int, BaseException | None, int]:
        workers = ProcessWorkers(max_workers=1)
        try:
            first = await workers.call(tools["where"], {"x": 0})
            try:
                await workers.call(tools[bad], {"x": 1})
                raised = None
            except ToolError as exc:
                raised = exc
            return first, raised, await workers.call(tools["where"], {"x": 2})
        finally:
            workers.close()

    first, raised, second = _run(calls())
    assert raised is not None
    assert f"tool '{bad}' {said}" in str(raised)
    assert isinstance(second, int)
    assert second != first  # the worker that raised it ended; another runs the call


def test_planrail_run_fails_the_step_and_exits_1_not_130(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the command line: the step is recorded failed (exit 1, the JSON result printed),
    not taken for a Ctrl-C (exit 130, "interrupted")."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "isolated_tools.py").write_text(TOOLS)
    (tmp_path / "plan.json").write_text(json.dumps(_plan("interrupted")))
    args = ["run", "plan.json", "--tools", "isolated_tools.py", "--yes", "--json"]
    result = CliRunner().invoke(app, [*args, "--store", "memory://"])
    assert result.exit_code == 1, result.output
    steps = {s["id"]: s for s in json.loads(result.stdout)["steps"]}
    assert steps["bad"]["status"] == "failed"
    assert "raised KeyboardInterrupt() in its worker process" in steps["bad"]["error"]["message"]
    assert steps["after"]["status"] == "succeeded"
