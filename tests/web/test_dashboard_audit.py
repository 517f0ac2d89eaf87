"""Audit of the dashboard door: operator actions on runs of every kind a store holds.

The runs: one a streamed agent (``Agent(stream=True)``) left ``awaiting_approval``; one that
another process (``planrail run``) is driving under its lease; a version a replan replaced
(``RUN`` after ``RUN-r1``, marked ``replanned_as``); runs that carry an LLM budget. For each,
what the dashboard shows is what the store holds; an action the run path would refuse is
refused with a clear 409 (never a 500 or a traceback) and changes nothing; and approving on the
dashboard, then resuming (from the dashboard, or through ``planrail.resume`` where a model is
needed: the dashboard has none), calls each tool once, as the tools' own ledger says.

Each run is stored by one store object and acted on through others over the same SQLite file,
as separate processes would. The TestClient tests need no browser; the one browser test uses
the session's Chromium (``page``) and skips where there is none.
"""

from __future__ import annotations

import asyncio
import json
import os
import select
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from pydantic import BaseModel
from starlette.testclient import TestClient

import planrail
from planning.conftest import Kit, make_kit, streamed_good_plan
from planning.plans import GOAL, good_plan
from planrail.agent import Agent, approve_all
from planrail.errors import ApprovalRefusedError
from planrail.llm import Budget
from planrail.plan.catalog import load_tools
from planrail.plan.tools import Tool, ToolRegistry
from planrail.store import Store, open_store
from planrail.testing.llm import Scripted, ScriptedLLM
from planrail.web import Dashboard, Guard, create_app

from .conftest import Served

TOKEN = "tok-AUDIT-dashboard-0123"
PORT = 8797


# ------------------------------------------------------------------ the dashboard, as a client


class Board:
    """A signed-in client of a dashboard (Starlette's TestClient: no browser, no network).

    Server errors come back as answers (``raise_server_exceptions=False``), so that a 500 is
    seen as the 500 an operator would get."""

    def __init__(self, dash: Dashboard) -> None:
        self.dash = dash
        base = f"http://127.0.0.1:{dash.guard.port}"
        self.client = TestClient(
            create_app(dash), base_url=base, follow_redirects=False, raise_server_exceptions=False
        )
        assert self.client.get(f"/?token={dash.guard.token}").status_code == 303
        self.headers = {"origin": base, "x-csrf-token": dash.guard.csrf}

    @classmethod
    def over(cls, store: Store, tools: list[Tool], *, can_resume: bool = True) -> Board:
        registry = ToolRegistry.of(tools)
        guard = Guard(TOKEN, PORT)
        return cls(Dashboard(store=store, guard=guard, registry=registry, can_resume=can_resume))

    def act(self, run_id: str, action: str, step: str | None = None, **body: Any) -> Any:
        where = f"/api/runs/{quote(run_id, safe='')}"
        if step is not None:
            where += f"/steps/{quote(step, safe='')}"
        return self.client.post(f"{where}/{action}", headers=self.headers, json=body)

    def info(self, run_id: str) -> dict[str, Any]:
        answer = self.client.get(f"/api/runs/{quote(run_id, safe='')}")
        assert answer.status_code == 200, answer.text
        found: dict[str, Any] = answer.json()
        return found

    def row(self, run_id: str, flt: str = "") -> dict[str, Any] | None:
        answer = self.client.get("/api/runs" + (f"?filter={flt}" if flt else ""))
        assert answer.status_code == 200, answer.text
        return next((r for r in answer.json()["runs"] if r["run_id"] == run_id), None)

    def finish(self, run_id: str) -> None:
        """Until the resume the dashboard started for ``run_id`` (if any) has ended."""
        thread = self.dash.runners.get(run_id)
        if thread is not None:
            thread.join(timeout=60)
            assert not thread.is_alive(), "the dashboard's resume did not end"


