"""Plain-text tables, JSON results and the environment stamp shared by the benchmarks."""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).parent / "results"
PACKAGES = ("langgraph", "langgraph-checkpoint", "dask", "planrail", "matplotlib")


def table(headers: list[str], rows: list[list[Any]]) -> str:
    """A plain-text table; the first column is left-aligned, the others right-aligned."""
    cells = [[str(h) for h in headers]] + [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(row: list[str]) -> str:
        first = row[0].ljust(widths[0])
        return "  ".join([first] + [c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)])

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(cells[0]), rule] + [line(r) for r in cells[1:]])


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 100 else f"{value:.0f}"
    return "-" if value is None else str(value)


def environment() -> dict[str, Any]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "loadavg_1_5_15": list(os.getloadavg()),  # other work on the machine skews timings
        "packages": versions,
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def result_path(name: str, quick: bool) -> Path:
    """Quick (CI smoke) results go to ``<name>-quick.json`` so they never replace a full run."""
    return RESULTS_DIR / f"{name}{'-quick' if quick else ''}.json"


def write_json(name: str, quick: bool, payload: dict[str, Any]) -> Path:
    path = result_path(name, quick)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    data = {"benchmark": name, "quick": quick, "environment": environment(), **payload}
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    tmp.replace(path)
    return path
