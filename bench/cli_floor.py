"""The no-engine floor of ``bench.cli``: one asyncio task per step of a plan file, each awaiting
its dependencies' tasks, then calling ``bench.cli_tools.work`` — the same work as the tool
``planrail run`` calls — with the dependencies' outputs. No validation, no store, no events.

    python -m bench.cli_floor PLAN.json
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from bench.cli_tools import work


async def run(plan: dict[str, Any]) -> dict[str, str]:
    tasks: dict[str, asyncio.Task[str]] = {}

    async def step(sid: str, deps: list[asyncio.Task[str]], duration: float) -> str:
        inputs = [await d for d in deps]
        assert len(inputs) == len(deps)
        return await work(sid, duration)

    for s in plan["steps"]:
        deps = [tasks[d] for d in s.get("depends_on", [])]
        tasks[s["id"]] = asyncio.create_task(step(s["id"], deps, s["args"]["duration"]))
    await asyncio.gather(*tasks.values())
    return {sid: t.result() for sid, t in tasks.items()}


def main() -> None:
    with open(sys.argv[1]) as f:
        plan = json.load(f)
    outputs = asyncio.run(run(plan))
    print(json.dumps({"steps": len(outputs)}))


if __name__ == "__main__":
    main()
