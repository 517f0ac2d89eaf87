"""``planrail run --backend ray``: the command line's way onto a Ray cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from planrail.cli import app

from .ledger import Ledger


def _plan(tmp_path: Path, ledger: Ledger) -> Path:
    at = str(ledger)
    plan = {
        "goal": "a sync step, then an async one",
        "steps": [
            {"id": "a", "tool": "work", "args": {"ledger": at, "step": "a"}},
            {
                "id": "b",
                "tool": "awork",
                "args": {"ledger": at, "step": "b", "inputs": {"a": "${a}"}},
                "depends_on": ["a"],
            },
        ],
    }
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    return path


@pytest.mark.ray
def test_run_with_the_ray_backend_runs_the_tools_on_ray_workers(
    ray_runtime: Any, ledger: Ledger, tmp_path: Path
) -> None:
    """``--backend ray`` attaches to the running Ray runtime: the run succeeds, and both tools
    ran in Ray worker processes, not in the CLI's."""
    args = ["run", str(_plan(tmp_path, ledger)), "--tools", "runners.tools", "--yes", "--json"]
    args += ["--store", f"sqlite:///{tmp_path / 'runs.db'}", "--backend", "ray"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["status"] == "succeeded"
    pids = {e["pid"] for e in ledger.entries("start")}
    assert len(pids) >= 1
    assert os.getpid() not in pids


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--backend", "spark"], "--backend must be local or ray"),
        (["--ray-address", "auto"], "--ray-address needs --backend ray"),
    ],
)
def test_a_wrong_backend_option_is_a_usage_error(
    extra: list[str], message: str, ledger: Ledger, tmp_path: Path
) -> None:
    """An unknown backend, or a Ray address without the Ray backend, exits 2 saying so."""
    args = ["run", str(_plan(tmp_path, ledger)), "--tools", "runners.tools", "--yes", *extra]
    args += ["--store", f"sqlite:///{tmp_path / 'runs.db'}"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert message in result.output
    assert ledger.entries() == []


def test_a_ray_address_that_cannot_be_reached_is_a_usage_error(
    ledger: Ledger, tmp_path: Path
) -> None:
    """``--ray-address ray://…`` that Ray cannot use (Ray Client not installed, nothing
    listening) exits 2 naming the address, before any step; it was a traceback. In a process
    of its own: this session's Ray runtime is already attached in this one."""
    pytest.importorskip("ray")
    args = ["run", str(_plan(tmp_path, ledger)), "--tools", "runners.tools", "--yes"]
    args += ["--store", f"sqlite:///{tmp_path / 'runs.db'}"]
    args += ["--backend", "ray", "--ray-address", "ray://127.0.0.1:1"]
    code = "from planrail.cli import main; main()"
    tests = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=120
    )
    said = " ".join(done.stdout.split() + done.stderr.split())
    assert done.returncode == 2, said
    assert "Ray at ray://127.0.0.1:1 could not be started or reached" in said
    assert "Traceback" not in said
    assert ledger.entries() == []
