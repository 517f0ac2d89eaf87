"""Durable runs on the command line: damaged store files, in-doubt steps and ``planrail resolve``,
changed plans.

The damaged-file tests run the real ``planrail`` entry point in a subprocess (exit codes and
stderr as a user sees them); the others use typer's ``CliRunner`` in this process.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import planrail
from planrail.cli import app
from planrail.engine.executor import Execution
from planrail.store import SQLiteStore
from planrail.testing import FakeClock

from . import cli_tools
from .helpers import WALL, DyingStore

TOOLS_FILE = str(Path(cli_tools.__file__))
TOOLS = [cli_tools.keyed_write, cli_tools.unsafe_write]
RUN = "run_cli"


@pytest.fixture
def calls_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the tools record their calls (``$PLANRAIL_TEST_CALLS``)."""
    path = tmp_path / "calls.jsonl"
    monkeypatch.setenv("PLANRAIL_TEST_CALLS", str(path))
    return path


@pytest.fixture
def crashed(tmp_path: Path, calls_file: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A SQLite store holding run ``RUN`` whose runner died right after ``b``'s effect (``a``
    succeeded, ``b`` is recorded as running, ``c`` never started), long ago (its lease expired)."""
    db = tmp_path / "runs.db"
    store = SQLiteStore(db)
    dying = DyingStore(store)

    async def crash() -> None:
        died = asyncio.Event()

        async def hook(step: str) -> None:
            if step == "b":
                dying.die()
                died.set()
                await asyncio.Event().wait()

        monkeypatch.setattr(cli_tools, "HOOK", hook)
        plan = planrail.validate(cli_tools.PLAN, TOOLS).raise_for_errors()
        execution = Execution(
            plan, TOOLS, store=dying, run_id=RUN, clock=FakeClock(wall=WALL), approve=True
        )
        task = asyncio.create_task(execution.run())
        await died.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(crash())
    monkeypatch.setattr(cli_tools, "HOOK", None)
    store.close()
    assert [c["step"] for c in cli_tools.calls(calls_file)] == ["a", "b"]
    return db


def cli(*args: str) -> tuple[int, Any, str]:
    """Run ``planrail ARGS`` in this process: (exit code, parsed JSON stdout or None, stderr)."""
    result = CliRunner().invoke(app, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    try:
        data = json.loads(result.stdout)
    except json.JSONDecodeError:
        data = None
    return result.exit_code, data, result.stderr


def statuses(data: dict[str, Any]) -> dict[str, str]:
    return {s["id"]: s["status"] for s in data["steps"]}


# ---------------------------------------------------------------------------- damaged files


def _truncate(db: Path) -> None:
    with open(db, "r+b") as f:
        f.truncate(db.stat().st_size // 2)


def _empty(db: Path) -> None:
    db.write_bytes(b"")


def _scramble(db: Path) -> None:
    data = bytearray(db.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    for i in range(page, len(data)):  # every page but the first (the header and schema)
        data[i] = (i * 131 + 7) % 256
    db.write_bytes(bytes(data))


def planrail_cmd(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The real ``planrail`` entry point in a subprocess."""
    code = "import sys; from planrail.cli import main; sys.exit(main())"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


@pytest.mark.parametrize("damage", [_truncate, _empty, _scramble], ids=lambda f: f.__name__[1:])
def test_resume_on_a_damaged_store_is_a_clean_error(
    crashed: Path, calls_file: Path, damage: Any
) -> None:
    """``planrail resume`` on a truncated, emptied or scrambled store file: exit 2, one error
    line naming the file, no traceback, and no tool called (nothing re-executed)."""
    assert not Path(f"{crashed}-wal").exists(), "the WAL was not checkpointed into the file"
    damage(crashed)
    before = len(cli_tools.calls(calls_file))

    proc = planrail_cmd(
        "resume",
        RUN,
        "--tools",
        TOOLS_FILE,
        "--store",
        f"sqlite:///{crashed}",
        env=dict(os.environ),
    )

    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert str(crashed) in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert len(cli_tools.calls(calls_file)) == before


