"""Hostile-input measurements: reference parsing time up to 1 MB, and coverage-guided fuzzing.

1. **Linearity.** ``parse_template`` on adversarial strings of 1 KB to 1 MB (each shape scaled
   by 4× per row): many references, bracketed keys, escapes, runs of ``$``, long literal text,
   and strings whose first reference is malformed at the very end. Reported: median CPU time
   (``time.process_time``, robust to other load), microseconds per KB, and the growth ratio per
   4× step — a linear parser grows about 4×; the target is at most 5×. These are measurements
   printed and written to ``bench/results/security_fuzz.json``, not test assertions.

2. **Fuzzing with atheris** (libFuzzer for Python, when ``pip install atheris`` works) of
   reference parsing, plan loading + validation, and predicates, each in a subprocess for a
   fixed number of runs; any exception other than the documented planrail errors is a crash.
   Without atheris this part says so; the hypothesis targets in ``tests/security/test_fuzz.py``
   (``pytest -m slow``) cover the same code.

    python -m bench.security_fuzz [--quick] [--runs N] [--no-atheris]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from bench.report import environment, table, write_json
from planrail.errors import ReferenceSyntaxError
from planrail.plan.refs import (
    _parse_template,  # the parser itself, past the cache
)

_parse: Callable[[str], Any] = _parse_template
"""The parser itself, past the template cache (a cached call would time a dict lookup)."""

KB = 1024
SIZES = [KB * 4**i for i in range(6)]  # 1 KB … 1 MB


def _fill(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


def _shapes() -> dict[str, Callable[[int], str]]:
    return {
        "simple refs": lambda n: _fill("${s1.a.b.0} ", n),
        "bracket refs": lambda n: _fill('${s1["k y"][3].z} ', n),
        "escapes $${": lambda n: _fill("$${x} ", n),
        "runs of $": lambda n: "$" * n,
        "literal text": lambda n: _fill("lorem ipsum {0.__class__} {{ x }} ", n),
        "dollar-letter": lambda n: _fill("$a", n),
        "bad ref at end": lambda n: _fill("${s1.a} ", n - 8) + "${s1.-1}",
        "unterminated": lambda n: "${" + "a" * (n - 2),
        "max-length refs": lambda n: _fill("${s1" + ".a" * 16 + "} ", n),
    }


def _time_once(text: str) -> float:
    t0 = time.process_time()
    with contextlib.suppress(ReferenceSyntaxError):
        _parse(text)
    return time.process_time() - t0


def linearity(sizes: list[int], repeats: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for name, make in _shapes().items():
        previous: float | None = None
        for size in sizes:
            text = make(size)
            _time_once(text)  # warm-up
            gc.disable()
            try:
                times = [_time_once(text) for _ in range(repeats)]
            finally:
                gc.enable()
            median = statistics.median(times)
            ratio = None if previous in (None, 0.0) else median / previous  # type: ignore[operator]
            rows.append(
                {
                    "shape": name,
                    "bytes": len(text.encode()),
                    "seconds": median,
                    "us_per_kb": median * 1e6 / (len(text) / KB),
                    "ratio_4x": ratio,
                }
            )
            previous = median
    return rows


# ---------------------------------------------------------------- atheris

_TARGETS: dict[str, str] = {
    "references": """
from planrail.errors import ReferenceSyntaxError
from planrail.plan.refs import parse_reference, parse_template
def test(data):
    text = atheris.FuzzedDataProvider(data).ConsumeUnicodeNoSurrogates(4096)
    try:
        t = parse_template(text)
    except ReferenceSyntaxError:
        return
    for r in t.references:
        assert parse_reference(str(r)) == r
""",
    "plans": """
from planrail.errors import PlanLoadError
from planrail.plan.loader import PlanLimits
from planrail.plan.validate import validate
LIMITS = PlanLimits(max_plan_bytes=32 * 1024, max_depth=16)
def test(data):
    text = atheris.FuzzedDataProvider(data).ConsumeUnicodeNoSurrogates(8192)
    if text.lstrip()[:1] not in ("{", "["):
        text = '{"steps": [' + text + ']}'
    validate(text, None, limits=LIMITS)
""",
    "predicates": """
import json
from planrail.errors import PlanrailError
from planrail.plan.predicates import compile_predicate
OUT = {"a": {"x": 1, "s": "abc", "l": [1, 2]}, "b": True}
def test(data):
    text = atheris.FuzzedDataProvider(data).ConsumeUnicodeNoSurrogates(2048)
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return
    try:
        compile_predicate(value).evaluate(OUT)
    except PlanrailError:
        pass
""",
}

_HARNESS = """
import sys, atheris
with atheris.instrument_imports():
{body}
atheris.Setup(sys.argv, test)
atheris.Fuzz()
"""


def fuzz(runs: int) -> list[dict[str, Any]]:
    try:
        import atheris  # noqa: F401
    except ImportError:
        print("atheris is not installed (pip install atheris); skipping coverage-guided fuzzing")
        return []
    rows = []
    for name, body in _TARGETS.items():
        code = _HARNESS.format(body="\n".join("    " + line for line in body.strip().splitlines()))
        started = time.monotonic()
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                code,
                f"-runs={runs}",
                "-max_len=8192",
                "-rss_limit_mb=2048",
                "-timeout=10",
            ],
            capture_output=True,
            text=True,
            timeout=3600,
            env={**os.environ, "PYTHONHASHSEED": "0"},
        )
        found = re.findall(r"Done (\d+) runs", proc.stderr)
        crashed = proc.returncode != 0
        rows.append(
            {
                "target": name,
                "runs": int(found[-1]) if found else 0,
                "crashes": 1 if crashed else 0,
                "seconds": time.monotonic() - started,
                "detail": proc.stderr[-2000:] if crashed else "",
            }
        )
    return rows


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="up to 256 KB, 2,000 fuzz runs")
    parser.add_argument("--runs", type=int, default=None, help="atheris runs per target")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-atheris", action="store_true")
    args = parser.parse_args(argv)
    sizes = SIZES[:5] if args.quick else SIZES
    rows = linearity(sizes, args.repeats)
    print(
        table(
            ["shape", "bytes", "CPU s", "µs/KB", "×4 ratio"],
            [[r["shape"], r["bytes"], r["seconds"], r["us_per_kb"], r["ratio_4x"]] for r in rows],
        )
    )
    worst = max(
        (r["ratio_4x"] for r in rows if r["ratio_4x"] and r["bytes"] >= 64 * KB), default=None
    )
    print(f"\nworst growth per 4× from 64 KB up: {worst:.2f}× (linear ≈ 4×)" if worst else "")
    fuzz_rows: list[dict[str, Any]] = []
    if not args.no_atheris:
        fuzz_rows = fuzz(args.runs or (2_000 if args.quick else 100_000))
        if fuzz_rows:
            print()
            print(
                table(
                    ["target", "runs", "crashes", "seconds"],
                    [[r["target"], r["runs"], r["crashes"], r["seconds"]] for r in fuzz_rows],
                )
            )
            for r in fuzz_rows:
                if r["crashes"]:
                    print(f"\n--- {r['target']} crashed:\n{r['detail']}")
    payload = {
        "environment": environment(),
        "linearity": rows,
        "worst_ratio_4x": worst,
        "fuzz": fuzz_rows,
    }
    path = write_json("security_fuzz", args.quick, payload)
    print(f"\nwritten to {path}")
    return payload


if __name__ == "__main__":
    main()
