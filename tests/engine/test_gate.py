"""The gate every run goes through: approval bound to the plan's content, policies that travel
with the run, and nothing that changes the world before the plan is approved."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

import planrail
from planrail.engine import operations
from planrail.engine.approval import ApprovalRequest, ApprovalRequiredError, defer
from planrail.engine.checkpoint import PlanMismatchError, PolicyMismatchError
from planrail.engine.executor import Execution
from planrail.engine.runners import LocalRunner
from planrail.plan.model import Plan, Step
from planrail.policies.security import ApprovalMismatchError
from planrail.store import open_store

CALLS: list[str] = []


@planrail.tool(side_effects="none")
def look(q: str) -> dict[str, str]:
    CALLS.append("look")
    return {"q": q}


@planrail.tool(side_effects="unsafe")
def pay(to: str, amount: int) -> dict[str, Any]:
    CALLS.append(f"pay:{to}:{amount}")
    return {"paid": amount}


TOOLS = [look, pay]
PLAN = {
    "goal": "pay",
    "steps": [
        {"id": "a", "tool": "look", "args": {"q": "bill"}},
        {"id": "b", "tool": "pay", "args": {"to": "alice", "amount": 10}, "depends_on": ["a"]},
    ],
}


@pytest.fixture(autouse=True)
def _fresh_calls() -> None:
    CALLS.clear()


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.db'}"


async def test_without_an_approver_a_side_effecting_plan_does_not_start() -> None:
    """The Python API no longer runs unapproved side effects: no approver and no approve=True
    is a clear error before any tool is called."""
    with pytest.raises(ApprovalRequiredError, match="approve=True") as caught:
        await planrail.arun(PLAN, TOOLS)
    assert CALLS == []
    assert str(caught.value).startswith("step 'b' changes the world or asks for approval, and")


async def test_a_read_only_plan_needs_no_approval() -> None:
    """Nothing to approve: the run goes ahead without an approver."""
    result = await planrail.arun({"steps": [PLAN["steps"][0]]}, TOOLS)
    assert result.status == "succeeded"


async def test_the_approver_sees_the_steps_and_the_hash_and_its_no_stops_everything() -> None:
    """The approver is asked once with the steps that change the world and the hash it binds;
    a no ends the run ``awaiting_approval`` with nothing called."""
    seen: list[ApprovalRequest] = []

    def refuse(request: ApprovalRequest) -> bool:
        seen.append(request)
        return False

    result = await planrail.arun(PLAN, TOOLS, approver=refuse)
    assert result.status == "awaiting_approval"
    assert CALLS == []
    (request,) = seen
    assert request.steps == ("b",)
    assert request.plan_hash == planrail.load_plan(PLAN, TOOLS).hash
    assert request.side_effects == {"a": "none", "b": "unsafe"}


@pytest.mark.parametrize("answer", ["no", "n", "yes", 1, [True], "False"])
async def test_only_true_approves(answer: object) -> None:
    """An approver returning anything but True, False or None — ``input()``'s "no" is truthy —
    refuses: nothing is called (it was ``bool(answer)``: "no" approved and paid). The Agent's
    approval callback follows the same rule."""
    from planrail.agent import Agent
    from planrail.testing import ScriptedLLM

    result = await planrail.arun(PLAN, TOOLS, approver=lambda request: answer)
    assert result.status == "awaiting_approval"
    assert "approval refused" in (result.error or "")
    planned = await Agent(ScriptedLLM([PLAN]), TOOLS, approval=lambda req: answer).run("pay")
    assert planned.status == "refused"
    assert not [c for c in CALLS if c.startswith("pay")]


@pytest.mark.parametrize("approve", ["false", 1, None])
def test_approve_must_be_a_boolean(approve: object) -> None:
    """``approve="false"`` approved the plan (a truthy string): a TypeError before anything."""
    with pytest.raises(TypeError, match="approve must be True or False"):
        planrail.prepare(PLAN, TOOLS, approve=approve)  # type: ignore[arg-type]
    assert CALLS == []


async def test_a_deferred_run_is_stored_then_approved_and_resumed(store_url: str) -> None:
    """``defer`` stores the run ``awaiting_approval``; an operator's approve binds the stored
    hash, and resume runs it once — the approval record says who and when."""
    store = open_store(store_url)
    result = await planrail.arun(PLAN, TOOLS, store=store, run_id="r1", approver=planrail.defer)
    assert result.status == "awaiting_approval"
    assert store.get_run("r1").status == "awaiting_approval"  # type: ignore[union-attr]
    assert CALLS == []
    operations.approve(store, "r1", by="alice")
    done = await planrail.resume("r1", TOOLS, store=store).run()
    assert done.status == "succeeded"
    assert CALLS == ["look", "pay:alice:10"]
    approval = store.get_run("r1").approval  # type: ignore[union-attr]
    assert approval["by"] == "alice"
    assert approval["at"] > 0
    store.close()


async def test_a_run_an_operator_refused_never_runs_again(store_url: str) -> None:
    """``planrail refuse`` ends a waiting run cancelled for good: a resume, or the same plan
    run again under its id with approve=True, is refused before anything is written or called
    (a resume set it back to awaiting_approval, and a second one with --yes ran it)."""
    from planrail.engine.approval import defer
    from planrail.errors import ApprovalRefusedError

    with open_store(store_url) as store:
        waiting = planrail.prepare(PLAN, TOOLS, store=store, run_id="r", approver=defer)
        assert (await waiting.run()).status == "awaiting_approval"
        operations.refuse(store, "r", by="ops")
        before = store.events("r")
        with pytest.raises(ApprovalRefusedError, match=r"was refused .* stays cancelled"):
            planrail.resume("r", TOOLS, store=store, approve=True)  # said before it is made
        again = planrail.prepare(PLAN, TOOLS, store=store, run_id="r", approve=True)
        with pytest.raises(ApprovalRefusedError, match=r"was refused .* stays cancelled"):
            await again.run()
        assert store.get_run("r").status == "cancelled"  # type: ignore[union-attr]
        assert store.events("r") == before
    assert CALLS == []


async def test_changing_the_plan_in_place_after_approval_is_refused_before_any_call() -> None:
    """Steps are frozen but their args dicts are not: a payee changed after approval is
    caught by the hash recomputed at the gate, before any tool runs."""
    plan = planrail.load_plan(PLAN, TOOLS)
    approval = {"plan_hash": plan.hash, "by": "alice"}
    plan.step("b").args["to"] = "mallory"
    with pytest.raises(ApprovalMismatchError):
        await Execution(plan, TOOLS, approval=approval).run()
    assert CALLS == []


async def test_editing_the_stored_plan_is_refused_on_resume(store_url: str) -> None:
    """Someone rewrites the plan in the store after approval: resume refuses it (the stored
    plan no longer has the hash the approval and the run were bound to) and calls nothing."""
    store = open_store(store_url)
    await planrail.arun(PLAN, TOOLS, store=store, run_id="r2", approver=planrail.defer)
    run = store.get_run("r2")
    assert run is not None
    operations.approve(store, "r2")
    tampered = json.loads(json.dumps(run.plan))
    tampered["steps"][1]["args"]["to"] = "mallory"
    store.commit(run=dataclasses.replace(store.get_run("r2"), plan=tampered))  # type: ignore[arg-type]
    with pytest.raises(PlanMismatchError):
        await planrail.resume("r2", TOOLS, store=store).run()
    assert CALLS == []
    store.close()


async def test_another_plan_on_disk_for_a_run_id_is_refused(store_url: str) -> None:
    """``run --run-id`` with a plan file edited after the run started: refused, nothing runs."""
    store = open_store(store_url)
    await planrail.arun(PLAN, TOOLS, store=store, run_id="r3", approver=planrail.defer)
    edited = json.loads(json.dumps(PLAN))
    edited["steps"][1]["args"]["amount"] = 1000
    with pytest.raises(PlanMismatchError):
        await planrail.arun(edited, TOOLS, store=store, run_id="r3", approve=True)
    assert CALLS == []
    store.close()


async def test_resume_applies_the_stored_policies_and_refuses_others_unless_overridden(
    store_url: str,
) -> None:
    """The security and run policies a run started with are stored and re-applied; another
    policy on resume is refused unless overridden, and an override is recorded as an event."""
    deny = planrail.SecurityPolicy.from_mapping(
        {"rules": [{"tool": "pay", "action": "deny", "reason": "no payments"}]}
    )
    store = open_store(store_url)
    first = await planrail.arun(
        PLAN,
        TOOLS,
        store=store,
        run_id="r4",
        security=deny,
        approve=True,
        policy=planrail.RunPolicy(max_items=7),
    )
    assert first.steps["b"].status == "failed"
    again = planrail.resume("r4", TOOLS, store=store)
    assert (await again.run()).steps["b"].status == "failed"
    assert again.security == deny
    assert again.policy.max_items == 7
    assert [c for c in CALLS if c.startswith("pay")] == []
    lenient = planrail.SecurityPolicy()
    with pytest.raises(PolicyMismatchError):
        await planrail.resume("r4", TOOLS, store=store, security=lenient).run()
    third = await planrail.resume(
        "r4", TOOLS, store=store, security=lenient, policy_override=True
    ).run()
    assert third.status == "succeeded"
    assert "policy_overridden" in [e.type for e in store.events("r4")]
    store.close()


async def test_an_open_plan_holds_a_read_only_step_that_asks_for_approval() -> None:
    """A streamed (open) plan starts read-only steps early, but not one marked
    ``requires_approval: true``: it waits for the sealed plan's approval."""
    registry = planrail.ToolRegistry(TOOLS)
    execution = Execution(
        Plan(goal="g", steps=()), registry, open_plan=True, approver=planrail.approve_all
    )
    runner = asyncio.create_task(execution.run())
    free = Step.model_validate({"id": "free", "tool": "look", "args": {"q": "x"}})
    held = Step.model_validate(
        {"id": "held", "tool": "look", "args": {"q": "y"}, "requires_approval": True}
    )
    await asyncio.sleep(0)
    execution.extend([free, held])
    for _ in range(20):
        await asyncio.sleep(0)
    assert CALLS == ["look"], "only the step that needs no approval ran"
    sealed = Plan(goal="g", steps=(free, held))
    assert await execution.approve_and_seal(sealed)
    result = await runner
    assert result.status == "succeeded"
    assert CALLS == ["look", "look"]
    assert execution.approval is not None
    assert execution.approval["steps"] == ["held"]


