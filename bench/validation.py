"""Validation cost: ``planrail.validate`` on generated valid plans of 100 to 100,000 steps.

Each plan mixes tool calls and LLM steps; most steps reference one or two earlier steps (a whole
value, a typed field through a list index, and an embedded reference inside text), declare them in
``depends_on``, and call tools from a registry whose input and output schemas are checked. Every
size is validated several times (after one unmeasured warm-up) and the median is reported, with
microseconds per step and the growth ratio for each tenfold size step: a linear validator grows
about 10× (the target is at most 12×).

Times are CPU seconds of this process (``time.process_time``): on a shared machine wall time
swings by 2× with other people's jobs, CPU time barely moves. Each size is measured twice: with
the garbage collector paused during the call, as ``timeit`` does by default — the validator's
own cost, which is what the linearity target judges — and with it enabled, as in real use.
``check_plan`` pauses the collector itself while its passes run (they make no reference
cycles), so the second figure adds only what the collector does around that pause: the young
collection that the validator's allocations set off as the pause ends, and any collection
before it. CPython's full collections traverse every live object, and a 100,000-step plan
keeps a few million alive, so the second figure can grow faster than the first for reasons
outside the validator; both are printed and written to ``bench/results/validation.json``.
A third figure, ``us/step (run)``, is what a run's validation costs
(``check_plan(..., warnings=False)``, as ``planrail.prepare`` calls it: no warnings, so the
checks that could only warn are not run).

Because even CPU time is disturbed on a busy machine (caches are shared), the number of Python
function calls one validation makes is counted too (``cProfile``): it does not depend on load,
and a linear validator makes the same number of calls per step at every size.

    python -m bench.validation [--quick] [--repeats N]

``--against SRC`` compares this checkout with another one's ``src`` folder on the 10,000-step
plan instead: each round validates it in a fresh process of each (interleaved, so both see the
same load) and the medians of the rounds are reported, with the ratio of calls per step, which
load does not disturb. Before/after a change::

    git archive <commit-before> src | tar -x -C /tmp/planrail-before
    python -m bench.validation --against /tmp/planrail-before/src
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import gc
import json
import os
import pstats
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.report import table, write_json
from planrail.plan.loader import PlanLimits
from planrail.plan.tools import ToolRegistry, ToolSpec
from planrail.plan.validate import check_plan, validate

SIZES = (100, 1_000, 10_000, 100_000)
QUICK_SIZES = (100, 1_000, 10_000)
TARGET_GROWTH = 12.0

_ITEMS = {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "integer"}}}}
_RESULT = {
    "type": "object",
    "properties": {"body": {"type": "string"}, "items": _ITEMS, "score": {"type": "number"}},
    "required": ["body", "items"],
}
TOOLS = ToolRegistry(
    [
        ToolSpec(
            name="fetch",
            input_schema={
                "type": "object",
                "properties": {"url": {"type": "string"}, "retries": {"type": "integer"}},
                "required": ["url"],
            },
            output_schema=_RESULT,
            side_effects="none",
        ),
        ToolSpec(
            name="combine",
            input_schema={
                "type": "object",
                "properties": {
                    "text": {"type": "string"},
                    "item_id": {"type": "integer"},
                    "note": {"type": "string"},
                    "mode": {"type": "string", "enum": ["fast", "careful"]},
                },
                "required": ["text", "mode"],
            },
            output_schema=_RESULT,
        ),
    ]
    + [ToolSpec(name=f"tool_{i}") for i in range(50)]  # a realistic catalog size
)


def generate(n: int, seed: int = 1) -> dict[str, Any]:
    """A valid plan of ``n`` steps: references mostly to nearby steps, some to any earlier one."""
    rng = random.Random(seed)
    steps: list[dict[str, Any]] = []
    for i in range(n):
        sid = f"s{i}"
        if i < 3 or rng.random() < 0.1:
            steps.append({"id": sid, "tool": "fetch", "args": {"url": f"https://example.com/{i}"}})
            continue
        near = f"s{rng.randrange(max(0, i - 20), i)}"
        far = f"s{rng.randrange(i)}"
        if rng.random() < 0.1:
            steps.append(
                {
                    "id": sid,
                    "action": "llm_call",
                    "prompt": f"Summarise ${{{near}.body}} for the report.",
                    "output_schema": _RESULT,
                    "depends_on": [near],
                }
            )
            continue
        steps.append(
            {
                "id": sid,
                "tool": "combine",
                "args": {
                    "text": f"${{{near}.body}}",
                    "item_id": f"${{{far}.items.0.id}}",
                    "note": f"from ${{{near}.body}} and ${{{far}}}",
                    "mode": "fast",
                },
                "depends_on": sorted({near, far}),
            }
        )
    return {"goal": f"benchmark plan of {n} steps", "steps": steps, "output": "${s0.body}"}


LIMITS = PlanLimits(max_steps=1_000_000, max_plan_bytes=1 << 30, max_nodes=100_000_000)


def _cold() -> None:
    """Forget parsed references: every measured validation parses its plan from scratch (a
    warm cache would make plans under its size look cheaper than bigger ones). Since the
    compiled plan, planrail keeps no process-wide parse cache; older checkouts measured with
    ``--against`` had one."""
    from planrail.plan import refs

    cached = getattr(refs, "_parse_template_cached", None)
    if cached is not None:
        cached.cache_clear()


def _cpu_seconds(plan: dict[str, Any], gc_enabled: bool, run: bool = False) -> float:
    _cold()
    gc.collect()
    if not gc_enabled:
        gc.disable()
    # run: what planrail.prepare validates (no warnings, so the checks that could only warn are
    # not run); validate() otherwise, which older trees measured with --against also have
    check = functools.partial(check_plan, warnings=False) if run else validate
    try:
        start = time.process_time()
        check(plan, TOOLS, limits=LIMITS)
        return time.process_time() - start
    finally:
        gc.enable()


def measure(n: int, repeats: int) -> dict[str, Any]:
    plan = generate(n)
    report = validate(plan, TOOLS, limits=LIMITS)  # warm-up, and a check that the plan is valid
    if not report.valid:
        raise SystemExit(f"generated plan of {n} steps is invalid: {report.errors[:3]}")
    profile = cProfile.Profile()
    _cold()
    profile.runcall(validate, plan, TOOLS, limits=LIMITS)
    row: dict[str, Any] = {
        "steps": n,
        "repeats": repeats,
        "calls": pstats.Stats(profile).total_calls,
    }
    for key, gc_enabled, run in (("gc_off", False, False), ("gc_on", True, False),
                                 ("run", True, True)):  # fmt: skip
        times = [_cpu_seconds(plan, gc_enabled, run) for _ in range(repeats)]
        median = statistics.median(times)
        row[key] = {"median_cpu_s": median, "cpu_s": times, "us_per_step": median / n * 1e6}
    return row


AGAINST_STEPS = 10_000


def _child(n: int, repeats: int) -> None:
    """One side of ``--against``: print this interpreter's figures as JSON."""
    plan = generate(n)
    validate(plan, TOOLS, limits=LIMITS)  # warm-up
    profile = cProfile.Profile()
    _cold()
    profile.runcall(validate, plan, TOOLS, limits=LIMITS)
    median = statistics.median(_cpu_seconds(plan, gc_enabled=False) for _ in range(repeats))
    calls = pstats.Stats(profile).total_calls / n
    print(json.dumps({"us_per_step": median / n * 1e6, "calls": calls}))


