"""``repeat`` loops are checkpointed per iteration: after a SIGKILL mid-loop, a resume goes
on from the last finished iteration and never calls a finished one again (checked with the
tool's own ledger, through the real ``planrail`` command)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import planrail
from planrail.engine.executor import Execution
from planrail.store import MemoryStore

PLANRAIL = Path(sys.executable).with_name("planrail")

TOOLS = textwrap.dedent(
    '''
    import json, os, signal
    import planrail

    def _call(ctx):
        n = len(ctx.history) + 1
        entry = {"iteration": n, "key": ctx.idempotency_key,
                 "seen": [h["output"] for h in ctx.history]}
        with open(os.environ["LOOP_LEDGER"], "a") as f:
            f.write(json.dumps(entry) + "\\n")
            f.flush()
            os.fsync(f.fileno())
        if n == int(os.environ.get("LOOP_KILL_AT", "0")):  # the effect is made, not recorded
            os.kill(os.getpid(), signal.SIGKILL)
        return {"n": n}

    @planrail.tool(side_effects="keyed")
    def poll_keyed(ctx: planrail.StepContext) -> dict[str, int]:
        """One iteration (honours its key)."""
        return _call(ctx)

    @planrail.tool(side_effects="unsafe")
    def poll_unsafe(ctx: planrail.StepContext) -> dict[str, int]:
        """One iteration (unsafe)."""
        return _call(ctx)
    '''
)


def _planrail(work: Path, *args: str, kill_at: int = 0) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, LOOP_LEDGER=str(work / "ledger.jsonl"), LOOP_KILL_AT=str(kill_at))
    return subprocess.run(
        [str(PLANRAIL), *args, "--store", f"sqlite:///{work / 'runs.db'}"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )


def _ledger(work: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (work / "ledger.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("tool", ["poll_keyed", "poll_unsafe"])
def test_a_loop_killed_mid_iteration_resumes_after_its_last_finished_iteration(
    tmp_path: Path, tool: str
) -> None:
    """The runner is SIGKILLed inside iteration 3 (its effect made, its outcome not
    recorded). The resume does not call iterations 1 and 2 again: a keyed tool's iteration 3
    is called again with the same key (for an unsafe one only after ``resolve --retry``), it
    sees the outputs of iterations 1 and 2 as its history, and the loop ends at iteration 4."""
    (tmp_path / "loop_tools.py").write_text(TOOLS)
    plan = {
        "goal": "poll until done",
        "steps": [
            {
                "id": "loop",
                "tool": tool,
                "args": {},
                "repeat": {"until": {"ge": ["${self.n}", 4]}, "max_iterations": 6},
            }
        ],
    }
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    tools = ("--tools", str(tmp_path / "loop_tools.py"))

    killed = _planrail(tmp_path, "run", "plan.json", *tools, "--run-id", "r", "--yes", kill_at=3)
    assert killed.returncode == -9, killed.stderr
    assert [e["iteration"] for e in _ledger(tmp_path)] == [1, 2, 3]

    resumed = _planrail(tmp_path, "resume", "r", *tools, "--json")
    if tool == "poll_unsafe":
        assert resumed.returncode == 1, resumed.stderr
        assert json.loads(resumed.stdout)["steps"][0]["status"] == "in_doubt"
        assert len(_ledger(tmp_path)) == 3, "an unsafe iteration in doubt is not called again"
        decided = _planrail(tmp_path, "resolve", "r", "loop", "--retry")
        assert decided.returncode == 0, decided.stderr
        resumed = _planrail(tmp_path, "resume", "r", *tools, "--json")
    assert resumed.returncode == 0, resumed.stderr
    data = json.loads(resumed.stdout)
    assert data["status"] == "succeeded"
    assert data["steps"][0]["output"] == {"n": 4}

    ledger = _ledger(tmp_path)
    assert [e["iteration"] for e in ledger] == [1, 2, 3, 3, 4]
    assert {e["key"] for e in ledger} == {"r:loop"}
    assert ledger[3]["seen"] == [{"n": 1}, {"n": 2}], "the resumed loop kept its history"


async def test_a_loop_that_ran_out_of_iterations_starts_over_on_resume() -> None:
    """A loop that ended failed (its ``until`` never held in ``max_iterations``) is a failed
    step: a resume runs it again from its first iteration — its kept iterations are for a loop
    that was cut off, not for one that finished."""
    import planrail

    calls: list[int] = []

    @planrail.tool(side_effects="keyed")
    def poll(ctx: planrail.StepContext) -> dict[str, int]:
        """Never done."""
        calls.append(len(ctx.history) + 1)
        return {"n": len(ctx.history) + 1}

    plan = planrail.validate(
        {
            "goal": "poll",
            "steps": [
                {
                    "id": "loop",
                    "tool": "poll",
                    "args": {},
                    "repeat": {"until": {"ge": ["${self.n}", 9]}, "max_iterations": 2},
                }
            ],
        },
        [poll],
    ).raise_for_errors()
    store = MemoryStore()
    first = await Execution(plan, [poll], store=store, run_id="x", approve=True).run()
    assert first.steps["loop"].status == "failed"
    again = await Execution(plan, [poll], store=store, run_id="x", approve=True).run()
    assert again.steps["loop"].status == "failed"
    assert calls == [1, 2, 1, 2]


def test_a_loop_that_starts_over_on_resume_keeps_only_its_new_iterations(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A resumed loop whose arguments changed starts over at iteration 1: the iterations kept
    from before are dropped then, not kept in front of the new ones (a later resume would find
    two arguments' hashes mixed, start over again and call finished iterations again)."""
    from planrail.clock import SYSTEM_CLOCK
    from planrail.engine.checkpoint import Checkpointer
    from planrail.engine.result import StepResult

    plan = planrail.Plan.model_validate(
        {
            "goal": "g",
            "steps": [{"id": "loop", "tool": "t", "repeat": {"until": True, "max_iterations": 3}}],
        }
    )
    cp = Checkpointer(MemoryStore(), plan, planrail.ToolRegistry(), "r", SYSTEM_CLOCK)
    monkeypatch.setattr(cp.lease, "check", lambda: None)
    monkeypatch.setattr(cp, "_commit_progress", lambda result: None)
    old = [{"iteration": n, "args_hash": "old", "output": n, "error": None} for n in (1, 2)]
    cp._iterations = {"loop": {"": list(old)}}
    result = StepResult("loop")
    cp.iteration_done(result, None, {"q": "new"}, {"iteration": 1, "output": {"n": 1}})
    cp.iteration_done(result, None, {"q": "new"}, {"iteration": 2, "output": {"n": 2}})
    kept = cp._kept("loop")
    assert kept is not None
    assert [e["iteration"] for e in kept["iterations"][""]] == [1, 2]
    assert {e["args_hash"] for e in kept["iterations"][""]} != {"old"}
    assert [e["output"] for e in kept["iterations"][""]] == [{"n": 1}, {"n": 2}]