@pytest.mark.parametrize(
    ("batch", "said"),
    [
        ([{"id": "c", "tool": "look", "args": {"q": "z"}, "depends_on": ["zzz"]}], "unknown"),
        (
            [
                {"id": "c", "tool": "look", "args": {"q": "z"}},
                {"id": "d", "tool": "look", "args": {"q": "w"}, "depends_on": ["d"]},
            ],
            "depends on itself",
        ),
        ([{"id": "c", "tool": "look"}, {"id": "c", "tool": "look"}], "already scheduled"),
    ],
)
async def test_a_refused_extend_adds_nothing(batch: list[dict[str, Any]], said: str) -> None:
    """An open plan's extend() that refuses a batch leaves none of it behind: the plan then
    seals and ends without it (a step of it stayed 'pending' for ever, and the sealed plan
    was refused for lacking it)."""
    registry = planrail.ToolRegistry(TOOLS)
    a = Step.model_validate({"id": "a", "tool": "look", "args": {"q": "x"}})
    execution = Execution(Plan(goal="g", steps=()), registry, open_plan=True)
    runner = asyncio.create_task(execution.run())
    await asyncio.sleep(0)
    execution.extend([a])
    with pytest.raises(ValueError, match=said):
        execution.extend([Step.model_validate(s) for s in batch])
    assert sorted(execution.results) == ["a"]
    execution.seal(Plan(goal="g", steps=(a,)))
    result = await asyncio.wait_for(runner, 60)
    assert result.status == "succeeded"
    assert sorted(result.steps) == ["a"]