def against(src: Path, rounds: int, repeats: int) -> dict[str, Any]:
    """``--against``: the 10,000-step plan, alternately in ``src``'s planrail and this one."""
    here = Path(__file__).resolve().parents[1]
    sides = {"before": src.resolve(), "after": here / "src"}
    got: dict[str, list[dict[str, float]]] = {k: [] for k in sides}
    for r in range(rounds):
        for side, path in sides.items():
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(path), str(here)])}
            out = subprocess.run(
                [sys.executable, "-m", "bench.validation", "--child", str(repeats)],
                cwd=here, env=env, capture_output=True, text=True, check=True,
            )  # fmt: skip
            got[side].append(json.loads(out.stdout.splitlines()[-1]))
        print(f"  round {r + 1}/{rounds}", flush=True)
    med = {
        side: {k: statistics.median(x[k] for x in rows) for k in ("us_per_step", "calls")}
        for side, rows in got.items()
    }
    pairs = zip(got["after"], got["before"], strict=True)
    per_round = [a["us_per_step"] / b["us_per_step"] for a, b in pairs]
    ratio = statistics.median(per_round)
    calls = med["after"]["calls"] / med["before"]["calls"]
    print(
        table(
            ["", "us/step (median of rounds)", "calls/step"],
            [[side, m["us_per_step"], round(m["calls"])] for side, m in med.items()],
        )
    )
    print(
        f"\nafter / before ({AGAINST_STEPS:,} steps): {ratio:.3f}x CPU time (median of the"
        f" rounds' ratios: {', '.join(f'{r:.3f}' for r in per_round)}), {calls:.3f}x calls"
    )
    payload = {"steps": AGAINST_STEPS, "rounds": got, "median": med, "ratios": per_round,
               "ratio": ratio, "calls_ratio": calls, "before_src": str(src)}  # fmt: skip
    print(f"results: {write_json('validation-against', False, payload)}")
    return payload


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="sizes up to 10,000 (CI smoke)")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--against", type=Path, help="another checkout's src folder")
    parser.add_argument("--rounds", type=int, default=5, help="with --against")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        _child(AGAINST_STEPS, args.child)
        return {}
    if args.against is not None:
        return against(args.against, args.rounds, args.repeats or 5)
    sizes = QUICK_SIZES if args.quick else SIZES
    print("validation: planrail.validate on generated valid plans (median CPU seconds)")
    rows: list[dict[str, Any]] = []
    for n in sizes:
        repeats = args.repeats or (3 if args.quick or n >= 100_000 else 5)
        row = measure(n, repeats)
        if rows:
            row["calls_growth"] = row["calls"] / rows[-1]["calls"]
            for key in ("gc_off", "gc_on", "run"):
                row[key]["growth"] = row[key]["median_cpu_s"] / rows[-1][key]["median_cpu_s"]
        rows.append(row)
        print(f"  {n:>7,} steps measured", flush=True)

    def cells(r: dict[str, Any]) -> list[Any]:
        growth = r.get("growth")
        return [r["median_cpu_s"], r["us_per_step"], f"{growth:.1f}x" if growth else None]

    body = [
        [f"{r['steps']:,}", r["repeats"], *cells(r["gc_off"]), *cells(r["gc_on"]),
         *cells(r["run"])[1:], round(r["calls"] / r["steps"]),
         f"{r['calls_growth']:.1f}x" if rows.index(r) else None]
        for r in rows
    ]  # fmt: skip
    headers = ["steps", "repeats", "cpu s", "us/step", "growth", "cpu s (gc on)",
               "us/step (gc on)", "growth (gc on)", "us/step (run)", "growth (run)",
               "calls/step", "calls growth"]  # fmt: skip
    print(table(headers, body))
    worst = max((r["gc_off"]["growth"] for r in rows[1:]), default=0.0)
    worst_gc = max((r["gc_on"]["growth"] for r in rows[1:]), default=0.0)
    worst_calls = max((r["calls_growth"] for r in rows[1:]), default=0.0)
    worst_run = max((r["run"]["growth"] for r in rows[1:]), default=0.0)
    verdict = "linear" if worst <= TARGET_GROWTH else "NOT linear"
    print(
        f"\nworst growth per 10x (target <= {TARGET_GROWTH:.0f}x): calls {worst_calls:.1f}x;"
        f" CPU time {worst:.1f}x with the collector paused ({verdict}), {worst_gc:.1f}x with it"
        f" running, {worst_run:.1f}x for a run's validation"
    )
    payload = {
        "target_growth": TARGET_GROWTH,
        "worst_growth": worst,
        "worst_growth_gc_on": worst_gc,
        "worst_calls_growth": worst_calls,
        "worst_growth_run": worst_run,
        "rows": rows,
    }
    path = write_json("validation", args.quick, payload)
    print(f"results: {path}")
    return payload


if __name__ == "__main__":
    main()