def _refused(answer: Any, kind: str, said: str) -> None:
    """A 409 with the library's error: its type and a message saying why."""
    assert answer.status_code == 409, answer.text
    assert "Traceback" not in answer.text
    error = answer.json()["error"]
    assert error["type"] == kind, error
    assert said in error["message"], error
    assert set(error) == {"type", "message", "retryable"}


def _state(store: Store, run_id: str) -> tuple[Any, ...]:
    """What an action could have changed: the run record, its steps, how many events."""
    return store.get_run(run_id), store.get_steps(run_id), len(store.events(run_id))


def _shows_the_store(board: Board, store: Store, run_id: str) -> dict[str, Any]:
    """The run's JSON and its run-list row say what the store holds; the JSON."""
    info = board.info(run_id)
    run = store.get_run(run_id)
    steps = store.get_steps(run_id)
    assert run is not None
    assert (info["status"], info["plan_hash"]) == (run.status, run.plan_hash)
    planned = [str(s["id"]) for s in run.plan["steps"]]
    assert info["steps"] == {
        sid: str(steps[sid].status) if sid in steps else "pending" for sid in planned
    }
    assert info["last_seq"] == store.events(run_id)[-1].seq
    row = board.row(run_id)
    assert row is not None
    doubtful = sum(1 for r in steps.values() if r.status == "in_doubt")
    assert (row["status"], row["steps"], row["in_doubt"]) == (run.status, len(planned), doubtful)
    return info


def _operator_actions(store: Store, run_id: str) -> list[str]:
    return [str(e.data["action"]) for e in store.events(run_id) if e.type == "operator_action"]


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.db'}"


@pytest.fixture
def store(url: str) -> Iterator[Store]:
    """The dashboard's store object (runs are stored, and resumed, through others)."""
    with open_store(url) as found:
        yield found


# ------------------------------------------------------------------ a streamed agent's run


def _streamed_waiting(url: str, kit: Kit, run_id: str = "S") -> None:
    """A streamed agent's run stored ``awaiting_approval`` (its approver deferred): ``find``
    ran while the plan streamed; ``acct`` and ``mail`` wait for an approval."""
    with open_store(url) as other:
        agent = Agent(
            streamed_good_plan(kit),
            kit.tools,
            approval=lambda _r: None,
            store=other,
            stream=True,
            run_id=run_id,
        )
        result = asyncio.run(agent.run(GOAL))
    assert result.run is not None
    assert result.run.status == "awaiting_approval"
    assert kit.names() == ["search"]


def _resume_with_a_model(url: str, kit: Kit, run_id: str, llm: ScriptedLLM) -> Any:
    """``planrail.resume`` in a runner of its own (another store object), with a model."""
    with open_store(url) as other:
        return asyncio.run(planrail.resume(run_id, kit.tools, store=other, llm=llm).run())


def test_a_streamed_run_waiting_is_shown_as_stored(url: str, store: Store) -> None:
    """The run list's *awaiting* filter, the run's JSON and its approval page say what the
    store holds: waiting, ``find`` succeeded (it ran while the plan streamed), the others
    pending; the approval page binds the stored hash and asks about ``acct`` and ``mail``."""
    kit = make_kit()
    _streamed_waiting(url, kit)
    board = Board.over(store, kit.tools)
    info = _shows_the_store(board, store, "S")
    assert info["steps"] == {
        "find": "succeeded",
        "summary": "pending",
        "acct": "pending",
        "mail": "pending",
    }
    assert board.row("S", "awaiting") is not None
    page = board.client.get("/runs/S/approval")
    assert page.status_code == 200
    run = store.get_run("S")
    assert run is not None
    assert f'<code id="plan-hash">{run.plan_hash}</code>' in page.text
    assert "2 step(s) change the world or ask for approval:\nacct, mail" in page.text
    assert 'id="approve" data-action="approve">approve and run' in page.text


