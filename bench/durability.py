"""Durable overhead: what checkpointing costs per step, per store, in one command.

A layered DAG (width 100, 1-3 dependencies per step) of zero-duration steps, each calling a
``keyed`` tool — so every step records an intent before its call and an outcome after it, as
any side-effecting step does. For each configuration, a fresh subprocess validates the plan
(not timed) and times ``Execution(plan, tools, store=...).run()``:

- ``none``: no store (nothing durable);
- ``memory``: ``MemoryStore`` (the checkpoint path, without I/O);
- ``sqlite``: ``SQLiteStore`` on a temporary file (the default store; ``synchronous=FULL``);
- ``sqlite_normal``: the same with ``durable=False`` (``synchronous=NORMAL``: safe against a
  crash of the process, not against power loss);
- ``postgres``: ``PostgresStore`` in a fresh schema, when ``$PLANRAIL_TEST_PG_URL`` or
  ``postgresql://postgres@127.0.0.1:5432/test`` answers.

It prints µs per step (wall time, and the process's CPU time), store commits per step, and each
store's ratio to ``memory`` (the target for ``sqlite``: at most 10x), then writes
``bench/results/durability[-quick].json``. The configurations run in rounds (3; one with
``--quick``; PostgreSQL in the first only), each round running every configuration once, so a
change of the machine's load during the command hits all of them; figures are medians over the
rounds, and ratios are medians of the per-round ratios.

    python -m bench.durability [--quick] [--rounds N] [--configs none,memory,sqlite]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from bench import dags
from bench.engines.base import short_ids
from bench.report import table, write_json

STEPS = 10_000
QUICK_STEPS = 2_000
WIDTH = 100
CONFIGS = ("none", "memory", "sqlite", "sqlite_normal", "postgres")
TIMEOUT_S = 1800.0
LOCAL_PG = "postgresql://postgres@127.0.0.1:5432/test"
ROOT = Path(__file__).resolve().parent.parent


def _plan(n: int, shape: str = "wide") -> dict[str, Any]:
    if shape == "chain":
        dag = short_ids(dags.chain(n, durations="zero"))
    else:
        dag = short_ids(dags.layered(n, WIDTH, seed=0, durations="zero"))
    steps = [
        {
            "id": s["id"],
            "tool": "node",
            "args": {"id": s["id"], "inputs": [f"${{{d}}}" for d in s["depends_on"]]},
            "depends_on": s["depends_on"],
        }
        for s in dag["steps"]
    ]
    return {"goal": "durable overhead", "steps": steps}


def _with_search_path(url: str, schema: str) -> str:
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    query["options"] = f"{query.get('options', '')} -csearch_path={schema}".strip()
    return urlunsplit(parts._replace(query=urlencode(query)))


def postgres_url() -> str | None:
    """A PostgreSQL server to measure on, or None."""
    try:
        import psycopg
    except ImportError:
        return None
    url = os.environ.get("PLANRAIL_TEST_PG_URL") or LOCAL_PG
    try:
        psycopg.connect(url, connect_timeout=3).close()
    except Exception:
        return None
    return url


class Counting:
    """Counts a store's commits (every write of run state goes through ``commit``)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.commits = 0

    def commit(self, **kwargs: Any) -> Any:
        self.commits += 1
        return self.inner.commit(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def child(config: str, n: int, shape: str = "wide") -> dict[str, Any]:
    """One timed run, inside a fresh subprocess; the parent reads the JSON it prints."""
    import planrail
    from planrail.engine.executor import Execution
    from planrail.store import MemoryStore, SQLiteStore

    @planrail.tool(side_effects="keyed")
    async def node(id: str, inputs: list[str]) -> str:
        """Zero work: returns its id."""
        return id

    plan = planrail.validate(_plan(n, shape), [node]).raise_for_errors()
    with tempfile.TemporaryDirectory(prefix="planrail-bench-") as tmp:
        schema = None
        if config == "none":
            store = None
        elif config == "memory":
            store = MemoryStore()
        elif config in ("sqlite", "sqlite_normal"):
            store = SQLiteStore(Path(tmp) / "runs.db", durable=config == "sqlite")
        else:
            store, schema = _pg_store()
        counted = Counting(store) if store is not None else None
        execution = Execution(
            plan,
            [node],
            store=counted,  # type: ignore[arg-type]
            run_id=f"bench_{uuid.uuid4().hex}",
            approve=True,  # keyed steps change the world: the caller approves
        )
        t0, c0 = time.perf_counter(), time.process_time()
        result = asyncio.run(execution.run())
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        if store is not None:
            store.close()
        if schema is not None:
            _drop_schema(schema)
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "commits": counted.commits if counted is not None else 0,
        "status": result.status,
    }


