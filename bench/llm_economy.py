"""LLM economy: a ReAct loop against plan-then-execute on the same multi-step tasks.

    python -m bench.llm_economy [--quick]

Tasks: the onboarding story and the TaskBench plans (written by a real LLM) that are valid
against their catalogs and have at least two steps. Every tool returns a synthetic output of
realistic size (~150 words). Both strategies are given planrail's own rendering of the tool
catalog, and tokens are counted with ``planrail.testing.count_tokens`` (words; the scripted
LLM's counter), on the exact prompt texts:

- ReAct: one model call per step, each prompt carrying the catalog, the goal and every earlier
  action and observation, then a final answer call;
- planrail: one planning call (``planner.prompt.planning_messages``), the tools run by
  dependency without the model, then one ``llm_call`` that sees only the final outputs
  (``agent.llm_step.step_messages``).

Latency model (documented, not measured): 0.4 s to first token + 0.02 s per output token +
0.05 s per 1,000 input tokens per call, 0.5 s per tool call; ReAct runs tools one after the
other, planrail along the critical path of the plan.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
from pathlib import Path
from typing import Any

from bench.report import table, write_json
from planrail.agent.llm_step import step_messages
from planrail.plan.catalog import load_catalog
from planrail.plan.graph import critical_path_lengths
from planrail.plan.tools import ToolRegistry
from planrail.plan.validate import validate
from planrail.planner.prompt import catalog_text, planning_messages
from planrail.testing.llm import count_tokens

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "taskbench"
DEMO = Path(__file__).resolve().parent.parent / "src" / "planrail" / "demo" / "plan.json"
TTFT, PER_OUT, PER_1K_IN, TOOL_S = 0.4, 0.02, 0.05, 0.5
WORDS = [
    "result",
    "value",
    "field",
    "record",
    "entry",
    "summary",
    "detail",
    "item",
    "data",
    "output",
]


def _observation(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(150))


def _call_latency(tokens_in: int, tokens_out: int) -> float:
    return TTFT + PER_OUT * tokens_out + PER_1K_IN * tokens_in / 1000


def tasks(limit: int | None) -> list[tuple[str, dict[str, Any], ToolRegistry]]:
    """(name, plan, registry) for every multi-step task that validates."""
    from planrail.demo import onboarding

    found = [("onboarding", json.loads(DEMO.read_text()), ToolRegistry(onboarding.TOOLS))]
    for domain in ("huggingface", "multimedia"):
        registry = ToolRegistry(load_catalog(DATA / f"{domain}.catalog.json"))
        for line in (DATA / f"{domain}.plans.jsonl").read_text().splitlines():
            raw = json.loads(line)
            plan = {"goal": raw["goal"], "steps": raw["steps"]}
            if len(plan["steps"]) >= 2 and validate(plan, registry).valid:
                found.append(
                    (raw["source"].rsplit("/", 2)[-2] + "/" + raw["source"][-8:], plan, registry)
                )
    return found[:limit] if limit else found


def measure(plan: dict[str, Any], registry: ToolRegistry, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    steps, goal = plan["steps"], plan["goal"]
    observations = {s["id"]: _observation(rng) for s in steps}
    catalog = catalog_text(registry)
    # ReAct: one call per step with the whole history, then the answer.
    react = {"calls": 0, "input_tokens": 0, "output_tokens": 0, "seconds": 0.0}
    history = ""
    for step in [*steps, None]:
        prompt = f"Tools:\n{catalog}\n\nGoal: {goal}\n{history}\nNext action or final answer:"
        answer = (
            json.dumps({"tool": step.get("tool"), "args": step.get("args", {})})
            if step
            else " ".join(WORDS[:5] * 10)
        )
        t_in, t_out = count_tokens(prompt), count_tokens(answer)
        react["calls"] += 1
        react["input_tokens"] += t_in
        react["output_tokens"] += t_out
        react["seconds"] += _call_latency(t_in, t_out) + (TOOL_S if step else 0.0)
        if step:
            history += f"\nAction: {answer}\nObservation: {observations[step['id']]}"
    # planrail: plan once, run the tools by dependency, answer from the final outputs only.
    plan_prompt = "\n\n".join(m.content for m in planning_messages(goal, registry))
    plan_text = json.dumps({"steps": steps})
    deps = {s["id"]: s.get("depends_on", []) for s in steps}
    sinks = [s for s in deps if not any(s in d for d in deps.values())]
    answer_prompt = "\n\n".join(
        m.content
        for m in step_messages(
            goal, "Answer the user's goal from these results.", {s: observations[s] for s in sinks}
        )
    )
    answer = " ".join(WORDS[:5] * 10)
    calls = [
        (count_tokens(plan_prompt), count_tokens(plan_text)),
        (count_tokens(answer_prompt), count_tokens(answer)),
    ]
    tools_path = max(critical_path_lengths(deps, lambda _s: TOOL_S).values())
    ours = {
        "calls": len(calls),
        "input_tokens": sum(i for i, _ in calls),
        "output_tokens": sum(o for _, o in calls),
        "seconds": sum(_call_latency(i, o) for i, o in calls) + tools_path,
    }
    return {"steps": len(steps), "react": react, "planrail": ours}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the first 20 tasks")
    args = parser.parse_args(argv)
    rows = [
        {"task": name, **measure(plan, reg, seed=i)}
        for i, (name, plan, reg) in enumerate(tasks(20 if args.quick else None))
    ]

    def ratios(key: str) -> list[float]:
        return [r["react"][key] / r["planrail"][key] for r in rows]

    keys = ("calls", "input_tokens", "output_tokens", "seconds")
    summary = {
        k: {"median": statistics.median(ratios(k)), "min": min(ratios(k)), "max": max(ratios(k))}
        for k in keys
    }
    fewer = {k: sum(r["planrail"][k] < r["react"][k] for r in rows) for k in keys}
    print(f"{len(rows)} multi-step tasks (onboarding + valid TaskBench plans)")
    print(
        table(
            ["ReAct / planrail", "median", "min", "max", "planrail lower on"],
            [
                [
                    k,
                    f"{v['median']:.2f}",
                    f"{v['min']:.2f}",
                    f"{v['max']:.2f}",
                    f"{fewer[k]}/{len(rows)}",
                ]
                for k, v in summary.items()
            ],
        )
    )
    first = rows[0]
    print(f"onboarding: ReAct {first['react']}, planrail {first['planrail']}")
    out = {
        "tasks": len(rows),
        "summary": summary,
        "planrail_lower_on": fewer,
        "rows": rows,
        "model": {
            "ttft_s": TTFT,
            "per_output_token_s": PER_OUT,
            "per_1k_input_tokens_s": PER_1K_IN,
            "tool_s": TOOL_S,
        },
    }
    write_json("llm_economy", args.quick, out)
    return out


if __name__ == "__main__":
    main()