class PinnedTool:
    """A tool that reports a schema hash and refuses calls pinned to another (as MCP tools do)."""

    def __init__(self, schema: str) -> None:
        self.spec = planrail.ToolSpec("remote", side_effects="unsafe")
        self.name = "remote"
        self.schema_hash = schema
        self.pin: str | None = None
        self.calls = 0

    async def invoke(self, args: Any, ctx: Any) -> Any:
        if self.pin is not None and self.pin != self.schema_hash:
            raise planrail.ToolError("the tool's schema changed since the plan was approved")
        self.calls += 1
        return {"ok": True}


async def test_an_operators_approval_binds_the_schemas_the_waiting_run_was_shown(
    store_url: str,
) -> None:
    """A run waiting for approval keeps its tools' schema hashes; ``planrail approve`` binds
    them; a resume where the tool now reports another schema is refused at the call."""
    plan = {"goal": "g", "steps": [{"id": "r", "tool": "remote", "args": {}}]}
    store = open_store(store_url)
    shown = PinnedTool("sha256:v1")
    await planrail.arun(plan, [shown], store=store, run_id="r5", approver=planrail.defer)
    assert store.get_run("r5").metadata["tool_schemas"] == {"remote": "sha256:v1"}  # type: ignore[union-attr]
    operations.approve(store, "r5")
    changed = PinnedTool("sha256:v2")
    result = await planrail.resume("r5", [changed], store=store).run()
    assert result.steps["r"].status == "failed"
    assert "schema changed" in result.steps["r"].error["message"]  # type: ignore[index]
    assert changed.calls == 0
    same = PinnedTool("sha256:v1")
    again = await planrail.resume("r5", [same], store=store).run()
    assert again.status == "succeeded"
    assert same.calls == 1
    store.close()