def test_step_actions_on_a_streamed_run_waiting_are_refused_and_change_nothing(
    url: str, store: Store
) -> None:
    """Nothing of the waiting run is failed or in doubt: retrying or resolving any of its steps
    is a 409 saying so, and the store is as it was."""
    kit = make_kit()
    _streamed_waiting(url, kit)
    board = Board.over(store, kit.tools)
    before = _state(store, "S")
    _refused(board.act("S", "retry", "find"), "OperationError", "step 'find' is succeeded")
    _refused(board.act("S", "retry", "acct"), "OperationError", "is not started, not failed")
    _refused(board.act("S", "resolve", "find", decision="retry"), "OperationError", "not in doubt")
    _refused(
        board.act("S", "resolve", "mail", decision="succeeded", output={"message_id": "m"}),
        "OperationError",
        "step 'mail' is not started, not in doubt",
    )
    assert _state(store, "S") == before
    assert kit.names() == ["search"]


def test_approve_on_the_dashboard_then_resume_calls_each_tool_once(url: str, store: Store) -> None:
    """Approved on the dashboard (bound to the stored hash), then resumed with a model: the
    rest runs, ``search`` (early) is not called again, every tool was called once."""
    kit = make_kit()
    _streamed_waiting(url, kit)
    board = Board.over(store, kit.tools)
    answer = board.act("S", "approve")
    assert answer.status_code == 200, answer.text
    run = store.get_run("S")
    assert run is not None
    assert answer.json() == {"status": "pending", "plan_hash": run.plan_hash}
    assert run.approval is not None
    assert run.approval["plan_hash"] == run.plan_hash
    assert _operator_actions(store, "S") == ["approve"]
    _shows_the_store(board, store, "S")

    done = _resume_with_a_model(url, kit, "S", ScriptedLLM(["A summary."]))

    assert done.status == "succeeded", done.why
    assert kit.names() == ["search", "create_account", "send_email"]
    info = _shows_the_store(board, store, "S")
    assert set(info["steps"].values()) == {"succeeded"}


def test_approve_and_run_on_the_dashboard_then_resume_with_a_model_calls_each_tool_once(
    url: str, store: Store
) -> None:
    """ "Approve and run": the dashboard resumes the run through the one run path, without a
    model (it has none) — ``acct`` runs, the ``llm_call`` step fails saying it needs a client,
    ``mail`` is skipped, as the store and the dashboard both say. Resumed then with a model,
    the summary is written and the mail sent: each tool called once in all."""
    kit = make_kit()
    _streamed_waiting(url, kit)
    board = Board.over(store, kit.tools)
    answer = board.act("S", "approve", run=True)
    assert answer.status_code == 200, answer.text
    assert answer.json()["resume"] == "started"
    board.finish("S")
    steps = store.get_steps("S")
    summary = steps["summary"].error
    assert summary is not None
    assert "no handler for action 'llm_call'" in summary["message"]
    assert (steps["acct"].status, steps["mail"].status) == ("succeeded", "skipped")
    info = _shows_the_store(board, store, "S")
    assert (info["status"], info["resuming"]) == ("failed", False)
    assert kit.names() == ["search", "create_account"]

    done = _resume_with_a_model(url, kit, "S", ScriptedLLM(["A summary."]))

    assert done.status == "succeeded", done.why
    assert kit.names() == ["search", "create_account", "send_email"]


def test_refuse_on_the_dashboard_ends_a_streamed_run_for_good(url: str, store: Store) -> None:
    """Refused on the dashboard: ``cancelled`` with the refusal; resuming it is refused, from
    the dashboard (409) and through ``planrail.resume``; only the early read-only call ran."""
    kit = make_kit()
    _streamed_waiting(url, kit)
    board = Board.over(store, kit.tools)
    answer = board.act("S", "refuse", reason="not this week")
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"status": "cancelled"}
    _shows_the_store(board, store, "S")
    after = _state(store, "S")
    _refused(board.act("S", "resume"), "ApprovalRefusedError", "was refused")
    _refused(board.act("S", "approve"), "OperationError", "it is cancelled")
    _refused(board.act("S", "cancel"), "OperationError", "it is cancelled")
    assert _state(store, "S") == after
    with open_store(url) as other, pytest.raises(ApprovalRefusedError):
        planrail.resume("S", kit.tools, store=other)
    assert kit.names() == ["search"]


