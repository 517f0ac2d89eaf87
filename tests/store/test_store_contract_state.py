"""The store contract, part 2: idempotency intents, leases and JSON fidelity, on every backend."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planrail.errors import StoreError
from planrail.store import (
    Event,
    IdempotencyConflictError,
    Intent,
    Lease,
    RunRecord,
    StepRecord,
    Store,
)

MakeRun = Callable[..., RunRecord]
MakeStep = Callable[..., StepRecord]


def intent(key: str = "run-1:account", args_hash: str = "h1", run_id: str = "run-1") -> Intent:
    return Intent(
        run_id=run_id, step_key=key.split(":")[-1], idempotency_key=key, args_hash=args_hash
    )


# -- idempotency intents ---------------------------------------------------------------------


def test_recording_the_same_intent_twice_is_a_no_op(store: Store, make_run: MakeRun) -> None:
    """The same key with the same args hash may be recorded again (resumes do); it is kept once."""
    store.create_run(make_run())
    store.record_intent("run-1", "account", "run-1:account", "h1")
    store.record_intent("run-1", "account", "run-1:account", "h1")
    store.commit(intents=[intent(), intent()])
    assert store.intents("run-1") == [intent()]


def test_reusing_a_key_with_other_arguments_conflicts(store: Store, make_run: MakeRun) -> None:
    """The same key with a different args hash raises IdempotencyConflictError naming both."""
    store.create_run(make_run())
    store.record_intent("run-1", "account", "run-1:account", "h1")
    with pytest.raises(IdempotencyConflictError, match=r"'h1'.*'h2'") as info:
        store.record_intent("run-1", "account", "run-1:account", "h2")
    assert info.value.run_id == "run-1"
    assert store.intents("run-1") == [intent()]


def test_a_conflict_inside_one_commit_is_detected(store: Store, make_run: MakeRun) -> None:
    """Two intents in one commit with the same key and different hashes conflict too."""
    store.create_run(make_run())
    with pytest.raises(IdempotencyConflictError):
        store.commit(intents=[intent(args_hash="h1"), intent(args_hash="h2")])
    assert store.intents("run-1") == []


def test_intents_are_scoped_to_their_run(store: Store, make_run: MakeRun) -> None:
    """The same key string in two runs is two independent intents, listed in key order."""
    store.create_run(make_run("run-1"))
    store.create_run(make_run("run-2"))
    store.commit(intents=[intent("k2", "a"), intent("k1", "b"), intent("k2", "c", run_id="run-2")])
    assert store.intents("run-1") == [intent("k1", "b"), intent("k2", "a")]
    assert store.intents("run-2") == [intent("k2", "c", run_id="run-2")]
    assert store.intents("nope") == []


# -- leases ----------------------------------------------------------------------------------


def test_a_free_lease_is_acquired_and_a_second_owner_is_refused(store: Store) -> None:
    """The first owner gets the lease until now + ttl; another owner is refused meanwhile."""
    assert store.acquire_lease("run-1", "runner-a", ttl=30.0, now=100.0)
    assert not store.acquire_lease("run-1", "runner-b", ttl=30.0, now=129.9)
    assert store.get_lease("run-1") == Lease(run_id="run-1", owner="runner-a", expires_at=130.0)


def test_acquiring_a_lease_already_held_renews_it(store: Store) -> None:
    """Its owner acquiring the lease again succeeds and moves the expiry to now + ttl."""
    assert store.acquire_lease("run-1", "runner-a", ttl=30.0, now=100.0)
    assert store.acquire_lease("run-1", "runner-a", ttl=30.0, now=120.0)
    assert store.get_lease("run-1") == Lease(run_id="run-1", owner="runner-a", expires_at=150.0)


def test_an_expired_lease_is_taken_over(store: Store) -> None:
    """At expires_at the lease is expired: another owner acquires it, the old owner cannot renew."""
    assert store.acquire_lease("run-1", "runner-a", ttl=30.0, now=100.0)
    assert store.acquire_lease("run-1", "runner-b", ttl=10.0, now=130.0)
    assert store.get_lease("run-1") == Lease(run_id="run-1", owner="runner-b", expires_at=140.0)
    assert not store.renew_lease("run-1", "runner-a", ttl=30.0, now=131.0)
    assert not store.acquire_lease("run-1", "runner-a", ttl=30.0, now=131.0)


def test_renew_extends_only_a_live_lease_of_its_owner(store: Store) -> None:
    """Renew succeeds for the owner before expiry; never for another owner or after expiry."""
    assert not store.renew_lease("run-1", "runner-a", ttl=30.0, now=100.0)
    assert store.acquire_lease("run-1", "runner-a", ttl=30.0, now=100.0)
    assert store.renew_lease("run-1", "runner-a", ttl=30.0, now=110.0)
    assert store.get_lease("run-1") == Lease(run_id="run-1", owner="runner-a", expires_at=140.0)
    assert not store.renew_lease("run-1", "runner-b", ttl=30.0, now=111.0)
    assert not store.renew_lease("run-1", "runner-a", ttl=30.0, now=140.0)
    assert store.get_lease("run-1") == Lease(run_id="run-1", owner="runner-a", expires_at=140.0)


def test_release_frees_the_lease_only_for_its_owner(store: Store) -> None:
    """Release by another owner does nothing; release by the owner lets anyone acquire at once."""
    assert store.acquire_lease("run-1", "runner-a", ttl=30.0, now=100.0)
    store.release_lease("run-1", "runner-b")
    assert not store.acquire_lease("run-1", "runner-b", ttl=30.0, now=101.0)
    store.release_lease("run-1", "runner-a")
    assert store.get_lease("run-1") is None
    assert store.acquire_lease("run-1", "runner-b", ttl=30.0, now=101.0)
    store.release_lease("run-1", "runner-b")
    store.release_lease("run-1", "runner-b")


def test_leases_of_different_runs_are_independent(store: Store) -> None:
    """Holding one run's lease says nothing about another run's."""
    assert store.acquire_lease("run-1", "runner-a", ttl=30.0, now=100.0)
    assert store.acquire_lease("run-2", "runner-b", ttl=30.0, now=100.0)
    assert store.get_lease("run-3") is None


@pytest.mark.parametrize("ttl", [0.0, -1.0])
def test_a_lease_ttl_must_be_positive(store: Store, ttl: float) -> None:
    """A ttl of zero or less is a ValueError: such a lease would be expired when taken."""
    with pytest.raises(ValueError, match="ttl"):
        store.acquire_lease("run-1", "runner-a", ttl=ttl, now=100.0)
    with pytest.raises(ValueError, match="ttl"):
        store.renew_lease("run-1", "runner-a", ttl=ttl, now=100.0)


# -- JSON fidelity ---------------------------------------------------------------------------

NESTED: dict[str, Any] = {
    "zeta": 1,
    "alpha": {"nested": [1, 2.5, -0.125, True, False, None, {"deep": [[[]]]}]},
    "unicode": 'Zoë — 東京 — 🚀 — \u0000 nul — \u2028 sep — "quotes" \\ backslash',
    "emoji key 🔑": "ok",
    "big": 2**70,
    "neg": -(2**63),
    "tiny": 5e-324,
    "huge": 1.7976931348623157e308,
    "empty": {"list": [], "dict": {}, "str": ""},
}


def test_nested_json_and_unicode_round_trip_exactly(
    store: Store, make_run: MakeRun, make_step: MakeStep
) -> None:
    """Nested data, unicode, big ints and extreme floats come back equal, with key order kept."""
    store.commit(
        run=make_run(plan=NESTED, output=NESTED, metadata=NESTED),
        steps=[make_step(args=NESTED, output=[NESTED, NESTED], attempt_history=[NESTED])],
    )
    run = store.get_run("run-1")
    step = store.get_steps("run-1")["account"]
    assert run is not None
    for value in (run.plan, run.output, run.metadata, step.args, step.attempt_history[0]):
        assert value == NESTED
        assert list(value) == list(NESTED)
    assert step.output == [NESTED, NESTED]
    assert type(run.plan["big"]) is int
    assert type(run.plan["huge"]) is float


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4)
    ),
    max_leaves=12,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(value=json_values)
def test_any_json_value_round_trips_through_every_json_field(
    store: Store, make_run: MakeRun, make_step: MakeStep, value: Any
) -> None:
    """Whatever JSON value a tool returns is read back equal, as output, args and event data."""
    run_id = f"run-{uuid.uuid4().hex}"
    store.commit(
        run=make_run(run_id, output=value),
        steps=[make_step(run_id=run_id, args=value, output=value)],
        events=[Event(run_id=run_id, type="step_succeeded", at=1.0, data={"v": value})],
    )
    run = store.get_run(run_id)
    step = store.get_steps(run_id)["account"]
    assert run is not None
    assert run.output == value
    assert step.args == value
    assert step.output == value
    assert store.events(run_id)[0].data == {"v": value}


def test_a_lone_surrogate_in_any_json_field_round_trips_exactly(
    store: Store, make_run: MakeRun, make_step: MakeStep
) -> None:
    """A lone surrogate in a JSON string — an error message quoting a file name decoded with
    ``surrogateescape`` — is stored (as its JSON escape) and read back as the same string on
    every backend, keys included; no driver error, no step left ``running``."""
    odd: dict[str, Any] = {"message": "cannot read caf\udce9.txt", "k\ud800": ["\udfff", "ok"]}
    error = {"type": "OSError", "message": "caf\udce9", "retryable": False}
    store.commit(
        run=make_run(output=odd, error=error, metadata=odd),
        steps=[make_step(status="failed", args=odd, output=odd, error=error)],
        events=[Event(run_id="run-1", type="step_failed", at=1.0, data=odd)],
    )
    run = store.get_run("run-1")
    step = store.get_steps("run-1")["account"]
    assert run is not None
    assert (run.output, run.error, run.metadata) == (odd, error, odd)
    assert (step.args, step.output, step.error) == (odd, odd, error)
    assert store.events("run-1")[0].data == odd


def test_a_surrogate_pair_spelled_as_two_characters_is_refused_alike(
    store: Store, make_run: MakeRun, make_step: MakeStep
) -> None:
    """A high surrogate followed by a low one (two code points, not the character they encode)
    cannot come back apart from that character through JSON: every backend refuses it, naming
    the field, before anything is written."""
    store.create_run(make_run())
    with pytest.raises(StoreError, match=r"the output of step 'account'.*side by side"):
        store.commit(steps=[make_step(output={"v": "\ud83d\ude00"})])
    assert store.get_steps("run-1") == {}
    store.commit(steps=[make_step(output={"v": "\U0001f600"})])  # the character itself is fine
    assert store.get_steps("run-1")["account"].output == {"v": "\U0001f600"}


UNSTORABLE = {"nul": "a\x00b", "surrogate": "caf\udce9"}


@pytest.mark.parametrize("char", list(UNSTORABLE))
@pytest.mark.parametrize(
    ("field", "named"),
    [
        ("run_id", "the id of run"),
        ("plan_hash", "the plan hash of run"),
        ("step_id", "the id of step"),
        ("idempotency_key", "the idempotency key of step"),
        ("args_hash", "the args hash of step"),
        ("reason", "the reason of step"),
        ("event_type", "the type of event"),
        ("event_step_id", "the step id of event"),
        ("intent_key", "key of the intent"),
        ("intent_hash", "the args hash of the intent"),
    ],
)
def test_text_fields_holding_nul_or_a_lone_surrogate_are_refused_alike(
    store: Store, make_run: MakeRun, make_step: MakeStep, field: str, named: str, char: str
) -> None:
    """A text column (an id, a key, a hash, a reason) cannot hold NUL on PostgreSQL nor a lone
    surrogate on any UTF-8 store: every backend refuses both with the same ``StoreError``
    naming the field, before anything of the commit is written (SQLite used to keep NUL and
    PostgreSQL to refuse it; a surrogate was a raw ``UnicodeEncodeError``)."""
    bad = UNSTORABLE[char]
    store.create_run(make_run())
    run = make_run(status="failed")
    steps = [make_step()]
    events: list[Event] = []
    intents: list[Intent] = []
    if field == "run_id":
        run = make_run(bad)
    elif field == "plan_hash":
        run = make_run(plan_hash=bad, status="failed")
    elif field in ("step_id", "idempotency_key", "args_hash", "reason"):
        steps = [make_step(bad) if field == "step_id" else make_step(**{field: bad})]
    elif field.startswith("event"):
        kind, step_id = (bad, None) if field == "event_type" else ("step_started", bad)
        events = [Event(run_id="run-1", type=kind, at=1.0, step_id=step_id)]
    else:
        intents = [intent(bad) if field == "intent_key" else intent(args_hash=bad)]
    with pytest.raises(StoreError, match=named) as caught:
        store.commit(run=run, steps=steps, events=events, intents=intents)
    assert caught.value.code == "store_error"
    assert "cannot hold" in str(caught.value)
    assert store.list_runs() == [make_run()]
    assert store.get_steps("run-1") == {}
    assert store.events("run-1") == []
    assert store.intents("run-1") == []


@pytest.mark.parametrize("char", list(UNSTORABLE))
def test_a_lease_no_text_column_can_hold_is_refused_and_never_held(store: Store, char: str) -> None:
    """A lease's run id or owner holding NUL or a lone surrogate is refused alike by every
    backend; renewing or releasing one is a no-op (no such lease can be held)."""
    bad = UNSTORABLE[char]
    for run_id, owner in ((bad, "me"), ("run-1", bad)):
        with pytest.raises(StoreError, match="of a lease"):
            store.acquire_lease(run_id, owner, ttl=10, now=0)
        assert store.get_lease(run_id) is None
        assert store.renew_lease(run_id, owner, ttl=10, now=1) is False
        store.release_lease(run_id, owner)
    assert store.get_lease("run-1") is None