@planrail.tool(side_effects="none", sensitivity="secret")
def vault(name: str) -> dict[str, str]:
    return {"key": f"sk-live-{name}"}


@planrail.tool(side_effects="keyed", secret_params=["token"])
def call_api(token: str, q: str) -> dict[str, str]:
    CALLS.append(f"api:{q}")
    return {"q": q}


async def test_a_run_whose_secrets_come_from_a_step_resumes_from_its_stored_plan(
    store_url: str,
) -> None:
    """A reference into a secret parameter is not a secret: the stored plan keeps it, so the
    run resumes from the store (the hash still matches) and the secret is nowhere in it."""
    plan = {
        "goal": "g",
        "steps": [
            {"id": "v", "tool": "vault", "args": {"name": "prod"}},
            {
                "id": "c",
                "tool": "call_api",
                "args": {"token": "${v.key}", "q": "x"},
                "depends_on": ["v"],
            },
        ],
    }
    store = open_store(store_url)
    await planrail.arun(plan, [vault, call_api], store=store, run_id="r6", approver=planrail.defer)
    assert "sk-live" not in json.dumps(store.get_run("r6").plan)  # type: ignore[union-attr]
    operations.approve(store, "r6")
    result = await planrail.resume("r6", [vault, call_api], store=store).run()
    assert result.status == "succeeded"
    assert CALLS == ["api:x"]
    store.close()


async def test_a_run_with_a_secret_literal_in_its_plan_says_how_to_continue(
    store_url: str,
) -> None:
    """A secret written in the plan is never stored, so the stored plan cannot be resumed on
    its own: a clear error names the way on (the original plan with --run-id)."""
    plan = {
        "goal": "g",
        "steps": [{"id": "c", "tool": "call_api", "args": {"token": "sk-literal", "q": "y"}}],
    }
    store = open_store(store_url)
    await planrail.arun(plan, [call_api], store=store, run_id="r7", approver=planrail.defer)
    with pytest.raises(planrail.PlanError, match="--run-id r7"):
        planrail.resume("r7", [call_api], store=store)
    operations.approve(store, "r7")
    resumed = await planrail.prepare(plan, [call_api], store=store, run_id="r7").run()
    assert resumed.status == "succeeded"
    store.close()


async def test_a_strict_policy_refuses_a_placeholder_in_a_side_effecting_argument() -> None:
    """``"<user_id>"`` in a payment's arguments is a warning for validation, but a run under a
    strict security policy refuses it before anything runs (``placeholder_literal`` error)."""
    plan = {
        "goal": "pay",
        "steps": [{"id": "b", "tool": "pay", "args": {"to": "<user_id>", "amount": 10}}],
    }
    report = planrail.validate(plan, TOOLS)
    assert [w.code for w in report.warnings] == ["placeholder_literal"]
    strict = planrail.SecurityPolicy(strict=True)
    with pytest.raises(planrail.PlanValidationError) as err:
        await planrail.arun(plan, TOOLS, security=strict, approve=True)
    assert [i.code for i in err.value.issues] == ["placeholder_literal"]
    assert CALLS == []


class _HeldPrepare(LocalRunner):
    """A local runner whose ``prepare`` waits until the test lets it go."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = asyncio.Event()
        self.go = asyncio.Event()

    async def prepare(self, tools: Any) -> None:
        self.entered.set()
        await self.go.wait()
        await super().prepare(tools)


async def test_a_runner_that_finds_its_open_plan_ended_while_it_prepared_stops(
    tmp_path: Path,
) -> None:
    """The open plan is deferred at its seal — recorded ``awaiting_approval`` — while the
    execution's runner is still preparing its tools, and its caller does not cancel it (as
    the Agent does). The runner, once prepared, stops there: it does not start the run (its
    status was overwritten ``running``, and it waited for ever on a plan nobody would seal)."""
    registry = planrail.ToolRegistry(TOOLS)
    runner = _HeldPrepare()
    with open_store(f"sqlite:///{tmp_path / 'runs.db'}") as store:
        execution = Execution(
            Plan(goal="g", steps=()),
            registry,
            open_plan=True,
            store=store,
            run_id="R",
            approver=defer,
            tool_runner=runner,
        )
        task = asyncio.create_task(execution.run())
        await runner.entered.wait()
        pay_step = Step.model_validate({"id": "p", "tool": "pay", "args": {"to": "a", "amount": 1}})
        assert not await execution.approve_and_seal(Plan(goal="g", steps=(pay_step,)))
        runner.go.set()
        result = await asyncio.wait_for(task, 10)  # a safety net: it returns at once
        record = store.get_run("R")
    assert result.status == "awaiting_approval"
    assert record is not None
    assert record.status == "awaiting_approval"
    assert CALLS == []
