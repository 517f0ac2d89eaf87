"""One contract over every way in: the same plan, tools and policy through ``planrail.run``,
``planrail run``, ``planrail plan`` (a scripted model), ``Agent`` and ``planrail resume`` after a
SIGKILL give the same gate decisions, the same stored step records and the same trace events —
checked from the store and from a receiver-side ledger, not from what planrail reports."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import select
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from typer.testing import CliRunner

import planrail
from planrail.agent import Agent, approve_all
from planrail.cli import app
from planrail.store import open_store
from planrail.testing.llm import ScriptedLLM
from planrail.testing.llm_server import LLMTestServer, Reply

DATA = Path(__file__).resolve().parent / "data"
TOOLS_FILE = DATA / "path_tools.py"
GOAL = "Read the page and note that it was read"
PLAN: dict[str, Any] = {
    "goal": GOAL,
    "steps": [
        {"id": "fetch", "tool": "fetch_page", "args": {"url": "https://example.org/page"}},
        {
            "id": "send",
            "tool": "send_email",
            "args": {"to": "${fetch.email}", "body": "here it is"},
            "depends_on": ["fetch"],
        },
        {"id": "note", "tool": "save_note", "args": {"text": "read"}, "depends_on": ["fetch"]},
    ],
}
POLICY: dict[str, Any] = {
    "rules": [
        {
            "tool": "send_email",
            "arg": "to",
            "from": ["external"],
            "action": "deny",
            "reason": "recipients are typed by the user",
        }
    ]
}
RUN = "run_paths"
EXPECTED_STEPS = {
    "fetch": ("succeeded", None),
    "send": ("failed", "PolicyDeniedError"),
    "note": ("succeeded", None),
}


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """A working directory with the plan, the policy, a store and the receiver's ledger."""
    monkeypatch.chdir(tmp_path)
    ledger = tmp_path / "ledger.jsonl"
    monkeypatch.setenv("PLANRAIL_TEST_LEDGER", str(ledger))
    monkeypatch.setenv("COLUMNS", "200")
    (tmp_path / "plan.json").write_text(json.dumps(PLAN))
    (tmp_path / "policy.json").write_text(json.dumps(POLICY))
    return {
        "dir": tmp_path,
        "ledger": ledger,
        "store": f"sqlite:///{tmp_path / 'runs.db'}",
    }