def test_resume_of_a_run_waiting_for_approval_is_refused_on_the_dashboard(
    url: str, store: Store
) -> None:
    """The run page's "resume" on a run nobody approved: the run path refuses to start it
    (``ApprovalRequiredError``: no approver), so the dashboard must say so (409), as it says
    every other refusal before it answers. Nothing is written and nothing is called either
    way."""
    kit = make_kit()
    _streamed_waiting(url, kit)
    board = Board.over(store, kit.tools)
    before = _state(store, "S")
    answer = board.act("S", "resume")
    board.finish("S")
    assert _state(store, "S") == before
    assert kit.names() == ["search"]
    _refused(answer, "ApprovalRequiredError", "no approver")


# ------------------------------------------------------------------ a run another process drives


AUDIT_TOOLS = textwrap.dedent(
    '''
    """The lease test's tools: each call appends a line to $AUDIT_DIR/ledger.jsonl."""

    import asyncio
    import json
    import os
    from pathlib import Path

    import planrail


    def _note(tool, ctx):
        line = json.dumps({"tool": tool, "key": ctx.idempotency_key, "pid": os.getpid()})
        with open(Path(os.environ["AUDIT_DIR"]) / "ledger.jsonl", "a") as f:
            f.write(line + "\\n")


    @planrail.tool(side_effects="keyed")
    def charge(ctx: planrail.StepContext, amount: int) -> dict[str, int]:
        """Charge a card (honours its key)."""
        _note("charge", ctx)
        return {"charged": amount}


    @planrail.tool(side_effects="unsafe")
    async def send(ctx: planrail.StepContext, text: str) -> dict[str, str]:
        """Send a message (unsafe): tell the test it began, wait until it lets go."""
        _note("send", ctx)
        where = Path(os.environ["AUDIT_DIR"])
        began = os.open(where / "started", os.O_WRONLY | os.O_NONBLOCK)
        os.write(began, b"x")
        os.close(began)
        loop = asyncio.get_running_loop()
        released = loop.create_future()
        fd = os.open(where / "release", os.O_RDONLY | os.O_NONBLOCK)
        loop.add_reader(fd, lambda: released.done() or released.set_result(None))
        try:
            await released
        finally:
            loop.remove_reader(fd)
            os.close(fd)
        return {"sent": text}
    '''
)

HELD = {
    "goal": "charge, then send the receipt",
    "steps": [
        {"id": "a", "tool": "charge", "args": {"amount": 5}},
        {"id": "b", "tool": "send", "args": {"text": "receipt"}, "depends_on": ["a"]},
    ],
}


class Gates:
    """The lease test's ledger and FIFOs: ``started`` (a call says it began; the test holds it
    open, so the write never waits) and ``release`` (readable once the test lets go)."""

    def __init__(self, where: Path) -> None:
        self.ledger = where / "ledger.jsonl"
        self.ledger.touch()
        os.mkfifo(where / "started")
        os.mkfifo(where / "release")
        self._release = where / "release"
        self._started = os.open(where / "started", os.O_RDWR | os.O_NONBLOCK)
        self._writer: int | None = None

    def wait_started(self) -> None:
        """Until a call has said it began (bounded only so that a runner that died ends the
        test instead of hanging it)."""
        ready, _, _ = select.select([self._started], [], [], 60)
        assert ready, "the call never began"
        os.read(self._started, 1)

    def let_go(self) -> None:
        if self._writer is None:
            self._writer = os.open(self._release, os.O_RDWR | os.O_NONBLOCK)
            os.write(self._writer, b"x")

    def calls(self) -> list[tuple[str, str]]:
        lines = self.ledger.read_text(encoding="utf-8").splitlines()
        return [(e["tool"], e["key"]) for e in map(json.loads, lines)]

    def close(self) -> None:
        self.let_go()
        os.close(self._started)
        assert self._writer is not None
        os.close(self._writer)


