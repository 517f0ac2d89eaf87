"""Secrets never printed: every CLI output path, with a secret-producing tool, grepped for the
secret; only ``--show-secrets`` prints it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from planrail.testing import LLMTestServer, Reply

VAULT = "CANARY-cli-vault-5e6f7a8b"
LITERAL = "CANARY-cli-literal-1c2d3e4f"

TOOLS = f"""
from typing import Annotated
import planrail
from planrail.plan.secrets import SECRET

@planrail.tool(side_effects="none", sensitivity="secret")
def vault(name: str) -> dict:
    return {{"token": {VAULT!r}}}

@planrail.tool(side_effects="idempotent")
def call_api(token: Annotated[str, SECRET], query: str) -> dict:
    return {{"echo": "used " + token}}

@planrail.tool(side_effects="none")
def leaky(key: Annotated[str, SECRET], fail: bool = False) -> dict:
    if fail:
        raise RuntimeError("upstream refused key " + key)
    return {{"echo": "key=" + key}}
"""

PLAN = {
    "goal": "use credentials",
    "steps": [
        {"id": "v", "tool": "vault", "args": {"name": "prod"}},
        {
            "id": "a",
            "tool": "call_api",
            "args": {"token": "${v.token}", "query": "weather"},
            "depends_on": ["v"],
        },
        {"id": "c", "tool": "leaky", "args": {"key": LITERAL, "fail": True}},
        {"id": "d", "tool": "leaky", "args": {"key": LITERAL}},
    ],
    "output": {"token": "${v.token}", "echo": "${a.echo}", "d": "${d.echo}"},
}


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from planrail.cli import main; main()", *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        check=False,
        timeout=120,
    )


def _clean(proc: subprocess.CompletedProcess[str]) -> None:
    out = proc.stdout + proc.stderr
    assert VAULT not in out, out
    assert LITERAL not in out, out


def test_no_cli_output_path_prints_a_secret(tmp_path: Path) -> None:
    """run (summary, --json, --quiet), show (run, --step, --json, --trace), graph, runs,
    resume, review, validate and plan (human and --json) never print the secret values."""
    tools = tmp_path / "tools.py"
    tools.write_text(TOOLS)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(PLAN))
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    trace = tmp_path / "t.jsonl"
    common = ["--tools", str(tools), "--store", store, "--yes"]
    outputs = [
        _cli("run", str(plan), *common, "--run-id", "r1", "--trace", str(trace)),
        _cli("run", str(plan), *common, "--run-id", "r2", "--json"),
        _cli("run", str(plan), *common, "--run-id", "r3", "--quiet"),
        _cli("show", "r1", "--store", store),
        _cli("show", "r1", "--store", store, "--json"),
        _cli("show", "--trace", str(trace)),
        _cli("graph", "r1", "--store", store),
        _cli("graph", str(plan)),
        _cli("runs", "--store", store),
        _cli("resume", "r1", "--tools", str(tools), "--store", store, "--yes"),
        _cli("resume", "r2", "--tools", str(tools), "--store", store, "--yes", "--json"),
        _cli("review", str(plan), "--tools", str(tools)),
        _cli("review", str(plan), "--tools", str(tools), "--json"),
        _cli("validate", str(plan), "--tools", str(tools)),
    ]
    outputs.append(_cli("show", "r1", "--store", store, "--step", "v"))
    outputs.append(_cli("show", "r1", "--store", store, "--step", "c", "--json"))
    assert outputs[0].returncode == 1  # the failing step failed; the rest ran
    ran = {s["id"]: s for s in json.loads(outputs[1].stdout)["steps"]}
    assert ran["v"]["output"] == "***"
    assert "upstream refused key ***" in ran["c"]["error"]["message"]
    for proc in outputs:
        _clean(proc)
    with LLMTestServer() as server:
        for extra in ([], ["--json"]):
            server.add(Reply.json(PLAN))
            proc = _cli(
                "plan",
                PLAN["goal"],
                *common,
                "--model",
                "openai:test-model",
                "--base-url",
                server.url,
                "--no-stream",
                *extra,
            )
            assert proc.returncode == 1, proc.stdout + proc.stderr
            _clean(proc)


def test_show_secrets_is_the_explicit_opt_in(tmp_path: Path) -> None:
    """``run --show-secrets`` prints the secret output in clear (local debugging)."""
    tools = tmp_path / "tools.py"
    tools.write_text(TOOLS)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(PLAN))
    args = ["--tools", str(tools), "--store", "memory://", "--yes", "--json", "--show-secrets"]
    proc = _cli("run", str(plan), *args)
    ran = {s["id"]: s for s in json.loads(proc.stdout)["steps"]}
    assert ran["v"]["output"] == {"token": VAULT}


def test_resume_of_a_run_with_secrets_in_its_plan_says_how_to_continue_it(tmp_path: Path) -> None:
    """A stored plan holds ``***`` where the plan had a secret literal: ``planrail resume``
    resumes as every door does (``planrail.runs.resume``) and says to continue it with the
    plan file (exit 2), as the Python API, MCP and the dashboard say; it runs nothing."""
    tools = tmp_path / "tools.py"
    tools.write_text(TOOLS)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(PLAN))
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    first = _cli(
        "run", str(plan), "--tools", str(tools), "--store", store, "--yes", "--run-id", "r1"
    )
    assert first.returncode == 1  # step c failed: the run is resumable
    again = _cli("resume", "r1", "--tools", str(tools), "--store", store, "--yes")
    out = again.stdout + again.stderr
    assert again.returncode == 2, out
    assert "secret values written in its plan" in out
    assert "planrail run PLAN --run-id r1" in " ".join(out.split())
    _clean(again)
    shown = json.loads(_cli("show", "r1", "--store", store, "--json").stdout)
    assert shown["status"] == "failed"  # untouched
