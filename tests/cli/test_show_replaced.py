"""``planrail show`` and ``planrail runs`` say when a run was replaced by a replan, from the one
stored fact (the run record's ``replanned_as``, :func:`planrail.engine.gate.replaced_by`):
``show RUN`` prints that ``RUN-r1`` replaced it and to resume that one, ``show --json`` and
``runs --json`` carry ``"replanned_as": "RUN-r1"`` on it (and on no other run: their JSON is
as it was), and ``runs`` marks its status.

The replaced run is made by the real API, as ``tests/engine/test_replan_restored_committed.py``
makes one: an :class:`~planrail.agent.Agent` over the CLI's store, with a scripted model whose
first plan fails at ``b`` and whose replan (reusing ``a``) is stored as ``RUN-r1``, here
waiting for approval."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from engine.test_replan_restored_committed import FIRST, GOAL, REPLAN, Ledger, make_tools
from planrail.agent import Agent
from planrail.cli.jsonout import json_text
from planrail.engine.checkpoint import load_result
from planrail.store import Store, open_store
from planrail.testing import ScriptedLLM

from .conftest import Cli

ORIGINAL_ROW_KEYS = {"run_id", "status", "created_at", "updated_at", "goal", "steps", "plan_hash"}
"""The keys every ``runs --json`` object had before: a run not replaced has these only."""


@pytest.fixture
def replaced(cli: Cli) -> Iterator[Store]:
    """The CLI's store, holding ``RUN`` (failed, replaced by ``RUN-r1``) and ``RUN-r1``; kept
    open for reading what it holds."""
    answers = iter([True, None])  # the first plan approved, the replan deferred
    with open_store(os.environ["PLANRAIL_STORE"]) as store:
        agent = Agent(
            ScriptedLLM([FIRST, REPLAN]),
            make_tools(Ledger(notify_fails=1)),  # ``b`` fails in RUN, for good
            approval=lambda _request: next(answers),
            max_replans=1,
            store=store,
            run_id="RUN",
        )
        asyncio.run(agent.run(GOAL))
        yield store


def _newer(store: Store, run_id: str) -> Any:
    """The version the store says replaced ``run_id`` (None: none)."""
    run = store.get_run(run_id)
    assert run is not None
    return run.metadata.get("replanned_as")


def _result_json(store: Store, run_id: str) -> Any:
    """The ``run --json`` object of ``run_id`` as the store holds it."""
    result = load_result(store, run_id)
    assert result is not None
    return json.loads(json_text(result.to_dict()))


def test_show_says_the_run_was_replaced_and_which_version_to_resume(
    cli: Cli, replaced: Store
) -> None:
    """``show RUN`` says once that ``RUN-r1`` replaced it and to resume that; ``show RUN-r1``
    (not replaced) says nothing of it."""
    run = replaced.get_run("RUN")
    assert run is not None
    assert (run.status, _newer(replaced, "RUN")) == ("failed", "RUN-r1")
    shown = cli("show", "RUN")
    assert shown.exit_code == 0, shown.output
    lines = [line for line in shown.stdout.splitlines() if "replaced by" in line]
    assert len(lines) == 1, shown.stdout
    assert "replaced by RUN-r1" in lines[0]
    assert "resume RUN-r1" in lines[0]
    assert "planrail resume RUN-r1" in lines[0]
    assert _newer(replaced, "RUN-r1") is None
    shown = cli("show", "RUN-r1")
    assert shown.exit_code == 0, shown.output
    assert "replaced" not in shown.stdout


def test_show_json_carries_replanned_as_only_on_the_replaced_run(cli: Cli, replaced: Store) -> None:
    """``RUN``'s object is its ``run --json`` object with ``replanned_as`` added; ``RUN-r1``'s
    is its ``run --json`` object, unchanged."""
    code, shown = cli.json("show", "RUN", "--json")
    assert code == 0
    assert shown["replanned_as"] == _newer(replaced, "RUN") == "RUN-r1"
    assert {k: v for k, v in shown.items() if k != "replanned_as"} == _result_json(replaced, "RUN")
    code, shown = cli.json("show", "RUN-r1", "--json")
    assert code == 0
    assert shown == _result_json(replaced, "RUN-r1")
    assert "replanned_as" not in shown


def test_runs_marks_the_replaced_run(cli: Cli, replaced: Store) -> None:
    for args in ((), ("--status", "failed")):
        listed = cli("runs", *args)
        assert listed.exit_code == 0, listed.output
        row = next(line for line in listed.stdout.splitlines() if " RUN " in f" {line} ")
        assert "failed (replaced by RUN-r1)" in row, listed.stdout
    listed = cli("runs", "--status", "awaiting_approval")
    assert listed.exit_code == 0, listed.output
    assert "RUN-r1" in listed.stdout
    assert "replaced" not in listed.stdout


def test_runs_json_adds_the_key_only_to_the_replaced_run(cli: Cli, replaced: Store) -> None:
    result = cli("runs", "--json")
    assert result.exit_code == 0, result.output
    rows = {r["run_id"]: r for r in json.loads(result.stdout)}
    assert set(rows) == {"RUN", "RUN-r1"}
    assert set(rows["RUN-r1"]) == ORIGINAL_ROW_KEYS
    assert set(rows["RUN"]) == ORIGINAL_ROW_KEYS | {"replanned_as"}
    assert rows["RUN"]["replanned_as"] == _newer(replaced, "RUN")
    for run_id, row in rows.items():
        run = replaced.get_run(run_id)
        assert run is not None
        assert (row["status"], row["plan_hash"]) == (run.status, run.plan_hash)