def _pg_store() -> tuple[Any, str]:
    import psycopg

    from planrail.store.postgres import PostgresStore

    url = postgres_url()
    assert url is not None
    schema = f"planrail_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    return PostgresStore(_with_search_path(url, schema)), schema


def _drop_schema(schema: str) -> None:
    import psycopg

    url = postgres_url()
    assert url is not None
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def in_subprocess(config: str, n: int, shape: str = "wide") -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench.durability", "--child", config, str(n), shape]
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"skipped": f"timeout after {TIMEOUT_S:.0f} s"}
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr else "failed"}
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def summarise(runs: list[dict[str, Any]], n: int) -> dict[str, Any]:
    """Medians over the rounds of one configuration."""
    ok = [r for r in runs if "wall_s" in r]
    if not ok:
        return runs[0] if runs else {"skipped": "not run"}
    return {
        "us_per_step": statistics.median(r["wall_s"] for r in ok) / n * 1e6,
        "cpu_us_per_step": statistics.median(r["cpu_s"] for r in ok) / n * 1e6,
        "commits_per_step": statistics.median(r["commits"] for r in ok) / n,
        "statuses": [r["status"] for r in ok],
        "runs": runs,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_STEPS} steps, one round")
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--rounds", type=int, default=None, help="default: 3 (--quick: 1)")
    parser.add_argument(
        "--chain", type=int, default=None, help="steps of the chain-shaped plan (default: N/10)"
    )
    parser.add_argument(
        "--child", nargs=3, metavar=("CONFIG", "N", "SHAPE"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.child:
        config, n, shape = args.child
        print(json.dumps(child(config, int(n), shape)))
        return {}
    n = QUICK_STEPS if args.quick else STEPS
    rounds = args.rounds or (1 if args.quick else 3)
    configs = [c for c in args.configs.split(",") if c]
    if "postgres" in configs and postgres_url() is None:
        configs.remove("postgres")
        print("postgres: skipped (no PostgreSQL server answered)")
    chain_n = args.chain or n // 10
    payload: dict[str, Any] = {"steps": n, "width": WIDTH, "rounds": rounds}
    for shape, size in (("wide", n), ("chain", chain_n)):
        if shape == "wide":
            print(f"durable overhead: layered DAG of {n} zero-duration keyed steps, width {WIDTH}")
        else:
            print(f"\nthe same on a chain of {size} keyed steps (one step per wave)")
        shape_configs = [c for c in configs if shape == "wide" or c != "postgres"]
        results = _measure(shape_configs, size, rounds, shape)
        payload["results" if shape == "wide" else "chain"] = {"steps": size, **results}
    path = write_json("durability", args.quick, payload)
    print(f"wrote {path.relative_to(ROOT)}")
    return payload


def _measure(configs: list[str], n: int, rounds: int, shape: str) -> dict[str, Any]:
    """Rounds of every configuration on one plan shape; prints the table."""
    # Rounds, each running every configuration once, so that a change in the machine's load
    # during the command hits every configuration alike; ratios are taken within each round.
    runs: dict[str, list[dict[str, Any]]] = {c: [] for c in configs}
    for r in range(rounds):
        for config in configs:
            if config == "postgres" and r > 0:
                continue  # a round trip per commit: one run is enough to see its cost
            m = in_subprocess(config, n, shape)
            runs[config].append(m)
            shown = f"{m['wall_s'] / n * 1e6:.1f} µs/step" if "wall_s" in m else str(m)
            print(f"  round {r + 1} {config}: {shown}", flush=True)
    results = {c: summarise(runs[c], n) for c in configs}
    for config, m in results.items():
        ratios = [
            a["wall_s"] / b["wall_s"]
            for a, b in zip(runs[config], runs.get("memory", []), strict=False)
            if "wall_s" in a and "wall_s" in b
        ]
        if "us_per_step" in m and ratios:
            m["ratio_to_memory"] = statistics.median(ratios)
            m["ratios_to_memory"] = ratios
    rows = []
    for config, m in results.items():
        if "us_per_step" not in m:
            rows.append([config, "skipped" if "skipped" in m else "error", None, None, None])
            continue
        ok = all(s == "succeeded" for s in m["statuses"])
        rows.append(
            [
                config + ("" if ok else " (!)"),
                m["us_per_step"],
                m["cpu_us_per_step"],
                m["commits_per_step"],
                m.get("ratio_to_memory"),
            ]
        )
    print()
    print(table(["store", "µs/step", "CPU µs/step", "commits/step", "x memory"], rows))
    sqlite_ratio = results.get("sqlite", {}).get("ratio_to_memory")
    if sqlite_ratio is not None and shape == "wide":
        verdict = "within" if sqlite_ratio <= 2 else "OVER"
        print(f"\nsqlite / memory = {sqlite_ratio:.2f}x ({verdict} the 2x target)")
    print(f"load average: {os.getloadavg()}")
    return results


if __name__ == "__main__":
    main()
