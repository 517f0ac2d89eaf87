"""One runner per run: two runners started on the same run never execute a step twice.

In one process, on every backend; in two processes racing on one SQLite file; and for a runner
that lost its lease (its event loop was blocked past the lease) while another took over.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import planrail
from planrail.engine.checkpoint import load_result
from planrail.engine.executor import Execution
from planrail.engine.lease import RunBusyError
from planrail.store import SQLiteStore
from planrail.testing import FakeClock

from .conftest import Opener
from .harness import RunnerPool
from .helpers import LEASE_TTL, WALL, Ledger, Token, make_plan, make_tools


async def test_a_second_runner_in_the_same_process_is_refused(open_store: Opener) -> None:
    """Two executions of one run started together: one runs it, the other gets RunBusyError
    before calling anything; every step is called once."""
    ledger = Ledger()
    tools = make_tools(ledger)
    plan = make_plan(tools)

    def runner() -> Execution:
        return Execution(
            plan, tools, store=open_store(), run_id="two", clock=FakeClock(wall=WALL), approve=True
        )

    results = await asyncio.gather(runner().run(), runner().run(), return_exceptions=True)

    busy = [r for r in results if isinstance(r, RunBusyError)]
    done = [r for r in results if not isinstance(r, BaseException)]
    assert len(busy) == 1, results
    assert len(done) == 1, results
    assert done[0].status == "succeeded"
    assert Counter(c.step for c in ledger.calls) == dict.fromkeys("abcfg", 1)


@pytest.fixture
def pool() -> Iterator[RunnerPool]:
    """Runner processes (see ``harness.py``), closed after the test."""
    p = RunnerPool()
    yield p
    p.close()


def test_two_runner_processes_on_one_run_never_execute_a_step_twice(
    pool: RunnerPool, tmp_path: Path
) -> None:
    """Two runner processes started together on the same run (both wait while the other holds
    the lease): every step's tool is called exactly once, and both report success."""
    import sqlite3
    from contextlib import closing

    for trial in range(2):
        work = tmp_path / str(trial)
        work.mkdir()
        config = {
            "store": f"sqlite:///{work / 'runs.db'}",
            "ledger": str(work / "ledger.sqlite"),
            "run_id": "shared",
            "keys": True,
            # Long enough that a loaded machine never makes the first runner lose its lease (the
            # second one waits for the release, not for the expiry).
            "lease_ttl": 5.0,
            "step_delay": 0.002,
        }
        first, second = pool.start(config), pool.start(config)
        (code1, report1), (code2, report2) = first.finish(None), second.finish(None)
        codes = [code1, code2]
        errors = f"{report1} {report2} {first.err_text} {second.err_text}"
        with closing(sqlite3.connect(work / "ledger.sqlite")) as conn:
            per_step = Counter(s for (s,) in conn.execute("SELECT step FROM calls"))
        assert codes == [0, 0], errors
        assert len(per_step) == 25
        assert set(per_step.values()) == {1}, per_step


class _Clock:
    """A clock whose ``now()`` a test moves by hand; ``sleep`` never wakes within a test."""

    def __init__(self, wall: float) -> None:
        self.wall = wall

    def now(self) -> float:
        return self.wall

    def monotonic(self) -> float:
        return self.wall

    async def sleep(self, seconds: float) -> None:
        await asyncio.Event().wait()


async def test_a_runner_that_lost_its_lease_starts_nothing_more(tmp_path: Path) -> None:
    """Runner A's event loop is blocked inside step ``a`` past its lease; meanwhile runner B takes
    the run over and finishes it. When A wakes up it must not start ``b`` again nor overwrite
    B's records: ``b`` is called once (by B) and the stored run is B's success."""
    calls: list[tuple[str, str]] = []
    clock_a = _Clock(WALL)
    db = tmp_path / "runs.db"

    def run_b() -> None:
        async def go() -> Any:
            with SQLiteStore(db) as store_b:
                return await Execution(
                    plan,
                    tools,
                    store=store_b,
                    run_id="fenced",
                    clock=FakeClock(wall=WALL + 100),
                    lease_ttl=LEASE_TTL,
                    approve=True,
                ).run()

        outcome.append(asyncio.run(go()))

    outcome: list[Any] = []

    @planrail.tool(side_effects="keyed")
    async def step_tool(ctx: planrail.StepContext, step: str, inputs: list[str]) -> Token:
        """Blocks runner A's loop in its first call of ``a`` while runner B runs the plan."""
        who = "B" if threading.current_thread() is not threading.main_thread() else "A"
        calls.append((who, step))
        if (who, step) == ("A", "a"):
            clock_a.wall += 100  # A's loop is blocked for 100 s: its lease (30 s) expires
            thread = threading.Thread(target=run_b)
            thread.start()
            thread.join()  # blocking on purpose: this is the blocked event loop
        return Token(step=step, token=f"{step}-token")

    tools = [step_tool]
    doc = {
        "goal": "fencing",
        "steps": [
            {"id": "a", "tool": "step_tool", "args": {"step": "a", "inputs": []}},
            {
                "id": "b",
                "tool": "step_tool",
                "args": {"step": "b", "inputs": ["${a.token}"]},
                "depends_on": ["a"],
            },
        ],
    }
    plan = planrail.validate(doc, tools).raise_for_errors()

    with SQLiteStore(db) as store_a:
        await Execution(
            plan,
            tools,
            store=store_a,
            run_id="fenced",
            clock=clock_a,
            lease_ttl=LEASE_TTL,
            approve=True,
        ).run()
        stored = load_result(store_a, "fenced")

    assert outcome
    assert outcome[0].status == "succeeded"
    assert [c for c in calls if c[1] == "b"] == [("B", "b")], calls
    assert stored.status == "succeeded"
