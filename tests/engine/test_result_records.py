"""A step's record keeps no empty ``usage`` dict and no one-attempt history list until someone
reads them (memory at 100,000 steps), and reads, writes and compares exactly as a plain
dataclass field would."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from typing import Any

import planrail
from planrail.engine import result as result_module
from planrail.engine.result import OneAttempt, StepResult, keep_history, keep_usage
from planrail.types import StepStatus


@planrail.tool(side_effects="none")
async def double(n: int) -> int:
    return n * 2


def _plan() -> dict[str, Any]:
    return {
        "steps": [
            {"id": "a", "tool": "double", "args": {"n": 1}},
            {"id": "b", "tool": "double", "args": {"n": "${a}"}, "depends_on": ["a"]},
        ]
    }


async def test_each_step_of_a_run_has_its_own_usage_dict() -> None:
    result = await planrail.arun(_plan(), [double])
    a, b = result.steps["a"], result.steps["b"]
    assert a.usage == {}
    assert b.usage == {}
    a.usage["calls"] = 1
    assert a.usage == {"calls": 1}, "a write to a record's usage stays"
    assert b.usage == {}, "and no other record sees it"
    assert StepResult("c").usage == {}


async def test_a_plain_step_reads_its_one_attempt_as_the_attempt_loop_records_it() -> None:
    result = await planrail.arun(_plan(), [double])
    kept = result_module._HISTORY.__get__(result.steps["b"])
    assert type(kept) is OneAttempt, "until it is read, the record holds two floats"
    assert result_module._USAGE.__get__(result.steps["b"]) is None
    history = result.steps["b"].attempt_history
    assert type(history) is list
    assert [sorted(h) for h in history] == [["attempt", "duration", "error", "started_at"]]
    assert history[0]["attempt"] == 1
    assert history[0]["error"] is None
    assert isinstance(history[0]["started_at"], float)
    assert history[0]["duration"] >= 0
    history.append({"attempt": 2})
    assert result.steps["b"].attempt_history is history, "the list made on first read is kept"
    assert len(result.steps["a"].attempt_history) == 1


async def test_a_checkpointed_run_stores_the_history_and_keeps_the_records_compact(
    tmp_path: Any,
) -> None:
    """Writing each step's record to a store reads its history and usage without making them
    on the step's own record; the store holds the one attempt as the attempt loop records it."""
    from planrail.store import SQLiteStore

    store = SQLiteStore(tmp_path / "runs.db")
    result = await planrail.arun(_plan(), [double], store=store)
    for step in result.steps.values():
        assert type(result_module._HISTORY.__get__(step)) is OneAttempt
        assert result_module._USAGE.__get__(step) is None
    stored = store.get_steps(result.run_id)["b"]
    assert stored.attempt_history == result.steps["b"].attempt_history
    assert "usage" not in stored.metadata
    store.close()


def test_records_made_later_are_the_same_record_read_before() -> None:
    """Equality, ``repr``, ``dataclasses`` helpers and pickling see the values made on read."""
    compact = StepResult("a", StepStatus.SUCCEEDED, 1)
    keep_history(compact, OneAttempt(5.0, 0.5))
    keep_usage(compact, None)
    plain = StepResult(
        "a",
        StepStatus.SUCCEEDED,
        1,
        attempt_history=[{"attempt": 1, "started_at": 5.0, "duration": 0.5, "error": None}],
        usage={},
    )
    assert compact == plain
    assert repr(compact) == repr(plain)
    assert dataclasses.asdict(compact) == dataclasses.asdict(plain)
    assert dataclasses.replace(compact, reason="x") == dataclasses.replace(plain, reason="x")
    assert pickle.loads(pickle.dumps(compact)) == plain
    assert copy.deepcopy(compact) == plain
    assert [f.name for f in dataclasses.fields(StepResult)][-2:] == ["attempt_history", "usage"]


def test_given_values_and_assignments_are_kept_as_given() -> None:
    history = [{"attempt": 1, "error": {"type": "Boom"}}, {"attempt": 2, "error": None}]
    usage = {"input_tokens": 3}
    rec = StepResult("a", attempt_history=history, usage=usage)
    assert rec.attempt_history is history
    assert rec.usage is usage
    rec.usage = {"calls": 2}
    rec.attempt_history = []
    assert rec.usage == {"calls": 2}
    assert rec.attempt_history == []
    fresh = StepResult("b")
    assert fresh.attempt_history == []
    assert fresh.attempt_history is fresh.attempt_history
    assert fresh.attempt_history is not StepResult("c").attempt_history


@planrail.tool(side_effects="none")
async def refuse(n: int) -> int:
    raise ValueError(f"no {n}")


async def test_why_a_run_did_not_succeed_is_its_error_else_its_first_failed_step() -> None:
    """``RunResult.why``: None for a success; the first failed step's message (in plan order) for
    a run that failed at a step; the run's own error when it has one (a cancel)."""
    ok = await planrail.arun(_plan(), tools=[double])
    assert ok.why is None
    plan = {
        "steps": [
            {"id": "a", "tool": "double", "args": {"n": 1}},
            {"id": "b", "tool": "refuse", "args": {"n": "${a}"}, "depends_on": ["a"]},
            {"id": "c", "tool": "double", "args": {"n": "${b}"}, "depends_on": ["b"]},
        ]
    }
    failed = await planrail.arun(plan, tools=[double, refuse])
    assert failed.status == "failed"
    assert failed.why == "step 'b' failed: no 2"
    failed.error = "cancelled by someone"
    assert failed.why == "cancelled by someone"