@pytest.fixture
def gates(served: Served, monkeypatch: pytest.MonkeyPatch) -> Iterator[Gates]:
    where = served.tmp / "audit"
    where.mkdir()
    monkeypatch.setenv("AUDIT_DIR", str(where))
    found = Gates(where)
    yield found
    found.close()


def test_actions_on_a_run_another_process_drives(served: Served, gates: Gates) -> None:
    """``planrail run`` in another process holds the run's lease while ``send`` (unsafe) is
    under way. On the dashboard: the run shows as stored (running); approve, refuse, resume,
    resolve and retry are each a 409 naming the runner, and change nothing; cancel asks that
    runner to stop, and it does: ``send`` in doubt, the run cancelled. Resolved as sent and
    resumed from the dashboard, the run succeeds: each tool was called once."""
    tools = served.tmp / "audit_tools.py"
    tools.write_text(AUDIT_TOOLS)
    plan = served.tmp / "held.json"
    plan.write_text(json.dumps(HELD))
    dash = served.server.dash
    dash.registry = ToolRegistry.of(load_tools(str(tools)))
    board = Board(dash)
    proc = served.planrail(
        "run", str(plan), "--tools", str(tools), "--run-id", "held", "--yes", "--quiet"
    )
    try:
        gates.wait_started()
        store = served.store
        info = _shows_the_store(board, store, "held")
        assert (info["status"], info["steps"]) == ("running", {"a": "succeeded", "b": "running"})
        assert (info["resuming"], board.row("held", "running") is not None) == (False, True)
        before = _state(store, "held")
        for answer in (
            board.act("held", "approve"),
            board.act("held", "approve", run=True),
            board.act("held", "refuse", reason="no"),
            board.act("held", "resume"),
            board.act("held", "resolve", "b", decision="succeeded", output={"sent": "receipt"}),
            board.act("held", "resolve", "b", decision="retry"),
            board.act("held", "retry", "b"),
            board.act("held", "retry", "a"),
        ):
            _refused(answer, "RunBusyError", "'held' is being run by")
        assert _state(store, "held") == before

        cancel = board.act("held", "cancel")
        assert cancel.status_code == 200, cancel.text
        assert cancel.json() == {"outcome": "requested"}
        _out, err = proc.communicate(timeout=60)
    finally:
        gates.let_go()
        if proc.returncode is None:
            proc.kill()
            proc.communicate(timeout=60)
    assert b"Traceback" not in err, err.decode()
    steps = store.get_steps("held")
    assert (store.get_run("held").status, steps["b"].status) == ("cancelled", "in_doubt")  # type: ignore[union-attr]
    _shows_the_store(board, store, "held")
    assert board.row("held", "in_doubt") is not None

    decided = board.act("held", "resolve", "b", decision="succeeded", output={"sent": "receipt"})
    assert decided.status_code == 200, decided.text
    resumed = board.act("held", "resume")
    assert resumed.status_code == 200, resumed.text
    board.finish("held")

    assert store.get_run("held").status == "succeeded"  # type: ignore[union-attr]
    assert store.get_steps("held")["b"].output == {"sent": "receipt"}
    assert gates.calls() == [("charge", "held:a"), ("send", "held:b")]
    assert _operator_actions(store, "held") == ["cancel", "resolve"]
    _shows_the_store(board, store, "held")


# ------------------------------------------------------------------ a replaced run version


class Charge(BaseModel):
    charge_id: str


class Sent(BaseModel):
    sent: bool


