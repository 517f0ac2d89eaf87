"""What a resume reads and computes before it runs anything, each once: the run's record is
read by ``resume`` (its plan and policies), by ``prepare`` (how the plan is validated), as the
execution starts (the approval, the policies, and that the plan is the stored one — the record
may have changed since it was prepared) and once the lease is held; the plan is serialised
once for its hash, which both the stored plan and the approval are checked against (and once
more for the record written under the lease).

Resuming serialised the plan once more (~100 ms for a 10,000-step plan on this machine) and
read the record five times."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import planrail
from planrail.engine import operations
from planrail.engine.approval import defer
from planrail.engine.checkpoint import PlanMismatchError
from planrail.plan.model import Plan
from planrail.runs import resume
from planrail.store import RunRecord, Store, open_store

PLAN = {
    "goal": "write twice",
    "steps": [
        {"id": "a", "tool": "write", "args": {"name": "a"}},
        {"id": "b", "tool": "write", "args": {"name": "${a}"}, "depends_on": ["a"]},
    ],
}
CALLS: list[str] = []


@planrail.tool(side_effects="keyed")
async def write(name: str) -> str:
    """Writes ``name`` (recorded) and returns it."""
    CALLS.append(name)
    return name


class Counting:
    """A store that counts the run records read from it."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.reads: list[str] = []

    def get_run(self, run_id: str) -> RunRecord | None:
        self.reads.append(run_id)
        return self.inner.get_run(run_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def _approved_waiting(store: Store) -> None:
    """Run ``R`` stored waiting for approval (nothing called), then approved by an operator."""
    first = planrail.prepare(PLAN, [write], store=store, run_id="R", approver=defer)
    assert (await first.run()).status == "awaiting_approval"
    operations.approve(store, "R")


async def test_a_resume_reads_its_record_four_times_and_hashes_its_plan_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    CALLS.clear()
    with open_store(f"sqlite:///{tmp_path / 'runs.db'}") as store:
        await _approved_waiting(store)
        counting = Counting(store)
        execution = resume("R", [write], store=counting)  # type: ignore[arg-type]
        assert counting.reads == ["R", "R"]  # resume's, prepare's
        dumps: list[int] = []
        dump = Plan.dump

        def counted(plan: Plan) -> Any:
            dumps.append(len(plan.steps))
            return dump(plan)

        monkeypatch.setattr(Plan, "dump", counted)
        result = await execution.run()
        assert (result.status, CALLS) == ("succeeded", ["a", "a"])
        assert counting.reads == ["R"] * 4  # + the execution's start, + under the lease
        # once for its hash (the stored plan's check, the approval's), once for the record
        # written under the lease (its plan data redacted by this run's tools)
        assert dumps == [2, 2]


async def test_a_record_stored_with_another_plan_meanwhile_is_refused_under_the_lease(
    tmp_path: Path,
) -> None:
    """The plan is checked against the record read as the execution starts, and again against
    the one read once the lease is held: a run stored with another plan in between (another
    process) is refused, nothing called, its record untouched."""
    CALLS.clear()
    with open_store(f"sqlite:///{tmp_path / 'runs.db'}") as store:
        execution = planrail.prepare(PLAN, [write], store=store, run_id="R", approve=True)
        other = {**PLAN, "goal": "another plan"}

        class Racing(Counting):
            def get_run(self, run_id: str) -> RunRecord | None:
                found = super().get_run(run_id)
                if len(self.reads) == 1:  # the execution's start found nothing: then it is
                    self.inner.create_run(  # stored, by another process, with another plan
                        RunRecord(
                            run_id="R",
                            plan=other,
                            plan_hash="sha256:" + "0" * 64,
                            status="failed",
                            created_at=1.0,
                            updated_at=1.0,
                        )
                    )
                return found

        racing = Racing(store)
        execution.store = racing  # type: ignore[assignment]
        with pytest.raises(PlanMismatchError, match="exists with another plan"):
            await execution.run()
        assert CALLS == []
        stored = store.get_run("R")
        assert stored is not None
        assert (stored.plan, stored.status) == (other, "failed")
        assert store.get_steps("R") == {}
