"""Evaluate ``planrail plan`` with a real model over the fixed goal set.

::

    python -m bench.local_llm.evaluate --base-url http://127.0.0.1:8080/v1 --model smollm2

Each goal is planned and run through :class:`planrail.Agent` (the path ``planrail plan`` takes)
with its own catalog, one repair allowed (so "within 2 attempts"), approvals granted. Printed
per goal: valid or not, attempts, issue codes seen, prompt/output tokens, wall time, and whether
the executed calls covered the goal's expected ones; then exactly one summary line::

    local model: V/N valid plans within 2 attempts, M/N reached the expected calls

With ``--react`` each goal is also run through a plain ReAct loop (:mod:`bench.local_llm.react`:
one tool call per model call, the whole transcript each time) with the same client, model and
catalog, right after its plan-then-execute run; a table of model calls, input and output
tokens and wall seconds per goal, with totals, is printed before the summary line.
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
from bench.local_llm.react import react
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
    run_input_tokens: int = 0
    """Input tokens of every model call of the run (planning and any ``llm_call`` step)."""
    run_output_tokens: int = 0
    react: dict[str, Any] | None = None
    """The same goal through the ReAct loop (``--react``)."""


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
        int(result.usage.get("input_tokens", 0)),
        int(result.usage.get("output_tokens", 0)),
    )


async def react_one(goal: Goal, args: argparse.Namespace) -> dict[str, Any]:
    """``goal`` through the plain ReAct loop, with a fresh client as plan_one has."""
    kit.CALLS.clear()
    tools = [kit.TOOLS[n] for n in goal.tools]
    async with _client(args) as llm:
        r = await react(llm, goal.goal, tools, max_turns=args.react_turns)
    executed = [name for name, _ in kit.CALLS]
    return {
        "calls": r.usage.calls,
        "turns": r.turns,
        "input_tokens": r.usage.input_tokens,
        "output_tokens": r.usage.output_tokens,
        "seconds": round(r.seconds, 2),
        "stopped": r.stopped,
        "errors": r.errors,
        "executed": executed,
        "reached": reached(goal.expected, executed),
        "final": r.final,
        "raws": r.raws,
    }


def economy_table(results: list[GoalResult]) -> str:
    """Per goal and in total: model calls, input and output tokens, wall seconds, for
    plan-then-execute (planrail) and the ReAct loop; and whether each reached the calls."""
    lines = [
        "| goal | planrail calls | ReAct calls | planrail in tok | ReAct in tok"
        " | planrail out tok | ReAct out tok | planrail s | ReAct s | reached (planrail / ReAct) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    tot = dict.fromkeys(("pc", "rc", "pi", "ri", "po", "ro", "ps", "rs", "pm", "rm"), 0.0)
    for r in results:
        x = r.react or {}
        row = (
            r.calls, x.get("calls", 0), r.run_input_tokens, x.get("input_tokens", 0),
            r.run_output_tokens, x.get("output_tokens", 0), r.seconds, x.get("seconds", 0.0),
            r.reached, bool(x.get("reached")),
        )  # fmt: skip
        for key, value in zip(tot, row, strict=True):
            tot[key] += value
        lines.append(
            f"| {r.name} | {row[0]} | {row[1]} | {row[2]:,} | {row[3]:,} | {row[4]:,}"
            f" | {row[5]:,} | {row[6]:.1f} | {row[7]:.1f}"
            f" | {'yes' if row[8] else 'no'} / {'yes' if row[9] else 'no'} |"
        )
    lines.append(
        f"| **total ({len(results)} goals)** | {tot['pc']:.0f} | {tot['rc']:.0f}"
        f" | {tot['pi']:,.0f} | {tot['ri']:,.0f} | {tot['po']:,.0f} | {tot['ro']:,.0f}"
        f" | {tot['ps']:.1f} | {tot['rs']:.1f} | {tot['pm']:.0f} / {tot['rm']:.0f} |"
    )
    return "\n".join(lines)


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
        if args.react:
            r.react = await react_one(goal, args)
        results.append(r)
        print(_row(r), flush=True)
        if args.out:  # after every goal: a long run stopped half-way keeps what it measured
            report: dict[str, Any] = {
                "model": args.model,
                "base_url": args.base_url,
                "prompt": args.prompt,
                "goals": [asdict(r) for r in results],
            }
            await asyncio.to_thread(Path(args.out).write_text, json.dumps(report, indent=1))
    n = len(results)
    v = sum(r.valid for r in results)
    m = sum(r.reached for r in results)
    if args.react:
        print()
        print(economy_table(results))
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
    p.add_argument(
        "--react",
        action="store_true",
        help="also run each goal through a plain ReAct loop and print the economy table",
    )
    p.add_argument("--react-turns", type=int, default=6, help="model calls a ReAct run may make")
    return p


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main(parser().parse_args())))
