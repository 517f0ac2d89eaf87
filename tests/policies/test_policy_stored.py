"""The repeated-call guard's settings are part of the run policy stored with a run: a resume
sees them, and a resume under other settings is a policy mismatch."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import planrail
from planrail.engine.checkpoint import PolicyMismatchError
from planrail.policies import RunPolicy
from planrail.store import open_store

STATE: dict[str, Any] = {}


@planrail.tool(side_effects="none")
def flaky_once() -> int:
    if STATE.setdefault("first", True):
        STATE["first"] = False
        raise ValueError("transient")
    return 1


@planrail.tool(side_effects="none")
def job_status(job: str) -> dict[str, str]:
    return {"state": "done"}


TOOLS = [flaky_once, job_status]
PLAN = {
    "steps": [
        {"id": "f", "tool": "flaky_once"},
        {"id": "w", "tool": "job_status", "args": {"job": "j1"}, "depends_on": ["f"]},
    ]
}
# What RunPolicy().to_dict() wrote before the guard's settings were stored.
OLD_STORED = {
    "resources": {},
    "deadline": None,
    "default_retry": None,
    "max_iterations": 100,
    "max_items": 10_000,
    "default_max_parallel": 16,
    "seed": None,
}


@pytest.fixture(autouse=True)
def _fresh_state() -> None:
    STATE.clear()


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.db'}"


@pytest.mark.parametrize(
    "policy",
    [
        RunPolicy(repeatable_tools=frozenset({"job_status", "clock"})),
        RunPolicy(max_identical_calls=None),
        RunPolicy(max_identical_calls=7, repeatable_tools=frozenset({"a"})),
    ],
)
def test_the_guard_settings_are_in_the_stored_form_and_read_back(policy: RunPolicy) -> None:
    data = policy.to_dict()
    if policy.max_identical_calls == 3:  # the default: left out, as runs stored before did
        assert "max_identical_calls" not in data
    else:
        assert data["max_identical_calls"] == policy.max_identical_calls
    if policy.repeatable_tools:
        assert data["repeatable_tools"] == sorted(policy.repeatable_tools)
    stored = json.loads(json.dumps(data))
    assert RunPolicy.from_mapping(stored) == policy
    assert RunPolicy.from_mapping(stored).to_dict() == data


def test_repeatable_tools_are_stored_sorted() -> None:
    data = RunPolicy(repeatable_tools=frozenset({"zeta", "alpha", "mid"})).to_dict()
    assert data["repeatable_tools"] == ["alpha", "mid", "zeta"]


def test_a_policy_stored_without_the_guard_settings_reads_as_the_defaults() -> None:
    """Runs stored before these keys existed: missing means the default, and a default policy
    has the same stored form (so resuming such a run with RunPolicy() is no mismatch)."""
    assert RunPolicy.from_mapping(OLD_STORED) == RunPolicy()
    assert RunPolicy().to_dict() == OLD_STORED


def test_repeatable_tools_must_be_names() -> None:
    with pytest.raises(ValueError, match="repeatable_tools"):
        RunPolicy.from_mapping({"repeatable_tools": [1]})


async def test_a_resume_takes_the_stored_guard_settings(store_url: str) -> None:
    store = open_store(store_url)
    policy = RunPolicy(max_identical_calls=5, repeatable_tools=frozenset({"job_status"}))
    first = await planrail.arun(PLAN, TOOLS, store=store, run_id="r1", policy=policy)
    assert first.status == "failed"
    stored = store.get_run("r1")
    assert stored is not None
    kept = stored.metadata["policies"]["run"]
    assert kept["repeatable_tools"] == ["job_status"]
    assert kept["max_identical_calls"] == 5
    again = planrail.resume("r1", TOOLS, store=store)
    assert (await again.run()).status == "succeeded"
    assert again.policy == policy
    store.close()


async def test_a_resume_under_other_guard_settings_is_a_policy_mismatch(store_url: str) -> None:
    store = open_store(store_url)
    policy = RunPolicy(repeatable_tools=frozenset({"job_status"}))
    await planrail.arun(PLAN, TOOLS, store=store, run_id="r2", policy=policy)
    with pytest.raises(PolicyMismatchError):
        await planrail.resume("r2", TOOLS, store=store, policy=RunPolicy()).run()
    with pytest.raises(PolicyMismatchError):
        await planrail.resume(
            "r2", TOOLS, store=store, policy=RunPolicy(max_identical_calls=None)
        ).run()
    same = await planrail.resume("r2", TOOLS, store=store, policy=policy).run()
    assert same.status == "succeeded"
    store.close()


async def test_a_run_stored_with_the_default_guard_resumes_under_a_default_policy(
    store_url: str,
) -> None:
    store = open_store(store_url)
    await planrail.arun(PLAN, TOOLS, store=store, run_id="r3")
    stored = store.get_run("r3")
    assert stored is not None
    assert stored.metadata["policies"]["run"] == OLD_STORED
    resumed = await planrail.resume("r3", TOOLS, store=store, policy=RunPolicy()).run()
    assert resumed.status == "succeeded"
    store.close()


def test_a_resumed_run_calls_under_the_stored_guard_settings(store_url: str) -> None:
    """The stored settings are applied, not only compared: a polling step whose tool the first
    run declared repeatable polls again after a resume (it failed with RepeatedCallError, the
    guard built from the default policy before the stored one was read)."""
    polls: list[int] = []

    @planrail.tool(side_effects="none")
    def poll(job: str) -> dict[str, str]:
        polls.append(1)
        return {"state": "done" if len(polls) >= 5 else "running"}

    plan = {
        "steps": [
            {"id": "f", "tool": "flaky_once"},
            {
                "id": "wait",
                "tool": "poll",
                "args": {"job": "j1"},
                "depends_on": ["f"],
                "repeat": {"until": {"eq": ["${self.state}", "done"]}, "max_iterations": 10},
            },
        ]
    }
    tools = [flaky_once, poll]
    with open_store(store_url) as store:
        policy = RunPolicy(repeatable_tools=frozenset({"poll"}))
        first = planrail.run(plan, tools, store=store, run_id="r", policy=policy)
        assert (first.steps["f"].status, first.steps["wait"].status) == ("failed", "skipped")
        result = asyncio.run(planrail.resume("r", tools, store=store).run())
    assert result.status == "succeeded", result.steps["wait"].error
    assert len(polls) == 5
