"""The store contract, part 1: runs, steps, events and atomic commits, on every backend."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import pytest

from planrail.errors import StoreError
from planrail.store import (
    Event,
    IdempotencyConflictError,
    Intent,
    RunExistsError,
    RunNotFoundError,
    RunRecord,
    StepRecord,
    Store,
)
from planrail.types import StepStatus

MakeRun = Callable[..., RunRecord]
MakeStep = Callable[..., StepRecord]
MakeEvent = Callable[..., Event]


def test_create_run_then_get_run_returns_every_field(store: Store, make_run: MakeRun) -> None:
    """A created run reads back equal in every field, optional ones included."""
    run = make_run(
        status="awaiting_approval",
        created_at=1.5,
        updated_at=2.25,
        output={"user": "u-1"},
        approval={"by": "alice", "plan_hash": "sha256:abc"},
        error={"type": "RuntimeError", "message": "boom", "retryable": False},
        metadata={"tags": ["a", "b"]},
    )
    store.create_run(run)
    assert store.get_run("run-1") == run


def test_get_run_of_unknown_id_is_none(store: Store) -> None:
    """Asking for a run the store does not hold returns None, not an error."""
    assert store.get_run("nope") is None


def test_a_key_that_is_not_unicode_text_finds_nothing(store: Store, make_run: MakeRun) -> None:
    """A run id holding a lone surrogate (undecodable command-line bytes) or NUL names
    nothing: no such run can have been written, and no driver is asked to encode it."""
    store.create_run(make_run())
    for odd in ("run-1\udcff", "run-1\x00"):
        assert store.get_run(odd) is None
        assert store.get_steps(odd) == {}
        assert store.events(odd) == []
        assert store.intents(odd) == []
        assert store.get_lease(odd) is None
    assert store.get_run("run-1") is not None


def test_create_run_with_a_taken_id_raises_and_keeps_the_first(
    store: Store, make_run: MakeRun
) -> None:
    """A duplicate run id is a RunExistsError, and the stored run is left as it was."""
    store.create_run(make_run(plan_hash="first"))
    with pytest.raises(RunExistsError, match="run-1"):
        store.create_run(make_run(plan_hash="second"))
    assert store.get_run("run-1") == make_run(plan_hash="first")


def test_list_runs_is_newest_first_with_run_id_breaking_ties(
    store: Store, make_run: MakeRun
) -> None:
    """Runs list by created_at descending; equal timestamps order by run id descending."""
    for run_id, created in [("b", 5.0), ("a", 7.0), ("c", 5.0), ("d", 1.0)]:
        store.create_run(make_run(run_id, created_at=created))
    assert [r.run_id for r in store.list_runs()] == ["a", "c", "b", "d"]


def test_list_runs_filters_by_status_and_applies_the_limit(store: Store, make_run: MakeRun) -> None:
    """``status`` keeps only runs in that state; ``limit`` keeps the newest ones."""
    for i, status in enumerate(["running", "failed", "running", "succeeded", "running"]):
        store.create_run(make_run(f"r{i}", status=status, created_at=float(i)))
    assert [r.run_id for r in store.list_runs(status="running")] == ["r4", "r2", "r0"]
    assert [r.run_id for r in store.list_runs(status="running", limit=2)] == ["r4", "r2"]
    assert [r.run_id for r in store.list_runs(limit=1)] == ["r4"]
    assert store.list_runs(status="cancelled") == []
    assert store.list_runs(limit=0) == []
    assert len(store.list_runs(limit=10**30)) == 5  # past what SQL integers hold: no limit


@pytest.mark.parametrize("limit", [-1, True, 2.5, "3"])
def test_list_runs_rejects_a_limit_that_is_not_a_whole_number(store: Store, limit: object) -> None:
    with pytest.raises(ValueError, match="limit must be"):
        store.list_runs(limit=limit)  # type: ignore[arg-type]


def test_list_runs_rejects_a_status_that_does_not_exist(store: Store) -> None:
    """A misspelt status filter is a ValueError, not a silently empty list."""
    with pytest.raises(ValueError, match="unknown run status"):
        store.list_runs(status="runing")


def test_commit_creates_the_run_and_then_updates_it(store: Store, make_run: MakeRun) -> None:
    """``commit(run=...)`` upserts: it inserts an unknown run and replaces a known one."""
    store.commit(run=make_run())
    finished = make_run(status="succeeded", updated_at=1001.0, output={"ok": True})
    store.commit(run=finished)
    assert store.get_run("run-1") == finished
    assert len(store.list_runs()) == 1


def test_commit_upserts_steps_by_run_and_step_id(
    store: Store, make_run: MakeRun, make_step: MakeStep
) -> None:
    """A step written again replaces the whole previous row for that run and step id."""
    store.create_run(make_run())
    store.create_run(make_run("run-2"))
    store.commit(steps=[make_step("a"), make_step("b"), make_step("a", run_id="run-2")])
    done = make_step(
        "a",
        status=StepStatus.SUCCEEDED,
        attempts=2,
        args={"name": "Alice"},
        args_hash="h1",
        output={"user_id": "u-1"},
        started_at=1.0,
        finished_at=2.0,
        degraded=True,
        reason="fallback used",
        attempt_history=[{"attempt": 1, "error": {"type": "Timeout"}}, {"attempt": 2}],
        metadata={"resource": "crm"},
    )
    store.commit(steps=[done])
    assert store.get_steps("run-1") == {"a": done, "b": make_step("b")}
    assert store.get_steps("run-2") == {"a": make_step("a", run_id="run-2")}


def test_get_steps_is_ordered_by_step_id_and_empty_for_unknown_runs(
    store: Store, make_run: MakeRun, make_step: MakeStep
) -> None:
    """Step records come back keyed and ordered by step id; an unknown run has none."""
    store.create_run(make_run())
    store.commit(steps=[make_step(s) for s in ["welcome", "account", "subscription"]])
    assert list(store.get_steps("run-1")) == ["account", "subscription", "welcome"]
    assert store.get_steps("nope") == {}


def test_step_status_strings_become_step_status_members(
    store: Store, make_run: MakeRun, make_step: MakeStep
) -> None:
    """A step status given as a string is stored and read back as a StepStatus member."""
    store.create_run(make_run())
    store.commit(steps=[make_step(status="in_doubt")])
    status = store.get_steps("run-1")["account"].status
    assert status is StepStatus.IN_DOUBT


def test_commit_numbers_events_per_run_from_one_without_gaps(
    store: Store, make_run: MakeRun, make_event: MakeEvent
) -> None:
    """Seqs are assigned by the store: 1, 2, 3… per run, across commits and interleaved runs."""
    store.create_run(make_run("a"))
    store.create_run(make_run("b"))
    first = store.commit(events=[make_event("x", "a"), make_event("y", "b"), make_event("z", "a")])
    second = store.commit(events=[make_event("w", "a")])
    assert [(e.run_id, e.type, e.seq) for e in first + second] == [
        ("a", "x", 1),
        ("b", "y", 1),
        ("a", "z", 2),
        ("a", "w", 3),
    ]
    assert [(e.type, e.seq) for e in store.events("a")] == [("x", 1), ("z", 2), ("w", 3)]
    assert store.events("b") == [dataclasses.replace(make_event("y", "b"), seq=1)]


def test_events_after_seq_returns_only_later_events_in_order(
    store: Store, make_run: MakeRun, make_event: MakeEvent
) -> None:
    """``events(run_id, after_seq=n)`` returns the events with seq > n, oldest first."""
    store.create_run(make_run())
    stored = store.commit(
        events=[
            make_event(f"e{i}", step_id="account", attempt=i, data={"i": i}, at=float(i))
            for i in range(1, 6)
        ]
    )
    assert store.events("run-1") == stored
    assert store.events("run-1", after_seq=3) == stored[3:]
    assert store.events("run-1", after_seq=5) == []
    assert store.events("run-1", after_seq=10**30) == []  # past SQL integers: nothing after
    assert store.events("nope") == []


def test_commit_refuses_events_that_already_carry_a_seq(
    store: Store, make_run: MakeRun, make_event: MakeEvent
) -> None:
    """Seqs belong to the store: an event with seq != 0 is a ValueError and nothing is written."""
    store.create_run(make_run())
    with pytest.raises(ValueError, match="seq"):
        store.commit(events=[make_event(), make_event(seq=7)])
    assert store.events("run-1") == []


def test_a_commit_failing_midway_leaves_nothing_behind(
    store: Store, make_run: MakeRun, make_step: MakeStep, make_event: MakeEvent
) -> None:
    """A commit whose last write fails rolls back every run, step and intent write before it."""
    store.create_run(make_run())
    store.record_intent("run-1", "account", "run-1:account", "hash-1")
    before = store.get_run("run-1")
    with pytest.raises(IdempotencyConflictError):
        store.commit(
            run=make_run(status="failed", updated_at=2000.0),
            steps=[make_step(status="running")],
            intents=[
                Intent(run_id="run-1", step_key="b", idempotency_key="run-1:b", args_hash="x"),
                Intent(
                    run_id="run-1",
                    step_key="account",
                    idempotency_key="run-1:account",
                    args_hash="2",
                ),
            ],
            events=[make_event()],
        )
    assert store.get_run("run-1") == before
    assert store.get_steps("run-1") == {}
    assert [i.idempotency_key for i in store.intents("run-1")] == ["run-1:account"]
    assert store.events("run-1") == []
    assert store.commit(events=[make_event()])[0].seq == 1


def test_a_commit_naming_an_unknown_run_leaves_nothing_behind(
    store: Store, make_run: MakeRun, make_step: MakeStep, make_event: MakeEvent
) -> None:
    """An event for a missing run fails the commit with RunNotFoundError, writing nothing."""
    with pytest.raises(RunNotFoundError, match="ghost"):
        store.commit(
            run=make_run(),
            steps=[make_step()],
            events=[make_event(), make_event(run_id="ghost")],
        )
    assert store.get_run("run-1") is None
    assert store.list_runs() == []


def test_steps_and_intents_need_an_existing_run(
    store: Store, make_step: MakeStep, make_run: MakeRun
) -> None:
    """Writing a step or an intent for a run the store does not hold is a RunNotFoundError."""
    with pytest.raises(RunNotFoundError):
        store.commit(steps=[make_step()])
    with pytest.raises(RunNotFoundError):
        store.record_intent("run-1", "account", "run-1:account", "h")
    store.commit(run=make_run(), steps=[make_step()])
    assert list(store.get_steps("run-1")) == ["account"]


@pytest.mark.parametrize(
    "bad",
    [{1, 2}, math.nan, math.inf, object()],
    ids=["set", "nan", "inf", "object"],
)
def test_values_json_cannot_hold_are_refused_before_anything_is_written(
    store: Store, make_run: MakeRun, make_step: MakeStep, bad: object
) -> None:
    """A non-JSON value (set, NaN, infinity, arbitrary object) is a StoreError naming the field."""
    store.create_run(make_run())
    with pytest.raises(StoreError, match="the output of step 'account'"):
        store.commit(run=make_run(status="failed"), steps=[make_step(output={"v": bad})])
    assert store.get_run("run-1") == make_run()
    assert store.get_steps("run-1") == {}


def test_records_passed_in_or_read_back_do_not_alias_stored_state(
    store: Store, make_run: MakeRun, make_step: MakeStep, make_event: MakeEvent
) -> None:
    """Mutating a record after writing it, or one read back, never changes what is stored."""
    run = make_run(metadata={"tags": ["a"]})
    step = make_step(output={"items": [1, 2]})
    event = make_event(data={"n": [1]})
    store.commit(run=run, steps=[step], events=[event])
    run.metadata["tags"].append("mutated")
    assert step.output is not None
    step.output["items"].append(3)
    event.data["n"].append(2)

    read = store.get_run("run-1")
    assert read is not None
    assert read.metadata == {"tags": ["a"]}
    read.plan["steps"].clear()
    read_step = store.get_steps("run-1")["account"]
    assert read_step.output == {"items": [1, 2]}
    read_step.output["items"].clear()
    store.events("run-1")[0].data["n"].clear()

    assert store.get_run("run-1") == make_run(metadata={"tags": ["a"]})
    assert store.get_steps("run-1")["account"].output == {"items": [1, 2]}
    assert store.events("run-1")[0].data == {"n": [1]}


def test_tuples_come_back_as_lists(store: Store, make_run: MakeRun) -> None:
    """JSON has no tuples: every backend returns a stored tuple as a list."""
    store.create_run(make_run(output={"pair": (1, 2)}))
    run = store.get_run("run-1")
    assert run is not None
    assert run.output == {"pair": [1, 2]}


def test_the_store_works_as_a_context_manager(make_run: MakeRun) -> None:
    """``with store:`` yields the store itself and closes it on exit."""
    from planrail.store import MemoryStore

    with MemoryStore() as s:
        s.create_run(make_run())
        assert s.get_run("run-1") is not None
