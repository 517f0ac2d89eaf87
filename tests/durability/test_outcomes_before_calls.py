"""No call runs before the outcomes it may read are stored (docs/durability.md, guarantee 1).

A layer's outcomes are committed together with the intents of the steps they start (one
transaction), so those steps are started before the outcomes are stored; their calls are not
made until then — a keyed call waits for its intent, held for that commit, a pure call for
the commit itself. Every tool here, when called, reads the store: each step it depends on must
already be recorded ``succeeded``, and a keyed step's own intent must be there.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

import planrail
from planrail.engine.executor import Execution

from .conftest import Opener
from .helpers import CommitLog


def _plan(seed: int, n: int = 40) -> dict[str, Any]:
    rng = random.Random(seed)
    steps: list[dict[str, Any]] = []
    for i in range(n):
        deps = sorted(rng.sample(range(i), k=min(i, rng.randint(0, 3))))
        tool = rng.choice(["keyed", "pure"])
        args = {"step": f"s{i}", "inputs": [f"${{s{d}}}" for d in deps]}
        steps.append(
            {"id": f"s{i}", "tool": tool, "args": args, "depends_on": [f"s{d}" for d in deps]}
        )
    return {"goal": "outcomes before calls", "steps": steps}


@pytest.mark.parametrize("seed", range(6))
async def test_every_call_finds_the_outcomes_it_reads_stored(seed: int, open_store: Opener) -> None:
    store = open_store()
    plan_data = _plan(seed)
    deps = {s["id"]: s["depends_on"] for s in plan_data["steps"]}
    problems: list[str] = []

    def check(ctx: planrail.StepContext, step: str, keyed: bool) -> None:
        records = store.get_steps(ctx.run_id)
        for d in deps[step]:
            status = str(records[d].status) if d in records else "absent"
            if status != "succeeded":
                problems.append(f"{step} called while {d} was {status} in the store")
        if keyed and ctx.idempotency_key not in {
            i.idempotency_key for i in store.intents(ctx.run_id)
        }:
            problems.append(f"{step} called before its intent was stored")

    @planrail.tool(side_effects="keyed")
    async def keyed(ctx: planrail.StepContext, step: str, inputs: list[str]) -> str:
        """Checks the store, then returns its step."""
        check(ctx, step, keyed=True)
        return step

    @planrail.tool(side_effects="none")
    async def pure(ctx: planrail.StepContext, step: str, inputs: list[str]) -> str:
        """Checks the store, then returns its step."""
        check(ctx, step, keyed=False)
        return step

    plan = planrail.validate(plan_data, [keyed, pure]).raise_for_errors()
    result = await Execution(plan, [keyed, pure], store=store, approve=True).run()
    assert result.status == "succeeded"
    assert problems == []


@pytest.mark.parametrize("seed", range(4))
async def test_the_event_log_never_runs_ahead_of_the_step_records(
    seed: int, open_store: Opener
) -> None:
    """Fan-out steps commit each finished item at once; those commits, like every other, carry
    no ``step_succeeded`` event of a step whose ``succeeded`` record is not committed yet (by
    that commit or an earlier one)."""
    rng = random.Random(seed)
    steps: list[dict[str, Any]] = [{"id": "s0", "tool": "keyed", "args": {"step": "s0"}}]
    fan_outs: set[int] = set()
    for i in range(1, 30):
        deps = sorted(rng.sample(range(i), k=min(i, rng.randint(1, 2))))
        step: dict[str, Any] = {
            "id": f"s{i}",
            "tool": rng.choice(["keyed", "pure"]),
            "args": {"step": f"s{i}"},
            "depends_on": [f"s{d}" for d in deps],
        }
        lists = [d for d in deps if d not in fan_outs]  # a fan-out's output is a list of lists
        if lists and rng.random() < 0.4:
            fan_outs.add(i)
            step["for_each"] = f"${{s{lists[0]}}}"
            step["args"] = {"step": "${item}", "by": f"s{i}"}
        steps.append(step)

    @planrail.tool(side_effects="keyed")
    async def keyed(step: str, by: str = "") -> list[str]:
        """A list, so that fan-outs have items."""
        return [step, step + "b"]

    @planrail.tool(side_effects="none")
    async def pure(step: str, by: str = "") -> list[str]:
        """A list, so that fan-outs have items."""
        return [step]

    store = CommitLog(open_store())
    plan = planrail.validate({"goal": "log", "steps": steps}, [keyed, pure]).raise_for_errors()
    result = await Execution(plan, [keyed, pure], store=store, approve=True).run()
    assert result.status == "succeeded", {s: r.error for s, r in result.steps.items() if r.error}
    recorded: set[str] = set()
    for commit in store.commits:
        recorded |= {sid for sid, status in commit.steps.items() if status == "succeeded"}
        ahead = [
            sid for kind, sid in commit.events if kind == "step_succeeded" and sid not in recorded
        ]
        assert ahead == []