def _tools() -> ModuleType:
    spec = importlib.util.spec_from_file_location("path_tools_inproc", TOOLS_FILE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _registry() -> list[planrail.Tool]:
    mod = _tools()
    return [mod.fetch_page, mod.send_email, mod.save_note]


def _ledger(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _observed(world: dict[str, Any], run_id: str = RUN) -> dict[str, Any]:
    """What the store and the receiver saw of the run."""
    store = open_store(world["store"])
    try:
        run = store.get_run(run_id)
        assert run is not None, f"run {run_id} is not in the store"
        steps = {
            sid: (str(r.status), (r.error or {}).get("type"))
            for sid, r in store.get_steps(run_id).items()
        }
        events = store.events(run_id)
        decisions = sorted(
            (e.step_id, e.data.get("action"))
            for e in events
            if e.type == "policy_decision" and e.data.get("action") != "allow"
        )
        kinds = {
            (e.type, e.step_id)
            for e in events
            if e.step_id is not None and e.type.startswith(("step_", "policy"))
        }
        policies = run.metadata.get("policies", {})
        approval = run.approval
    finally:
        store.close()
    calls = _ledger(world["ledger"])
    return {
        "steps": steps,
        "decisions": decisions,
        "kinds": kinds,
        "security": policies.get("security"),
        "approved": approval is not None and approval.get("plan_hash") == run.plan_hash,
        "effects": sorted(c["tool"] for c in calls if c["tool"] != "fetch_page"),
        "keys": sorted(c["key"] for c in calls if c["key"] is not None),
    }


def _check(seen: dict[str, Any]) -> None:
    """The contract every way in must meet."""
    assert seen["steps"] == EXPECTED_STEPS
    assert seen["decisions"] == [("send", "deny")]
    assert seen["effects"] == ["save_note"], "the denied e-mail was never sent"
    assert seen["keys"] == [f"{RUN}:note"]
    assert seen["security"] == planrail.SecurityPolicy.from_mapping(POLICY).to_dict()
    assert seen["approved"]
    assert {
        ("step_succeeded", "fetch"),
        ("step_failed", "send"),
        ("policy_decision", "send"),
        ("step_succeeded", "note"),
    } <= seen["kinds"]


def _python(world: dict[str, Any]) -> dict[str, Any]:
    store = open_store(world["store"])
    try:
        result = planrail.run(
            PLAN,
            _registry(),
            store=store,
            run_id=RUN,
            security=planrail.SecurityPolicy.from_mapping(POLICY),
            approver=approve_all,
        )
    finally:
        store.close()
    assert result.status == "failed"
    return _observed(world)


def _cli_run(world: dict[str, Any]) -> dict[str, Any]:
    args = ["run", "plan.json", "--tools", str(TOOLS_FILE), "--policy", "policy.json"]
    args += ["--store", world["store"], "--run-id", RUN, "--yes", "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    return _observed(world)


def _cli_plan(world: dict[str, Any]) -> dict[str, Any]:
    with LLMTestServer() as server:
        server.add(Reply.json(PLAN))
        args = ["plan", GOAL, "--tools", str(TOOLS_FILE), "--policy", "policy.json"]
        args += ["--model", "openai:test-model", "--base-url", server.url, "--no-stream"]
        args += ["--store", world["store"], "--run-id", RUN, "--yes", "--json"]
        result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    return _observed(world)


def _agent(world: dict[str, Any]) -> dict[str, Any]:
    store = open_store(world["store"])
    try:
        agent = Agent(
            ScriptedLLM([json.dumps(PLAN)]),
            _registry(),
            approval=approve_all,
            store=store,
            security=planrail.SecurityPolicy.from_mapping(POLICY),
            run_id=RUN,
        )
        result = asyncio.run(agent.run(GOAL))
    finally:
        store.close()
    assert result.status == "failed", result.reason
    return _observed(world)


def _resume_after_sigkill(world: dict[str, Any]) -> dict[str, Any]:
    """``planrail run`` under the policy is killed inside its first step; ``planrail resume``
    is given no policy at all: the stored one must apply."""
    read, write = os.pipe()
    env = {**os.environ, "PLANRAIL_TEST_HANG_FD": str(write)}
    cmd = [sys.executable, "-c", "from planrail.cli import main; main()", "run", "plan.json"]
    cmd += ["--tools", str(TOOLS_FILE), "--policy", "policy.json", "--store", world["store"]]
    cmd += ["--run-id", RUN, "--yes", "--quiet"]
    proc = subprocess.Popen(cmd, env=env, pass_fds=[write], stdout=subprocess.DEVNULL)
    os.close(write)
    try:
        ready, _, _ = select.select([read], [], [], 60)
        assert ready, "the run never reached its step"
        assert os.read(read, 64) == b"fetched\n"
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        os.close(read)
        if proc.poll() is None:
            proc.kill()
    # The lease of the killed runner has to expire (a same-host takeover is issue 15's).
    args = ["resume", RUN, "--tools", str(TOOLS_FILE), "--store", world["store"], "--json"]
    args += ["--wait", "60"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    return _observed(world)


PATHS = {
    "planrail.run": _python,
    "planrail run": _cli_run,
    "planrail plan": _cli_plan,
    "Agent": _agent,
    "resume after SIGKILL": _resume_after_sigkill,
}


@pytest.mark.parametrize("path", list(PATHS))
def test_every_way_in_gives_the_same_gate_records_and_events(
    world: dict[str, Any], path: str
) -> None:
    """The policy denial holds, the keyed step runs once with its key, the run's policy and
    approval are stored with it, and the same step records and events reach the store."""
    _check(PATHS[path](world))