def _replan_tools(calls: list[tuple[str, str]]) -> list[Tool]:
    """``charge`` and ``notify`` (both keyed) noting (tool, key); ``notify`` fails in ``RUN``."""

    @planrail.tool(side_effects="keyed")
    async def charge(ctx: planrail.StepContext, amount: int) -> Charge:
        """Charge a card."""
        calls.append(("charge", ctx.idempotency_key))
        return Charge(charge_id="ch_1")

    @planrail.tool(side_effects="keyed")
    async def notify(ctx: planrail.StepContext, charge_id: str) -> Sent:
        """Tell the customer."""
        calls.append(("notify", ctx.idempotency_key))
        if ctx.run_id == "RUN":
            raise ValueError("the mail server refused the message")
        return Sent(sent=True)

    return [charge, notify]


REPLAN_GOAL = "Charge Alice and tell her"
FIRST = {
    "goal": REPLAN_GOAL,
    "steps": [
        {"id": "a", "tool": "charge", "args": {"amount": 5}},
        {"id": "b", "tool": "notify", "args": {"charge_id": "${a.charge_id}"}, "depends_on": ["a"]},
    ],
}
REPLAN = {
    "goal": REPLAN_GOAL,
    "steps": [
        {"id": "c", "tool": "notify", "args": {"charge_id": "${a.charge_id}"}, "depends_on": ["a"]},
    ],
}


def _replaced(url: str, tools: list[Tool]) -> None:
    """``RUN`` fails at ``b``; the agent's replan (reusing ``a``) is stored as ``RUN-r1``,
    waiting for approval (the first plan was approved, the replan deferred); ``RUN`` is
    marked ``replanned_as`` it."""
    answers: Iterator[bool | None] = iter([True, None])
    with open_store(url) as other:
        agent = Agent(
            ScriptedLLM([FIRST, REPLAN]),
            tools,
            approval=lambda _r: next(answers),
            max_replans=1,
            store=other,
            run_id="RUN",
        )
        asyncio.run(agent.run(REPLAN_GOAL))
        replaced, replan = other.get_run("RUN"), other.get_run("RUN-r1")
    assert replaced is not None
    assert replan is not None
    assert (replaced.status, replaced.metadata.get("replanned_as")) == ("failed", "RUN-r1")
    assert replan.status == "awaiting_approval"


def test_a_replaced_version_is_shown_as_stored_and_its_actions_are_refused(
    url: str, store: Store
) -> None:
    """``RUN`` (replaced by ``RUN-r1``) shows as stored: failed at ``b``. Approving, refusing or
    cancelling it does not apply (it is failed), resuming it is refused naming ``RUN-r1``,
    resolving ``b`` is refused (not in doubt): 409s, nothing changed, nothing called."""
    calls: list[tuple[str, str]] = []
    tools = _replan_tools(calls)
    _replaced(url, tools)
    board = Board.over(store, tools)
    info = _shows_the_store(board, store, "RUN")
    assert info["steps"] == {"a": "succeeded", "b": "failed"}
    before = _state(store, "RUN")
    _refused(board.act("RUN", "approve"), "OperationError", "cannot approve run 'RUN'")
    _refused(board.act("RUN", "refuse"), "OperationError", "cannot refuse run 'RUN'")
    _refused(board.act("RUN", "cancel"), "OperationError", "cannot cancel run 'RUN'")
    _refused(board.act("RUN", "resume"), "RunReplannedError", "resume 'RUN-r1' instead")
    _refused(board.act("RUN", "approve", run=True), "OperationError", "it is failed")
    _refused(board.act("RUN", "resolve", "b", decision="retry"), "RunReplannedError", "RUN-r1")
    assert _state(store, "RUN") == before
    assert calls == [("charge", "RUN:a"), ("notify", "RUN:b")]


def test_retry_on_a_replaced_version_is_refused_and_changes_nothing(url: str, store: Store) -> None:
    """ "Retry this step" on ``RUN``'s failed ``b`` after ``RUN-r1`` replaced it: the run path
    refuses to run anything of ``RUN`` again, so the dashboard must refuse the retry (409,
    naming ``RUN-r1``) and leave ``RUN``'s record as it was — failed, replaced."""
    calls: list[tuple[str, str]] = []
    tools = _replan_tools(calls)
    _replaced(url, tools)
    board = Board.over(store, tools)
    before = _state(store, "RUN")
    answer = board.act("RUN", "retry", "b")
    assert calls == [("charge", "RUN:a"), ("notify", "RUN:b")]
    assert _state(store, "RUN") == before, "the replaced version's record was changed"
    _refused(answer, "RunReplannedError", "RUN-r1")


