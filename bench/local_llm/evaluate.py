"""Evaluate ``planrail plan`` with a real model over the fixed goal set.

::

    python -m bench.local_llm.evaluate --base-url http://127.0.0.1:8080/v1 --model smollm2

Each goal is planned and run through :class:`planrail.Agent` (the path ``planrail plan`` takes)
with its own catalog, one repair allowed (so "within 2 attempts"), approvals granted. Printed
per goal: valid or not, attempts, issue codes seen, prompt/output tokens, wall time, and whether
the executed calls covered the goal's expected ones; then exactly one summary line::

    local model: V/N valid plans within 2 attempts, M/N reached the expected calls
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.local_llm import tools as kit
from bench.local_llm.goals import GOALS, Goal
from planrail.agent import Agent
from planrail.llm.openai_client import OpenAIClient


@dataclass
class GoalResult:
    name: str
    kind: str
    valid: bool
    attempts: int
    codes: list[str]
    input_tokens: int
    output_tokens: int
    calls: int
    seconds: float
    reached: bool
    structured: str
    executed: list[str] = field(default_factory=list)
    status: str = ""
    raws: list[str] = field(default_factory=list)
    """Every attempt's raw answer."""


def _client(args: argparse.Namespace) -> OpenAIClient:
    return OpenAIClient(
        args.model,
        base_url=args.base_url,
        timeout=args.timeout,
        temperature=args.temperature,
        seed=args.seed,
        max_tokens=args.max_tokens,
        context_window=args.context_window,
        structured=args.structured,
    )


def reached(expected: tuple[str, ...], executed: list[str]) -> bool:
    """Whether every expected call (with multiplicity) is among the executed ones."""
    have = Counter(executed)
    return all(have[name] >= n for name, n in Counter(expected).items())


async def plan_one(goal: Goal, args: argparse.Namespace) -> GoalResult:
    kit.CALLS.clear()
    tools = [kit.TOOLS[n] for n in goal.tools]
    async with _client(args) as llm:
        agent = Agent(
            llm,
            tools,
            approval=lambda *_: True,
            max_repairs=1,
            prompt=args.prompt,
        )
        started = time.perf_counter()
        result = await agent.run(goal.goal)
        seconds = time.perf_counter() - started
    codes = sorted({i.code for a in result.attempts for i in a.issues})
    valid = result.plan is not None and bool(result.plan.steps) and len(result.attempts) <= 2
    executed = [name for name, _ in kit.CALLS]
    usage_in = sum(a.usage.input_tokens for a in result.attempts)
    usage_out = sum(a.usage.output_tokens for a in result.attempts)
    return GoalResult(
        goal.name,
        goal.kind,
        valid,
        len(result.attempts),
        codes,
        usage_in,
        usage_out,
        int(result.usage.get("calls", 0)),
        round(seconds, 2),
        valid and reached(goal.expected, executed),
        result.attempts[-1].structured if result.attempts else "",
        executed,
        result.status,
        [a.raw for a in result.attempts],
    )


def _row(r: GoalResult) -> str:
    return (
        f"{r.name:<16} {'valid' if r.valid else 'INVALID':<8} {r.attempts:>3}"
        f" {r.input_tokens:>7,} {r.output_tokens:>6,} {r.seconds:>7.1f}s"
        f" {'yes' if r.reached else 'no':<4} {','.join(r.codes) or '-'}"
    )


async def main(args: argparse.Namespace) -> int:
    goals = [g for g in GOALS if not args.only or g.name in args.only]
    header = f"{'goal':<16} {'plan':<8} {'att':>3} {'in tok':>7} {'out':>6} {'wall':>8}"
    print(f"{header} {'reached':<4} codes")
    results = []
    for goal in goals:
        r = await plan_one(goal, args)
        results.append(r)
        print(_row(r), flush=True)
    n = len(results)
    v = sum(r.valid for r in results)
    m = sum(r.reached for r in results)
    report: dict[str, Any] = {
        "model": args.model,
        "base_url": args.base_url,
        "prompt": args.prompt,
        "goals": [asdict(r) for r in results],
    }
    if args.out:
        await asyncio.to_thread(Path(args.out).write_text, json.dumps(report, indent=1))
    print(f"local model: {v}/{n} valid plans within 2 attempts, {m}/{n} reached the expected calls")
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base-url", default="http://127.0.0.1:18321/v1")
    p.add_argument("--model", default="smollm2")
    p.add_argument("--prompt", default="auto", choices=["auto", "full", "compact"])
    p.add_argument("--structured", default="auto")
    p.add_argument("--context-window", type=int, default=4096)
    p.add_argument("--max-tokens", type=int, default=None)
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--only", nargs="*", default=[])
    p.add_argument("--out", default="", help="write the figures as JSON here")
    return p


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main(parser().parse_args())))
