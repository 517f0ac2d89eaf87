"""``planrail plan GOAL --max-concurrency N --fail-fast``: the planned run runs as ``planrail run``
and ``resume`` run one given them, as its tools see it. ``plan`` had ``--max-concurrency``
but no ``--fail-fast``: a planned run always went on past a failure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planrail.cli.app import app
from planrail.testing.llm_server import LLMTestServer, Reply

TOOLS = """
import planrail

LOG = {log!r}


@planrail.tool(side_effects="none")
def call_api(name: str) -> str:
    \"\"\"Call the API by name; 'bad' fails.\"\"\"
    with open(LOG, "a") as f:
        f.write(name + "\\n")
    if name == "bad":
        raise ValueError("the API said no")
    return name
"""

PLAN = {
    "goal": "call the API",
    "steps": [
        {"id": "first", "tool": "call_api", "args": {"name": "bad"}},
        {"id": "second", "tool": "call_api", "args": {"name": "fine"}},
    ],
}


@pytest.mark.parametrize(
    ("given", "called", "second"),
    [
        (["--fail-fast"], ["bad"], {"skipped", "cancelled"}),
        ([], ["bad", "fine"], {"succeeded"}),
        (["--no-fail-fast"], ["bad", "fine"], {"succeeded"}),
    ],
    ids=["fail-fast", "neither", "no-fail-fast"],
)
def test_plan_runs_its_plan_fail_fast_when_told(
    tmp_path: Path, server: LLMTestServer, given: list[str], called: list[str], second: set[str]
) -> None:
    """One call at a time, in plan order: ``bad`` fails first; under ``--fail-fast`` the
    independent ``second`` step is never called."""
    log = tmp_path / "calls.log"
    module = tmp_path / "plan_tools.py"
    module.write_text(TOOLS.format(log=str(log)))
    server.add(Reply.json(PLAN))
    args = ["plan", PLAN["goal"], "--tools", str(module), "--model", "openai:test-model"]
    args += ["--base-url", server.url, "--no-stream", "--yes", "--json"]
    args += ["--store", f"sqlite:///{tmp_path / 'runs.db'}", "--max-concurrency", "1", *given]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    steps = {s["id"]: s["status"] for s in data["steps"]}
    assert steps["first"] == "failed"
    assert steps["second"] in second
    assert log.read_text().split() == called
