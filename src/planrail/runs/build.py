"""Build a run: compile → gate → execute → record, the same for every way in."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from planrail._memory import collector_paused
from planrail.clock import SYSTEM_CLOCK
from planrail.engine.actions import ActionHandler
from planrail.engine.approval import Approver
from planrail.engine.call_guard import CallGuard
from planrail.engine.executor import BudgetRecord, Execution
from planrail.engine.gate import check_current, resumes_under
from planrail.engine.guard import ToolCallCount
from planrail.engine.result import RunResult, StepResult
from planrail.engine.run_ids import FailureMode
from planrail.errors import PlanError, PlanValidationError, StoreError
from planrail.llm.base import LLM
from planrail.llm.budget import MeteredLLM
from planrail.plan.compiled import CompiledPlan
from planrail.plan.loader import PlanLimits
from planrail.plan.model import Plan
from planrail.plan.secrets import REDACTED
from planrail.plan.tools import AnyTool, ToolRegistry, ToolRunner
from planrail.plan.validate import ValidationOptions, check_plan
from planrail.policies.limits import RunPolicy
from planrail.policies.security import ApproveCall, SecurityPolicy, check_security
from planrail.runs.budget import kept as kept_budget
from planrail.runs.budget import record_of, stored_meter
from planrail.runs.llm_step import LLMStepHandler
from planrail.store.base import RunRecord, Store, check_store
from planrail.types import Clock, Observer

__all__ = ["PlanInput", "ToolsInput", "arun", "prepare", "resume", "run", "validation_options"]

PlanInput = CompiledPlan | Plan | Mapping[str, Any] | str | Path
ToolsInput = ToolRegistry | Iterable[AnyTool] | None


def prepare(
    plan: PlanInput,
    tools: ToolsInput = None,
    *,
    run_id: str | None = None,
    store: Store | None = None,
    security: SecurityPolicy | None = None,
    policy: RunPolicy | None = None,
    approver: Approver | None = None,
    approve: bool = False,
    llm: LLM | None = None,
    models: Callable[[str], LLM] | None = None,
    observers: Iterable[Observer] = (),
    tool_runner: ToolRunner | None = None,
    max_concurrency: int | None = None,
    failure_mode: FailureMode | None = None,
    clock: Clock = SYSTEM_CLOCK,
    limits: PlanLimits | None = None,
    lease_wait: float = 0.0,
    policy_override: bool = False,
    approve_call: ApproveCall | None = None,
    approval: dict[str, Any] | None = None,
    handlers: Mapping[str, ActionHandler] | None = None,
    restored: Mapping[str, StepResult] | None = None,
    replaces: str | None = None,
    reason: str = "plan",
    approval_policy: Callable[[Plan, ToolRegistry], Iterable[str]] | None = None,
    call_guard: CallGuard | None = None,
    previous: Plan | None = None,
    tool_calls: ToolCallCount | None = None,
    budget: BudgetRecord | None = None,
) -> Execution:
    """Validate ``plan`` against ``tools`` and return the :class:`~planrail.Execution` of one run.

    - ``store``: where the run is checkpointed (resumable, visible to ``planrail runs``); the
      run's policies and approval are stored with it.
    - ``security``: the :class:`~planrail.SecurityPolicy` every tool call is vetted by;
      ``policy``: the :class:`~planrail.RunPolicy` (limits, deadline, default retry).
    - ``approver`` / ``approve``: a plan with steps that change the world (or ask for approval)
      runs only once approved — by ``approver`` (see :mod:`planrail.engine.approval`) or by the
      caller itself with ``approve=True``. Without either such a plan does not start
      (:class:`~planrail.engine.approval.ApprovalRequiredError`).
    - ``llm``: the client ``llm_call`` steps ask (``models`` maps a step's own model name).
    - ``budget``: what the run stores of its LLM budget (an Agent passes its meter's, see
      :mod:`planrail.runs.budget`); without one, a ``MeteredLLM`` given as ``llm`` is stored,
      and a stored run under ``run_id`` that has one meters ``llm`` from what it had spent.
    - ``previous``: the plan version approved before this one (a replan's): the approval
      screen shows what changed.
    - ``observers``: progress displays, traces, OpenTelemetry; ``tool_runner``: where Python
      tools run (default: the event loop and a thread pool).

    ``plan`` may be a :class:`~planrail.plan.compiled.CompiledPlan` that validation produced
    (``check_plan(...).compiled``): when it was checked against the same registry with the
    options this run needs, it is not validated again — so change nothing in it after its
    validation (its steps are frozen, their ``args`` dicts are not); an approval is still
    checked against the hash of its content as it is when the run starts.

    Raises :class:`~planrail.PlanValidationError` (with every issue) if the plan is invalid.
    """
    registry = ToolRegistry.of(tools)
    # A run stored under ``run_id`` is read once here: its policies decide how the plan is
    # validated (the one it will run under), and its LLM budget what the run spends from.
    stored = store.get_run(run_id) if store is not None and run_id is not None else None
    under = security if stored is None else resumes_under(stored, security, policy_override)
    options = validation_options(under)
    source = Path(plan) if isinstance(plan, str) and _looks_like_path(plan) else plan
    actions: dict[str, ActionHandler] = {}
    # Everything built here lives as long as the run, which keeps it out of full collections
    # (planrail._memory.long_lived): collecting in between would only scan it once for nothing.
    with collector_paused():
        if (
            isinstance(source, CompiledPlan)
            and source.registry is registry
            and source.checked_with == (options, limits or PlanLimits())
        ):
            checked = source
        else:
            plain = source.plan if isinstance(source, CompiledPlan) else source
            # the run shows no warnings: the checks that could only warn are not run
            report = check_plan(plain, registry, options=options, limits=limits, warnings=False)
            checked = report.compiled_or_raise()
        if llm is not None:
            llm, models, metered = _metered(llm, models, store, stored, checked.plan)
            actions["llm_call"] = LLMStepHandler(llm, models=models)
            budget = budget or metered
        elif budget is None and stored is not None:
            budget = kept_budget(stored)  # a resume with no model keeps the run's
        actions.update(handlers or {})
        return Execution(
            checked,
            registry,
            run_id=run_id,
            store=store,
            security=security,
            policy=policy,
            approver=approver,
            approve=approve,
            approval=approval,
            approve_call=approve_call,
            observers=observers,
            handlers=actions,
            tool_runner=tool_runner,
            max_concurrency=max_concurrency,
            failure_mode=failure_mode,
            clock=clock,
            lease_wait=lease_wait,
            policy_override=policy_override,
            restored=restored,
            replaces=replaces,
            reason=reason,
            approval_policy=approval_policy,
            call_guard=call_guard,
            previous=previous,
            tool_calls=tool_calls,
            budget=budget,
        )


def _metered(
    llm: LLM,
    models: Callable[[str], LLM] | None,
    store: Store | None,
    stored: RunRecord | None,
    plan: Plan,
) -> tuple[LLM, Callable[[str], LLM] | None, BudgetRecord | None]:
    """The clients ``llm_call`` steps ask, and what the run stores of its LLM budget: the
    caller's meter (an Agent's: planning spent from it too), else the budget the ``stored``
    run was started with, spent from where it stands (:mod:`planrail.runs.budget`)."""
    if isinstance(llm, MeteredLLM):
        return llm, models, record_of(llm.meter) if llm.meter.limited else None
    if store is None or stored is None:
        return llm, models, None
    found = stored_meter(store, stored, plan, llm.model)
    if found is None:
        return llm, models, None
    meter, record = found
    metered_models = None
    if models is not None:
        factory = models

        def metered_models(name: str) -> LLM:  # a step's own model spends from the same budget
            return MeteredLLM(factory(name), meter)

    return MeteredLLM(llm, meter), metered_models, record


def validation_options(security: SecurityPolicy | None) -> ValidationOptions:
    """How a run's plan is validated under its security policy: a strict policy makes a
    placeholder literal (``"<user_id>"``, ``"{{a.id}}"``) in the arguments of a step that
    changes the world an error, so nothing runs with it."""
    check_security(security)
    if security is not None and security.strict:
        return ValidationOptions(placeholders_in_side_effects="error")
    return ValidationOptions()


def resume(run_id: str, tools: ToolsInput, *, store: Store, **options: Any) -> Execution:
    """The execution that continues run ``run_id`` from its checkpoint in ``store``.

    The run's stored plan is validated again; its stored approval must be for that plan's hash,
    and its stored policies apply unless others are given with ``policy_override=True``.
    Options are :func:`prepare`'s.
    """
    check_store(store)
    record = store.get_run(run_id)
    if record is None:
        raise StoreError(f"no run '{run_id}' in this store", run_id=run_id)
    check_current(record)  # said here, before the plan is read: every door resumes so
    if _holds_redacted(record.plan):
        raise PlanError(
            f"run '{run_id}' has secret values written in its plan, and secrets are never"
            " stored: continue it with the original plan file, `planrail run PLAN --run-id"
            f" {run_id}` (or prepare(plan, run_id=..., store=...))",
            run_id=run_id,
        )
    registry = ToolRegistry.of(tools)
    security = resumes_under(record, options.get("security"), options.get("policy_override"))
    report = check_plan(
        record.plan,
        registry,
        options=validation_options(security),
        limits=options.get("limits"),
        warnings=False,
    )
    if report.compiled is None:
        under = " under the strict security policy it resumes under" if _strict(security) else ""
        raise PlanValidationError(
            report.errors, f"the stored plan of run '{run_id}' is no longer valid{under}"
        )
    options.setdefault("reason", "resume")
    return prepare(report.compiled, registry, run_id=run_id, store=store, **options)


def _strict(security: SecurityPolicy | None) -> bool:
    return security is not None and security.strict


async def arun(plan: PlanInput, tools: ToolsInput = None, **options: Any) -> RunResult:
    """Validate and execute ``plan``; returns the :class:`RunResult` (status, steps, output).

    Options are those of :func:`prepare`. A failed step does not raise: look at ``status``.
    """
    return await prepare(plan, tools, **options).run()


def run(plan: PlanInput, tools: ToolsInput = None, **options: Any) -> RunResult:
    """The synchronous form of :func:`arun` (runs its own event loop, so not inside one: a
    ``RuntimeError`` saying to ``await planrail.arun(...)`` there)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # no loop running: the usual case
        return asyncio.run(arun(plan, tools, **options))
    raise RuntimeError(
        "planrail.run() runs its own event loop, and one is running here: use"
        " `await planrail.arun(...)` instead"
    )


def _looks_like_path(s: str) -> bool:
    return (
        "\n" not in s
        and not s.lstrip().startswith(("{", "["))
        and Path(s).suffix in (".json", ".yaml", ".yml")
    )


def _holds_redacted(plan: Any) -> bool:
    """Whether a stored plan had a secret literal replaced (an argument exactly ``***``)."""
    steps = plan.get("steps") if isinstance(plan, dict) else None
    for step in steps if isinstance(steps, list) else ():
        args = step.get("args") if isinstance(step, dict) else None
        if isinstance(args, dict) and REDACTED in args.values():
            return True
    return False
