"""``planrail run --backend ray``: the command line's way onto a Ray cluster."""

from __future__ import annotations

import json
import os
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