def test_run_with_a_truncated_store_is_a_clean_error(
    crashed: Path, calls_file: Path, tmp_path: Path
) -> None:
    """``planrail run --store`` on a truncated file: exit 2 saying the file is truncated, and the
    plan is not executed (neither as a resume nor as a new run)."""
    _truncate(crashed)
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(cli_tools.PLAN))
    before = len(cli_tools.calls(calls_file))

    proc = planrail_cmd(
        "run",
        str(plan_file),
        "--tools",
        TOOLS_FILE,
        "--store",
        f"sqlite:///{crashed}",
        "--run-id",
        RUN,
        "--yes",
        env=dict(os.environ),
    )

    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "truncated" in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert len(cli_tools.calls(calls_file)) == before


# ---------------------------------------------------------------------------- in doubt, resolve


def test_in_doubt_step_resolved_as_succeeded_then_resume_completes(
    crashed: Path, calls_file: Path
) -> None:
    """Resume finds ``b`` (unsafe) started-but-unfinished: exit 1, ``b`` in_doubt in ``resume
    --json`` and ``show --json``; ``resolve b --succeeded --output`` records the operator's
    output; the next resume completes without calling ``b`` and feeds that output to ``c``."""
    store = f"sqlite:///{crashed}"

    code, data, _ = cli("resume", RUN, "--tools", TOOLS_FILE, "--store", store, "--json")
    assert code == 1
    assert statuses(data) == {"a": "succeeded", "b": "in_doubt", "c": "pending"}
    assert "planrail resolve" in data["error"]
    code, shown, _ = cli("show", RUN, "--store", store, "--json")
    assert statuses(shown)["b"] == "in_doubt"

    output = json.dumps({"step": "b", "token": "decided-by-operator"})
    code, _, _ = cli("resolve", RUN, "b", "--succeeded", "--output", output, "--store", store)
    assert code == 0

    code, data, _ = cli("resume", RUN, "--tools", TOOLS_FILE, "--store", store, "--json")
    assert code == 0
    assert statuses(data) == {"a": "succeeded", "b": "succeeded", "c": "succeeded"}
    steps = [c["step"] for c in cli_tools.calls(calls_file)]
    assert steps == ["a", "b", "c"], "a and b ran once each, before the crash"
    assert cli_tools.calls(calls_file)[-1]["inputs"] == ["decided-by-operator"]


def test_in_doubt_step_resolved_for_retry_runs_again_with_its_key(
    crashed: Path, calls_file: Path
) -> None:
    """``resolve b --retry``: the next resume calls ``b`` again (same key, same arguments), then
    ``c``; ``a`` is never called again."""
    store = f"sqlite:///{crashed}"
    cli("resume", RUN, "--tools", TOOLS_FILE, "--store", store, "--json")

    code, _, _ = cli("resolve", RUN, "b", "--retry", "--store", store)
    assert code == 0
    code, data, _ = cli("resume", RUN, "--tools", TOOLS_FILE, "--store", store, "--json")

    assert code == 0
    assert data["status"] == "succeeded"
    recorded = cli_tools.calls(calls_file)
    assert [c["step"] for c in recorded] == ["a", "b", "b", "c"]
    assert recorded[1] == recorded[2]


def test_resolve_refuses_a_step_that_is_not_in_doubt(crashed: Path) -> None:
    """``resolve`` on a succeeded step, or without a decision, is a usage error (exit 2)."""
    store = f"sqlite:///{crashed}"
    assert cli("resolve", RUN, "a", "--retry", "--store", store)[0] == 2
    assert cli("resolve", RUN, "b", "--store", store)[0] == 2


def test_run_with_an_existing_run_id_and_a_changed_plan_is_refused(
    crashed: Path, calls_file: Path, tmp_path: Path
) -> None:
    """``planrail run --run-id`` naming a run of another plan: exit 2, nothing called."""
    changed = json.loads(json.dumps(cli_tools.PLAN))
    changed["goal"] = "another goal"
    plan_file = tmp_path / "changed.json"
    plan_file.write_text(json.dumps(changed))
    before = len(cli_tools.calls(calls_file))

    code, _, err = cli(
        "run",
        str(plan_file),
        "--tools",
        TOOLS_FILE,
        "--store",
        f"sqlite:///{crashed}",
        "--run-id",
        RUN,
        "--yes",
        "--json",
    )

    assert code == 2
    assert "another plan" in err
    assert len(cli_tools.calls(calls_file)) == before