def test_the_replan_approved_and_run_on_the_dashboard_calls_each_tool_once(
    url: str, store: Store
) -> None:
    """``RUN-r1`` shows as stored (``a`` carried in, succeeded; ``c`` pending); "approve and
    run" resumes it from the dashboard: only ``c`` is called; ``charge`` was called once, under
    the first version's key."""
    calls: list[tuple[str, str]] = []
    tools = _replan_tools(calls)
    _replaced(url, tools)
    board = Board.over(store, tools)
    info = _shows_the_store(board, store, "RUN-r1")
    assert info["steps"] == {"a": "succeeded", "c": "pending"}
    assert board.client.get("/runs/RUN-r1/approval").status_code == 200
    answer = board.act("RUN-r1", "approve", run=True)
    assert answer.status_code == 200, answer.text
    assert answer.json()["resume"] == "started"
    board.finish("RUN-r1")
    info = _shows_the_store(board, store, "RUN-r1")
    assert (info["status"], info["steps"]) == ("succeeded", {"a": "succeeded", "c": "succeeded"})
    assert calls == [("charge", "RUN:a"), ("notify", "RUN:b"), ("notify", "RUN-r1:c")]
    assert _state(store, "RUN")[0].status == "failed"


# ------------------------------------------------------------------ runs with an LLM budget


def _budget_run(url: str, kit: Kit, run_id: str, approval: Callable[[Any], Any]) -> Any:
    """An agent's run under ``Budget(max_llm_calls=1)``: planning spends the one call."""
    plan = Scripted(json.dumps(good_plan()), input_tokens=100, output_tokens=10)
    with open_store(url) as other:
        agent = Agent(
            ScriptedLLM([plan]),
            kit.tools,
            approval=approval,
            budget=Budget(max_llm_calls=1),
            store=other,
            run_id=run_id,
        )
        return asyncio.run(agent.run(GOAL))


def _kept_budget(store: Store, run_id: str) -> dict[str, Any] | None:
    run = store.get_run(run_id)
    assert run is not None
    found: dict[str, Any] | None = (run.metadata.get("policies") or {}).get("budget")
    return found


def _a_fresh_model() -> ScriptedLLM:
    return ScriptedLLM([Scripted("A summary.", input_tokens=1, output_tokens=1)])


def _refused_by_the_budget(result: Any, fresh: ScriptedLLM, kit: Kit) -> None:
    """The resume's model was not asked: the budget was spent; nothing downstream ran."""
    assert fresh.requests == [], "the model was asked although the run's budget was spent"
    error = result.steps["summary"].error
    assert error is not None
    assert error["type"] == "BudgetExceededError"
    assert "send_email" not in kit.names()


def test_a_budget_run_approved_on_the_dashboard_resumes_under_its_budget(
    url: str, store: Store
) -> None:
    """Waiting for approval with its budget stored (planning spent the one call): approved on
    the dashboard (the budget stays with it), then resumed with a new model, the summary is
    refused before the model is asked; ``create_account`` ran once, no mail was sent."""
    kit = make_kit()
    _budget_run(url, kit, "B", approval=lambda _r: None)
    kept = _kept_budget(store, "B")
    assert kept is not None
    assert kept["spent"]["calls"] == 1
    board = Board.over(store, kit.tools)
    _shows_the_store(board, store, "B")
    answer = board.act("B", "approve")
    assert answer.status_code == 200, answer.text
    assert _kept_budget(store, "B") == kept

    fresh = _a_fresh_model()
    result = _resume_with_a_model(url, kit, "B", fresh)

    _refused_by_the_budget(result, fresh, kit)
    assert kit.names() == ["search", "create_account"]
    _shows_the_store(board, store, "B")


