"""``python -m bench.cli`` refuses a DAG it does not know before running anything."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_an_unknown_dag_is_named_with_the_known_ones() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.cli", "--dags", "fan,epigenomics", "--rounds", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "unknown DAG(s) epigenomics;" in done.stderr
    assert "epigenomics-1095" in done.stderr