def test_retrying_a_step_its_budget_stopped_keeps_the_budget(url: str, store: Store) -> None:
    """A run whose ``summary`` the budget refused, shown as stored; "retry this step" on the
    dashboard reopens it, and the budget stays: a resume with a new model is refused again."""
    kit = make_kit()
    first = _budget_run(url, kit, "B", approval=approve_all)
    assert first.status == "budget_exceeded", first.reason
    kept = _kept_budget(store, "B")
    board = Board.over(store, kit.tools)
    info = _shows_the_store(board, store, "B")
    assert info["steps"]["summary"] == "failed"
    answer = board.act("B", "retry", "summary")
    assert answer.status_code == 200, answer.text
    assert store.get_steps("B")["summary"].status == "pending"
    assert _kept_budget(store, "B") == kept

    fresh = _a_fresh_model()
    result = _resume_with_a_model(url, kit, "B", fresh)

    _refused_by_the_budget(result, fresh, kit)
    assert kit.names() == ["search", "create_account"]


def test_a_resume_from_the_dashboard_keeps_the_runs_llm_budget(url: str, store: Store) -> None:
    """ "Approve and run" on the budget run: the dashboard resumes it without a model (its
    ``summary`` fails for want of one). The run's budget must stay stored: resumed then with a
    model, the summary is still refused — the one call the budget allowed was spent planning.
    It was asked, and the mail sent."""
    kit = make_kit()
    _budget_run(url, kit, "B", approval=lambda _r: None)
    kept = _kept_budget(store, "B")
    assert kept is not None
    board = Board.over(store, kit.tools)
    answer = board.act("B", "approve", run=True)
    assert answer.status_code == 200, answer.text
    board.finish("B")
    assert kit.names() == ["search", "create_account"]
    assert _kept_budget(store, "B") is not None, "the dashboard's resume dropped the budget"

    fresh = _a_fresh_model()
    result = _resume_with_a_model(url, kit, "B", fresh)

    _refused_by_the_budget(result, fresh, kit)
    assert kit.names() == ["search", "create_account"]


# ------------------------------------------------------------------ in Chromium


def test_a_streamed_run_approved_in_the_browser_then_resumed_runs_each_tool_once(
    served: Served, page: Any
) -> None:
    """In Chromium: the approval page of the streamed run shows the stored hash and the two
    steps to approve; "approve" (a dashboard without a model to run it with: approve only)
    records the approval; resumed with a model through ``planrail.resume``, the open run page
    turns succeeded live. Every tool was called once."""
    kit = make_kit()
    _streamed_waiting(served.store_url, kit)
    dash = served.server.dash
    dash.registry = ToolRegistry.of(kit.tools)
    dash.can_resume = False
    run = served.store.get_run("S")
    assert run is not None
    page.goto(served.url("/runs/S/approval"))
    assert page.inner_text("#plan-hash") == run.plan_hash
    for step in ("acct", "mail"):
        assert "needs approval" in page.inner_text(f'tr[data-step="{step}"]')
    assert "needs approval" not in page.inner_text('tr[data-step="find"]')
    page.click("#approve")
    page.wait_for_selector("#action-msg:has-text('approve: pending')")
    approved = served.store.get_run("S")
    assert approved is not None
    assert approved.approval is not None
    assert approved.approval["plan_hash"] == run.plan_hash
    page.goto(served.url("/runs/S", token=False))
    page.wait_for_selector("#conn.ok")

    done = _resume_with_a_model(served.store_url, kit, "S", ScriptedLLM(["A summary."]))

    assert done.status == "succeeded", done.why
    page.wait_for_selector('body[data-run-status="succeeded"]')
    for step in ("find", "summary", "acct", "mail"):
        page.wait_for_selector(f'#graph g.step[data-step="{step}"][data-status="succeeded"]')
    assert kit.names() == ["search", "create_account", "send_email"]
