"""The asyncio executor: drives the scheduler, starts each ready step the moment it is ready.

There is no polling and there are no levels: when a step finishes, the task that ran it tells
the scheduler, and any dependent that became ready is started right there. :meth:`Execution.iter`
yields the events as they happen; :meth:`Execution.run` is a thin loop over it.

With a store, outcomes are committed before their dependents call anything: completions that
arrive in the same turn of the event loop are applied (their dependents start), then committed
together in one transaction with the intents those dependents queue, while every call waits for
it (:meth:`Execution._flush`): one commit per layer, without weakening the guarantee.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any

from planrail._memory import long_lived
from planrail.clock import SYSTEM_CLOCK
from planrail.engine import gate
from planrail.engine.approval import ApprovalRequest, ApprovalRequiredError, Approver
from planrail.engine.background import keep_lease, watch_requests
from planrail.engine.call_guard import CallGuard
from planrail.engine.checkpoint import Checkpointer
from planrail.engine.events import Event, EventType
from planrail.engine.guard import SecurityGuard, ToolCallCount
from planrail.engine.lease import LeaseLostError, RunBusyError
from planrail.engine.outcome import recordable
from planrail.engine.result import RunResult, StepResult, keep_history, keep_usage
from planrail.engine.run_ids import FailureMode, check_new_run_id, check_options, new_run_id
from planrail.engine.runners import LocalRunner
from planrail.engine.scheduler import Node, Scheduler, Skip
from planrail.engine.stages import Boundary, StageGate, confirm_stage
from planrail.engine.step_runner import (
    ActionHandler,
    Outcome,
    StepRunner,
    ToolAction,
)
from planrail.engine.under_way import CallsUnderWay
from planrail.errors import (
    CallCrashedError,
    PlanrailError,
    ReferenceResolutionError,
    StoreError,
    error_dict,
    error_message,
)
from planrail.plan.compiled import CompiledPlan
from planrail.plan.copied import provenance_for
from planrail.plan.model import Plan, Step
from planrail.plan.provenance import Provenance
from planrail.plan.resolve import resolve_value
from planrail.plan.secrets import Redactor
from planrail.plan.stages import stage_goals
from planrail.plan.tools import AnyTool, StepContext, Tool, ToolRegistry, ToolRunner, step_key
from planrail.policies.limits import RunPolicy
from planrail.policies.security import (
    ApproveCall,
    SecurityPolicy,
    check_approval,
    denial_of,
)
from planrail.store.base import Store, check_store
from planrail.types import Clock, Observer, StepStatus

__all__ = ["BudgetRecord", "Execution"]

log = logging.getLogger("planrail")

E = EventType
S = StepStatus

BudgetRecord = Callable[[Mapping[str, StepResult]], dict[str, Any]]
"""``budget(steps)``: the run's LLM budget as it stores it, given the steps it holds as it
opens (their recorded usage is theirs, not the record's)."""


class Execution:
    """One run of a validated plan.

    ``outputs`` holds the plain-JSON output of every succeeded step; arguments are resolved
    from it only, so a step can never see a value that was not really produced.
    """

    def __init__(
        self,
        plan: Plan | CompiledPlan,
        tools: ToolRegistry | Iterable[AnyTool],
        *,
        run_id: str | None = None,
        max_concurrency: int | None = None,
        failure_mode: FailureMode | None = None,
        clock: Clock = SYSTEM_CLOCK,
        observers: Iterable[Observer] = (),
        handlers: Mapping[str, ActionHandler] | None = None,
        store: Store | None = None,
        lease_ttl: float = 30.0,
        lease_wait: float = 0.0,
        open_plan: bool = False,
        approval: dict[str, Any] | None = None,
        policy: RunPolicy | None = None,
        security: SecurityPolicy | None = None,
        approve_call: ApproveCall | None = None,
        restored: Mapping[str, StepResult] | None = None,
        replaces: str | None = None,
        tool_runner: ToolRunner | None = None,
        approver: Approver | None = None,
        approve: bool = False,
        policy_override: bool = False,
        reason: str = "plan",
        approval_policy: Callable[[Plan, ToolRegistry], Iterable[str]] | None = None,
        call_guard: CallGuard | None = None,
        previous: Plan | None = None,
        tool_calls: ToolCallCount | None = None,
        budget: BudgetRecord | None = None,
    ) -> None:
        observers = list(observers)
        check_options(max_concurrency, failure_mode, clock, observers, policy, security)
        check_store(store)
        if run_id is not None:
            check_new_run_id(run_id, store)
        self.registry = ToolRegistry.of(tools)
        self.compiled = CompiledPlan.of(plan, self.registry).for_registry(self.registry)
        """The plan with what its validation learned (:mod:`planrail.plan.compiled`): the one
        object the run, its redactor, provenance and approval screens read."""
        plan = self.plan = self.compiled.plan
        self.run_id = run_id if run_id is not None else new_run_id()
        self.max_concurrency = max_concurrency
        self.failure_mode: FailureMode = failure_mode or "continue"
        self._failure_mode_given = failure_mode is not None
        """A resume not given one keeps the run's stored mode (:func:`.gate.adopt`)."""
        self.clock = clock
        self.observers = observers  # a list already (checked above)
        self.store = store
        self.lease_ttl = lease_ttl
        self.lease_wait = lease_wait
        """Seconds to wait for a run whose lease another runner holds (0: refuse at once)."""
        self.approval = approval
        """Who approved the plan, when, and the hash it is bound to (recorded with the run)."""
        self.approver = approver
        """Asked when the plan needs approval and holds none (:mod:`planrail.engine.approval`)."""
        if type(approve) is not bool:  # approve="false" approved
            raise TypeError(f"approve must be True or False, not {approve!r}")
        self.approve = approve
        """``True``: the caller approves the plan itself (the Python form of ``--yes``)."""
        self.policy_override = policy_override
        """Resume under the policies given here even where they differ from the stored ones."""
        self.reason = reason
        self.approval_policy = approval_policy
        """Which steps need approval (default: those :mod:`planrail.plan.effects` names)."""
        """Why this plan runs (``plan``, ``replan N``, ``resume``), shown to the approver."""
        self.results: dict[str, StepResult] = {s.id: StepResult(s.id) for s in plan.steps}
        self.outputs: dict[str, Any] = {}
        self.args: dict[str, Any] = {}
        """The resolved arguments each step ran with."""
        self.status = "pending"
        self.error: str | None = None
        self.run_output: Any = None
        self._extra_handlers = dict(handlers or {})
        self._restored: dict[str, StepResult] = dict(restored or {})
        """Steps that already succeeded (a replan or a repaired stream): reused, not run."""
        self._carried: set[str] = set(self._restored)
        """The restored steps carried in from another run (given as ``restored``, not found in
        this run's record): :meth:`_record_carried` commits them to it."""
        self._replaces = replaces
        """The run version this one replaces (a replan's), whose records of the carried steps
        are theirs in this run too; its record names it (:data:`.gate.REPLACES`), and a resume
        keeps it (:func:`.gate.adopt`)."""
        self._seen: list[str] = list(self._restored)
        """The steps whose outputs the plan's author saw (a replan's reused steps): literals
        copied from them are not the user's (:mod:`planrail.plan.copied`)."""
        self.previous = previous
        """The plan version approved before this one (a replan's): the approver sees the
        difference."""
        self._in_doubt: dict[str, StepResult] = {}
        self._ckpt: Checkpointer | None = None
        self._dirty: set[str] = set()
        """Steps whose record changed since the last commit."""
        self._last_dirty: set[str] = set()
        self._pending_outcomes: dict[str, Outcome] = {}
        """Outcomes waiting for their commit before the scheduler hears of them."""
        self._flush_pending = False
        self._events: deque[Event] = deque()
        self._unstored: list[Event] = []
        """Events of a run with a store emitted before its checkpoint opened (a streamed plan's
        early steps): the checkpoint stores them as it opens."""
        self._ended = False
        """The run's end is recorded (:meth:`_save_final`): a cancellation after it changes
        nothing (a streamed plan stopped at its approval)."""
        self._wakeup: asyncio.Event | None = None
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self.owns_runner = tool_runner is None
        """Whether the execution made its tool runner (and closes it); a given one is the
        caller's to close."""
        self.tool_runner: ToolRunner = tool_runner or LocalRunner(max_concurrency or 64)
        """Where the functions of Python tools run (the tool-runner seam)."""
        self._runner: StepRunner | None = None
        self._aborted = False
        self._abort_reason = "the run was cancelled"
        self._cancelled_by: str | None = None
        self._background: list[asyncio.Task[None]] = []
        self.watch_interval = 0.5
        """Seconds between looks at the store for an operator's cancel request."""
        # Only an open plan's steps grow (extend): a sealed plan's are its own, not a copy.
        self._steps: dict[str, Step] = dict(plan.by_id) if open_plan else plan.by_id
        self.effects = self.compiled.effects
        """Each step's effect (:mod:`planrail.plan.effects`): the one answer to "does it change
        the world", "may it run again", "does it need approval"."""
        self._policy_given = policy
        self.policy = policy or RunPolicy()
        """Resource limits, run deadline, default retry, loop and fan-out caps."""
        self._security_given = security
        self.security = security
        """The security policy every tool call is vetted by (None: none)."""
        self._approve_call = approve_call
        self._under_way = CallsUnderWay()
        """The calls that may be under way: what a step cancelled by the run becomes."""
        self._overrides: list[dict[str, Any]] = []
        self._priority: dict[str, float] = self.compiled.priority()
        """Each step's remaining critical path (its priority when it waits for a resource): the
        compiled plan's, grown here for steps added to an open plan."""
        self._sealed = not open_plan
        self.redactor = Redactor.for_compiled(self.compiled, always=open_plan)
        """Keeps secrets out of what this run records (None: the plan has none)."""
        self._guard: SecurityGuard | None = None
        self._held: list[str] = []
        """Ready steps of an open plan that change the world: they wait for :meth:`seal`."""
        self.scheduler = Scheduler(self._nodes(plan.steps, self._priority))
        if self._sealed:
            self.scheduler.close()
        self.calls = call_guard if call_guard is not None else CallGuard.for_policy(self.policy)
        """The repeated-call guard (None: off); an agent shares one across its replans. Built
        again from the stored policy when a resume adopts it (:func:`gate.adopt`), unless one
        was given."""
        self._call_guard_given = call_guard is not None
        self.tool_calls = tool_calls if tool_calls is not None else ToolCallCount()
        """The tool calls the security guard admitted (``SecurityPolicy.max_tool_calls``): an
        agent shares one across its replans; a resume adds those of the run's earlier runners
        (:attr:`Checkpointer.admitted`)."""
        self._started = False
        """:meth:`iter` has decided whether to open the checkpoint (an open plan's is opened
        when it is sealed, if the run has started by then; else by :meth:`iter`)."""
        self.budget = budget
        """What the run stores of its LLM budget when it opens (``planrail.runs`` makes it:
        ``engine/`` knows no budgets): its limits and what was spent before the steps it holds
        then; a resume applies it again."""
        self._stages = StageGate.for_plan(plan, self.scheduler.state) if plan.stages else None
        self._stage_goals = stage_goals(plan)

    def _nodes(self, steps: Iterable[Step], priority: Mapping[str, float]) -> list[Node]:
        return [Node(s.id, s.depends_on, s.join, priority[s.id]) for s in steps]

    # ------------------------------------------------------------------ open plans

    def extend(self, steps: Iterable[Step]) -> None:
        """Add steps to an open plan (streamed or replanned) while it runs.

        Their dependencies must be known already. Steps that change the world are held until
        :meth:`seal`; read-only steps start as soon as their dependencies are done.
        """
        if self._sealed:
            raise RuntimeError("the plan is sealed: no more steps can be added")
        new = list(steps)
        for step in new:
            if step.id in self._steps:
                raise ValueError(f"step {step.id!r} is already in the plan")
        # refused before anything is added: a step left half in the plan stayed pending
        self.scheduler.check_batch(self._nodes(new, dict.fromkeys((s.id for s in new), 0.0)))
        for compiled in self.compiled.extend(new):
            step = compiled.step
            self._steps[step.id] = step
            self.results[step.id] = StepResult(step.id)
            self.effects[step.id] = compiled.effect
        if self.redactor is not None:
            self.redactor.add_steps(new)
        priority = self.compiled.priority(s.id for s in new)
        self._priority.update(priority)
        self._skipped(self.scheduler.add(self._nodes(new, priority)))
        if self.status == "running":
            self._dispatch()

    async def approve_and_seal(self, plan: Plan) -> bool:
        """The streamed plan is whole and valid: pass it through the gate, then :meth:`seal` it.

        False when the approver said no (or deferred): the caller cancels the run. With a
        store, the run is recorded from here on (what ran before sealing was read-only).
        """
        return await gate.approve_and_seal(self, plan)

    def seal(self, plan: Plan) -> None:
        """The whole plan has arrived, been validated and approved: release held steps.

        ``plan`` must hold every step added so far, unchanged.
        """
        check_approval(self.approval, plan.hash)
        for step in plan.steps:
            if step.id not in self._steps:
                self.extend([step])
            elif self._steps[step.id] != step:
                raise ValueError(f"step {step.id!r} changed between streaming and sealing")
        if len(plan.steps) != len(self._steps):
            raise ValueError("the sealed plan lacks steps that were streamed")
        self.plan = plan
        self.compiled.rebind(plan)
        self._sealed = True
        if plan.stages:  # steps that started before the seal did not wait for a stage check
            self._stage_goals.update(stage_goals(plan))
            self._stages = self._stages or StageGate.for_plan(plan, self.scheduler.state)
        self.scheduler.close()
        if self._wakeup is not None:
            self._wakeup.set()
        if self.status == "running":  # the held steps first, as any ready step starts
            self._dispatch()

    def _python_tools(self) -> list[Tool]:
        """The Python tools this plan calls (primary and fallback), for the runner to prepare;
        every Python tool for an open plan, whose later steps are not known yet."""
        if not self._sealed:
            return self.registry.python_tools()
        names = {s.tool for s in self._steps.values() if s.tool}
        names |= {s.fallback.tool for s in self._steps.values() if s.fallback and s.fallback.tool}
        return [t for t in self.registry.python_tools() if t.name in names]

    # ------------------------------------------------------------------ public

    @property
    def resumed(self) -> bool:
        """Whether this execution continued a run found in the store."""
        return self._ckpt is not None and self._ckpt.resumed

    async def run(self) -> RunResult:
        """Run to the end and return the result."""
        async for _ in self.iter():
            pass
        return self.result()

    async def iter(self) -> AsyncIterator[Event]:
        """Run, yielding each event as it happens. Steps keep running while the caller handles
        an event; cancelling the caller cancels the run cleanly (running steps are cancelled and
        recorded, the run is marked ``cancelled``)."""
        if self.status != "pending":
            raise RuntimeError("an Execution runs once")
        stored = self.store.get_run(self.run_id) if self.store is not None else None
        # The plan as it is now, serialised once (tens of µs per step) for the stored run's
        # plan and the approval, both checked before anything is written or run.
        current = None
        if stored is not None:
            current = self.plan.fresh_hash()
            gate.adopt(self, stored, current)
        needed = gate.approval_needed(self)
        if needed and not self.approve and self.approver is None:
            raise ApprovalRequiredError(
                f"{_steps_that(needed)}, and this run has no"
                " approver: pass approver= (a callback, planrail.approve_all, or"
                " planrail.engine.approval.defer with a store) or approve=True",
                run_id=self.run_id,
            )
        if self._sealed and self.approval is not None:  # before anything is written or run
            check_approval(self.approval, self.plan.fresh_hash() if current is None else current)
            self.approval = gate.bind_schemas(self.approval, self.plan, self.registry)
        # The runner first: a tool it refuses stops the run before anything is recorded.
        await self.tool_runner.prepare(self._python_tools())
        try:
            if self._ended:  # stopped while its runner prepared (gate.approve_and_seal)
                return
            # An open plan is recorded once it is whole and approved (gate.approve_and_seal),
            # with the read-only steps it ran by then: a record of the plan as it began (no
            # step) would "resume" as an empty plan that succeeds at once, and a repaired plan
            # would not match.
            self._started = True
            if self.store is not None and self._sealed and self._ckpt is None:
                await self._open_checkpoint(checked=True)  # the plan: by gate.adopt above
            for override in self._overrides:
                self._emit(E.POLICY_OVERRIDDEN, data=override)
            try:
                approved = await gate.gate(self, needed)
            except BaseException as exc:  # cancelled (or an approver failed) while asking
                await self._stopped_by(exc)
                raise
            if not approved:
                while self._events:
                    yield self._events.popleft()
                return
            wakeup = self._start_running()
            # The plan and what the run keeps outlive it: out of the collector's full passes.
            with long_lived():
                try:
                    self._dispatch()
                    while True:
                        while self._events:
                            yield self._events.popleft()
                        if self.scheduler.finished and not self._tasks and not self._flush_pending:
                            break
                        wakeup.clear()
                        await wakeup.wait()
                    self._finish()
                except BaseException as exc:
                    await self._stopped_by(exc)
                    raise
                finally:
                    for background in self._background:
                        background.cancel()
                    if self._stages is not None:
                        self._stages.cancel()
                    if getattr(self.tool_runner, "on_returned", None) == self._dispatch:
                        self.tool_runner.on_returned = None  # type: ignore[attr-defined]
        finally:
            if self.owns_runner:
                await self.tool_runner.aclose()
            if self._ckpt is not None:
                self._ckpt.release()
        while self._events:
            yield self._events.popleft()

    def _start_running(self) -> asyncio.Event:
        """The run is approved: build its step runner and say it started; the event that
        wakes its loop."""
        self._build_guard()
        self._wakeup = wakeup = asyncio.Event()
        if self.max_concurrency is not None and hasattr(self.tool_runner, "on_returned"):
            self.tool_runner.on_returned = self._dispatch  # an abandoned call gave its place back
        self._runner = StepRunner(
            {"tool_call": ToolAction(self.registry, self.tool_runner), **self._extra_handlers},
            goal=self.plan.goal,
            before_attempt=self._before_attempt,
            clock=self.clock,
            policy=self.policy,
            tools=self.registry,
            priorities=self._priority,
            on_attempt=self._on_attempt,
            guard=None if self.calls is None else self.calls.check,
            stage_goals=self._stage_goals,
            parse=self.compiled.template,
        )
        self._track_progress()
        self.status = "running"
        if self._ckpt is not None:
            self._start_background()
        started: dict[str, Any] = {"steps": len(self.results), "resumed": self.resumed}
        if self._ckpt is not None:  # hashing a big plan costs; only durable runs record it
            started["plan_hash"] = self.plan.hash
        if not self.resumed:
            self._emit(E.RUN_CREATED, data=dict(started))
        if self.approval is not None:
            self._emit(E.RUN_APPROVED, data={**self.approval, "resumed": self.resumed})
        self._emit(E.RUN_STARTED, data=started)
        return wakeup

    def _track_progress(self) -> None:
        """Once the run has both a checkpoint and a step runner (an open plan's checkpoint
        opens at its seal, after the runner was built): the runner skips the fan-out items and
        loop iterations a resume found done, and commits each one that finishes."""
        ckpt, runner = self._ckpt, self._runner
        if ckpt is None or runner is None:
            return
        runner.items_done, runner.on_item = ckpt.items_done, self._item_done
        runner.iterations_done, runner.on_iteration = ckpt.iterations_done, self._iteration_done

    async def _stopped_by(self, exc: BaseException) -> None:
        """The run stops on ``exc`` (a cancellation, an error): what runs is cancelled, and the
        run ends ``cancelled``, recorded — unless its end is recorded already (a streamed plan
        stopped at its approval, :func:`gate.approve_and_seal`)."""
        if self._ended:
            return
        await self._cancel_all(_reason(exc))
        self.status = "cancelled"
        if isinstance(exc, PlanrailError):
            self.error = exc.message
        self._emit(E.RUN_FINISHED, data={"status": self.status, "error": self.error})
        self._save_final()

    def approval_request(
        self, needed: list[str] | None = None, plan_hash: str | None = None
    ) -> ApprovalRequest:
        """What the approver is shown for this plan (``needed``: the steps that need approval,
        default those the gate would ask about); ``request.view()`` is the approval screen."""
        return ApprovalRequest.build(
            self.plan,
            self.registry,
            self.effects,
            gate.needed_for(self, self.plan, self.effects) if needed is None else needed,
            reason=self.reason,
            reused=self._restored,
            plan_hash=self.plan.fresh_hash() if plan_hash is None else plan_hash,
            run_id=self.run_id,
            provenance=self.provenance(),
            outputs={sid: r.output for sid, r in self._restored.items()},
            previous=self.previous,
            redactor=self.redactor,
            compiled=self.compiled,
        )

    def _build_guard(self) -> None:
        if self.security is None:
            return
        self._guard = SecurityGuard(
            self.security,
            self.provenance(),
            run_id=self.run_id,
            approve_call=self._approve_call,
            on_decision=self._decided,
            redactor=self.redactor,
            calls=self.tool_calls,
        )

    def provenance(self) -> Provenance:
        """Where this run's values come from: the security policy's trusted sources, the goal,
        and the outputs the plan's author saw (:func:`planrail.plan.copied.provenance_for`)."""
        seen = {s: self._restored[s].output for s in self._seen if s in self._restored}
        return provenance_for(
            self._steps,
            self.registry,
            goal=self.plan.goal,
            trusted=self.security.trusted if self.security is not None else (),
            seen=seen,
            compiled=self.compiled,
        )

    async def _open_checkpoint(self, *, checked: bool = False) -> None:
        """Create or take over the run in the store; while another runner holds its lease,
        wait up to ``lease_wait`` seconds (on the injected clock) for it to be released or to
        expire, then give up with :class:`RunBusyError`. ``checked``: the stored run's plan was
        just checked (:meth:`Checkpointer.open`)."""
        assert self.store is not None
        give_up = self.clock.monotonic() + self.lease_wait
        pause = 0.05
        while True:
            ckpt = Checkpointer(
                self.store,
                self.plan,
                self.registry,
                self.run_id,
                self.clock,
                lease_ttl=self.lease_ttl,
                approval=self.approval,
                redactor=self.redactor,
                policies=gate.policies(self),
                schemas=gate.schema_pins(self.plan, self.registry),
                effects=self.effects,
                metadata=None if self._replaces is None else {gate.REPLACES: self._replaces},
            )
            try:
                stored, self._in_doubt = ckpt.open(checked=checked)
            except RunBusyError:
                left = give_up - self.clock.monotonic()
                if left <= 0:
                    raise
                await self.clock.sleep(min(pause, left))
                pause = min(pause * 2, 1.0)
                continue
            self._ckpt = ckpt  # only one that opened: a run that could not has no record
            self._restored.update(stored)
            self._carried.difference_update(stored)
            self.tool_calls.admitted += self._ckpt.admitted
            for event in self._unstored:
                self._ckpt.event(event)
            self._unstored.clear()
            self._record_carried()
            return

    def _record_carried(self) -> None:
        """Commit the steps carried in from another run (a replan's reused steps) to this
        run's record, as it opens: before anything of it is approved, recorded or called. A
        resume of this run — after a crash, a failure, or the approval it waited for — then
        finds them succeeded and never calls them again (under this run's keys). Each is
        recorded as the version it comes from recorded it — the key its call was made with,
        its arguments and attempts — when that version is known and stored."""
        assert self._ckpt is not None
        carried = [sid for sid in self._restored if sid in self._carried and sid in self._steps]
        if not carried:
            return
        for sid in carried:
            self.results[sid] = self._restored[sid]
        try:
            self._ckpt.carry([self.results[sid] for sid in carried], self._replaces, self.args)
        except BaseException:
            self._ckpt.release()
            raise

    def result(self) -> RunResult:
        return RunResult(
            run_id=self.run_id,
            status=self.status,
            steps=self.results,
            output=self.run_output,
            error=self.error,
            rejected_stages=dict(self._stages.rejected) if self._stages is not None else {},
            plan_hash=self.plan.hash if self._ckpt is not None or self.approval else None,
        )

    # ------------------------------------------------------------------ events

    def _emit(
        self,
        type_: EventType,
        step_id: str | None = None,
        attempt: int | None = None,
        data: dict[str, Any] | None = None,
        at: float | None = None,
        wake: bool = True,
    ) -> None:
        """Queue an event for ``iter()`` (and the store and observers). ``wake=False`` leaves
        waking the run's loop to the caller, who does more first (see :meth:`_apply`)."""
        if self.redactor is not None and data:
            data = self.redactor.scrub(data)
        event = Event(
            type_, self.run_id, self.clock.now() if at is None else at, step_id, attempt, data or {}
        )
        self._events.append(event)
        if self._ckpt is not None:
            self._ckpt.event(event)
        elif self.store is not None:
            self._unstored.append(event)
        for obs in self.observers:
            try:
                obs.on_event(event)
            except Exception:
                log.exception("observer %r failed on %s; the run goes on", obs, type_)
        if wake and self._wakeup is not None:
            self._wakeup.set()

    # ------------------------------------------------------------------ starting steps

    def _dispatch(self) -> None:
        """Start ready steps, highest priority first, within ``max_concurrency``."""
        sched = self.scheduler
        while not self._aborted:
            released = self._sealed and self._held  # ready before the seal, started now
            if not released and not sched.has_ready():
                break
            room = self._room()
            if room is not None and room <= 0:
                break
            for sid in self._release(room) if released else sched.take_ready(room):
                if not self._sealed and not self.effects[sid].may_start_early:
                    self._held.append(sid)
                    self._emit(
                        E.STEP_READY, sid, data={"held": "waits for the whole plan's approval"}
                    )
                elif sid in self._restored:
                    self._restore(sid)
                elif sid in self._in_doubt:
                    self._hold_in_doubt(sid)
                elif self._stages is not None and self._stages.holds(sid):
                    pass  # started or skipped once its stage's check is decided
                else:
                    self._launch(sid)
        if self._stages is not None and not self._aborted:
            self._poll_stages()

    def _release(self, room: int | None) -> list[str]:
        """Of the steps held until the seal, those that may start now (``room``: how many)."""
        held = self._held
        taken, self._held = (held, []) if room is None else (held[:room], held[room:])
        return taken

    def _room(self) -> int | None:
        """How many more steps may start under ``max_concurrency`` (None: no limit). A sync call
        abandoned on its timeout or cancellation keeps its place until its thread returns."""
        if self.max_concurrency is None:
            return None
        abandoned = getattr(self.tool_runner, "abandoned", 0)
        return self.max_concurrency - len(self._tasks) - abandoned

    def _poll_stages(self) -> None:
        """Start due stage checks; start or skip the steps held for decided ones."""
        assert self._stages is not None
        due, release, skip = self._stages.poll(self._room())
        for boundary in due:
            self._stages.start(self._confirm(boundary))
        for sid in release:
            self._launch(sid)
        for sid, reason in skip:
            self._skipped(self.scheduler.skip(sid, reason))
        if skip:
            self._dispatch()  # dependents with other join rules may have become ready

    async def _confirm(self, boundary: Boundary) -> None:
        """One stage check (see :mod:`planrail.engine.stages`), then act on its verdict."""
        assert self._stages is not None
        stage = boundary.stage
        handler = self._extra_handlers.get("llm_call")
        verdict = await confirm_stage(handler, self.plan, stage, self.results, run_id=self.run_id)
        self._stages.decide(boundary, verdict)
        data: dict[str, Any] = {"stage": stage.id, "ok": verdict.ok, "reason": verdict.reason}
        if verdict.usage:
            data["usage"] = verdict.usage
        self._emit(E.STAGE_CHECKED, data=data)
        if not verdict.ok and self.error is None:
            self.error = f"stage '{stage.id}' was not confirmed: {verdict.reason}"
        self._dispatch()

    def _restore(self, sid: str) -> None:
        stored = self._restored[sid]
        self.results[sid] = stored
        self.outputs[sid] = stored.output
        self._emit(E.STEP_RESTORED, sid, stored.attempts)
        self._skipped(self.scheduler.restored(sid))

    def _hold_in_doubt(self, sid: str) -> None:
        self.results[sid] = self._in_doubt[sid]
        self.scheduler.start(sid)
        self.scheduler.in_doubt(sid)
        self._emit(E.STEP_IN_DOUBT, sid, data={"reason": self.results[sid].reason})

    def _launch(self, sid: str) -> None:
        step = self._steps[sid]
        self.scheduler.start(sid)
        res = self.results[sid]
        res.status = S.RUNNING
        res.started_at = now = self.clock.now()
        # The task first, then the event that wakes the run's own loop: the step runs first.
        self._tasks[sid] = asyncio.get_running_loop().create_task(self._run_step(step))
        self._emit(E.STEP_STARTED, sid, 1, at=now)

    def _cancel(self, sid: str, task: asyncio.Task[None]) -> None:
        task.cancel()
        task.add_done_callback(functools.partial(self._task_done, sid))

    def _task_done(self, sid: str, task: asyncio.Task[None]) -> None:
        # A task cancelled before its first step never enters _run_step, whose handler would
        # have removed it from _tasks and recorded the step: without this the run never ends.
        if task.cancelled() and self._tasks.get(sid) is task:
            del self._tasks[sid]
            self._complete(sid, self._cancelled(sid))

    def _cancelled(self, sid: str) -> Outcome:
        """A step cancelled by the run (:meth:`.CallsUnderWay.cancelled`)."""
        return self._under_way.cancelled(sid, self.effects[sid].may_rerun, self._abort_reason)

    def _context(self, step: Step) -> Callable[[int], StepContext]:
        run_id = self.run_id

        def make(attempt: int) -> StepContext:
            return StepContext(run_id, step.id, attempt, self._key(step))

        return make

    def _key(self, step: Step) -> str:
        """The step's own idempotency key, ``RUN_ID:STEP`` (its items' and fallback calls'
        build on it in the step runner: :func:`.step_runner.fallback_key`)."""
        return step_key(self.run_id, step.id)

    def _before_attempt(
        self, step: Step, item: int | None, attempt: int, args: Any, key: str | None
    ) -> Awaitable[None] | None:
        """Called right before each call of a step's action, keyed ``key`` (None: the step's
        own): the security policy vets a tool call (when the run has one), then the intent is
        recorded if it matters."""
        if self.redactor is not None:
            self.redactor.learn_args(step.id, args)
        self._under_way.began(step.id, item)
        if self._guard is not None and step.action == "tool_call":
            return self._admit(step, item, attempt, args, key)
        return self._stored_first(step, attempt, args, key)

    async def _admit(
        self, step: Step, item: int | None, attempt: int, args: Any, key: str | None
    ) -> None:
        """The security policy vets the call (may raise), then the intent is recorded."""
        assert self._guard is not None
        await self._guard.admit(step, item, attempt, args, self.outputs)
        stored = self._stored_first(step, attempt, args, key)
        if stored is not None:
            await stored

    def _stored_first(
        self, step: Step, attempt: int, args: Any, key: str | None
    ) -> Awaitable[None] | None:
        """What must be committed before this call: its intent, keyed ``key``, if it changes
        the world (with the others of this loop turn, and the outcomes that started it if they
        are unsaved), else the outcomes being committed (:attr:`Checkpointer.unsaved`), else
        nothing."""
        ckpt = self._ckpt
        if ckpt is None:
            return None
        if ckpt.needs_intent(step):
            return ckpt.intent(self.results[step.id], step, key or self._key(step), attempt, args)
        return None if ckpt.unsaved is None else asyncio.shield(ckpt.unsaved)

    def _item_done(self, step: Step, index: int, item: Any, output: Any) -> None:
        """An item of a fan-out succeeded: commit it now (a resume will not run it again); once
        it is committed, its calls are no longer under way."""
        ckpt = self._ckpt
        if ckpt is not None and self._progress(
            f"item {index}", step, ckpt.item_done, index, item, output
        ):
            self._under_way.unit_recorded(step.id, index)

    def _iteration_done(
        self, step: Step, index: int | None, args: Any, entry: dict[str, Any]
    ) -> None:
        """An iteration of a ``repeat`` step finished: commit it now (a resume goes on after
        it); once it is committed, its calls are no longer under way."""
        ckpt, what = self._ckpt, f"iteration {entry.get('iteration')}"
        if ckpt is not None and self._progress(what, step, ckpt.iteration_done, index, args, entry):
            self._under_way.unit_recorded(step.id, index)

    def _progress(self, what: str, step: Step, commit: Callable[..., None], *args: Any) -> bool:
        """Commit part of a step's progress; whether it was committed."""
        if self._aborted:
            return False
        try:
            commit(self.results[step.id], *args)
        except Exception:  # the step's own record will say what happened; that part reruns
            log.exception("could not record %s of step %s", what, step.id)
            return False
        return True

    def _decided(self, step_id: str, attempt: int, data: dict[str, Any]) -> None:
        self._emit(E.POLICY_DECISION, step_id, attempt, data)

    def _on_attempt(self, step: Step, record: dict[str, Any]) -> None:
        """After each attempt of a step's action: a failed attempt (and its retry) is an event;
        a call that crashed with its effect in doubt is remembered (:class:`.CallsUnderWay`)."""
        error = record.get("error")
        if error is not None:
            self._emit(E.ATTEMPT_FAILED, step.id, record["attempt"], dict(record))
            item = record.get("item")
            if error.get("type") == CallCrashedError.__name__:
                self._under_way.crashed(step.id, item)
            if "delay" in record:  # the call failed and the step waits: nothing is under way
                self._under_way.over(step.id, 1, item)
                self._emit(
                    E.RETRY_SCHEDULED, step.id, record["attempt"], {"delay": record["delay"]}
                )

    async def _run_step(self, step: Step) -> None:
        assert self._runner is not None
        try:
            outcome = await self._runner.run(step, self.outputs, self._context(step))
        except asyncio.CancelledError:
            self._tasks.pop(step.id, None)
            if not self._aborted:
                raise
            self._complete(step.id, self._cancelled(step.id))
            return
        except Exception as exc:  # a planrail bug or a store failure: fail the step, not the run
            denied = denial_of(exc)
            if denied is not None:  # a security policy said no: this step fails, the run goes on
                outcome = Outcome(S.FAILED, error=error_dict(denied), reason=denied.message)
                self._tasks.pop(step.id, None)
                self._complete(step.id, outcome)
                return
            while isinstance(exc, ExceptionGroup) and exc.exceptions:  # from a fan-out item
                exc = exc.exceptions[0]
            if not getattr(exc, "fatal", False):  # a run-wide limit (max_tool_calls) is no bug
                log.exception("error running step %s", step.id)
            outcome = Outcome(
                S.FAILED,
                error=error_dict(exc),
                fatal=isinstance(exc, PlanrailError),
                reason=error_message(exc),
            )
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # no Exception, from planrail itself: a step left running
            log.exception("error running step %s", step.id)  # would hold the run for ever
            outcome = Outcome(S.FAILED, error=error_dict(exc), fatal=True, reason=repr(exc))
        self._tasks.pop(step.id, None)
        self._complete(step.id, outcome)

    # ------------------------------------------------------------------ finishing steps

    def _complete(self, sid: str, outcome: Outcome) -> None:
        res = self.results[sid]
        res.finished_at = self.clock.now()
        res.attempts = outcome.attempts
        res.error = outcome.error
        res.reason = recordable(outcome.reason)
        if self.redactor is not None:  # what a person or a trace reads of this step
            res.error, res.reason = self.redactor.scrub((outcome.error, res.reason))
        res.degraded = outcome.degraded
        keep_history(res, outcome.history)
        keep_usage(res, outcome.usage)
        res.status = outcome.status
        self._under_way.ended(sid)
        if outcome.args is not None:
            self.args[sid] = outcome.args
        if outcome.status == S.SUCCEEDED:
            res.output = outcome.output
        if self._ckpt is None or self._aborted:
            if self._ckpt is not None:  # recorded with the run's final commit
                self._dirty.add(sid)
            self._apply(sid, outcome)
            return
        # Committed before dependents call anything; completions of a loop turn share one
        # transaction, and with it the intents of the steps they start (see _flush).
        self._dirty.add(sid)
        self._pending_outcomes[sid] = outcome
        if not self._flush_pending:
            self._flush_pending = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        """This loop turn's outcomes: applied (their dependents start), then committed — in the
        next turn, together with the intents those dependents queue in it, when any started
        (one transaction per layer of a plan: its outcomes and the next layer's intents); at
        once otherwise. Until that commit the outcomes are unsaved
        (:attr:`Checkpointer.unsaved`): intents and events wait for it, and so does every call
        (:meth:`_stored_first`). So no call runs, and nothing of a dependent is stored, before
        the outcomes it may read are."""
        ckpt = self._ckpt
        assert ckpt is not None
        outcomes, self._pending_outcomes = self._pending_outcomes, {}
        self._flush_pending = False
        started = len(self._tasks)
        loop = asyncio.get_running_loop()
        if ckpt.unsaved is None:
            ckpt.unsaved = loop.create_future()
        try:
            for sid, outcome in outcomes.items():
                self._apply(sid, outcome)
        finally:  # committed whatever happened: nothing waits for a commit that never comes
            if len(self._tasks) > started and not self._aborted:
                loop.call_soon(self._commit_outcomes)
            else:
                self._commit_outcomes()

    def _commit_outcomes(self) -> None:
        """Commit the applied outcomes with the intents and events that waited (:meth:`_flush`);
        the calls that waited are released (cancelled first if the store failed)."""
        assert self._ckpt is not None
        try:
            self._save_dirty()
        except Exception as exc:
            self._store_failed(exc)
        finally:
            self._ckpt.saved()
            if self._wakeup is not None:
                self._wakeup.set()

    def _store_failed(self, exc: Exception) -> None:
        """A commit of outcomes failed (the intents and events it carried wait: see
        :meth:`Checkpointer.record`). Each outcome is tried alone, as a store that failed once
        may take them one by one, and then the intents and events follow (:meth:`_commit_outcomes`
        calls :meth:`Checkpointer.saved`); if one still fails (or the lease is lost), the run
        stops before any call waiting for it is made: that step is failed (in doubt if its tool
        may not run again: its effect did happen), reason *its outcome could not be recorded*,
        the waiting intents are dropped, and what waited or would start is cancelled or
        skipped."""
        assert self._ckpt is not None
        left = [sid for sid in self._last_dirty if sid in self.results]
        problem: Exception = exc
        if not isinstance(exc, LeaseLostError):
            for i, sid in enumerate(left):
                try:
                    self._ckpt.record([self.results[sid]], self.args, alone=True)
                except Exception as one:
                    problem, left = one, left[i:]
                    break
            else:
                return
        log.error("could not record step outcomes (%s); stopping the run", problem)
        self._ckpt.abandon()
        self.error = f"the store failed: {problem}"
        for sid in left:
            res = self.results[sid]
            # A step carried from another run keeps its known outcome (its call was made there).
            if res.status == S.SUCCEEDED and sid not in self._carried:
                why = f"its outcome could not be recorded: {problem}"
                res.status = S.FAILED if self.effects[sid].may_rerun else S.IN_DOUBT
                res.output, res.reason = None, why
                res.error = error_dict(StoreError(why, step_id=sid))
                self.args.pop(sid, None)
            self._dirty.add(sid)  # tried again with the run's last commit
        self._fail_fast(left[0] if left else "(store)", self.error)

    def _save_dirty(self) -> None:
        if self._ckpt is not None and self._dirty:
            dirty, self._dirty = self._dirty, set()
            self._last_dirty = dirty
            self._ckpt.record([self.results[s] for s in dirty], self.args)

    def _apply(self, sid: str, outcome: Outcome) -> None:
        """Tell the scheduler, emit the events, start what became ready."""
        res = self.results[sid]
        finished = res.finished_at
        duration = (finished or 0.0) - (res.started_at or finished or 0.0)
        sched = self.scheduler
        data: dict[str, Any] = {"duration": duration}
        if outcome.usage:
            data["usage"] = outcome.usage
        try:
            if outcome.status == S.SUCCEEDED:
                self.outputs[sid] = outcome.output
                if sid in self._seen and self._guard is not None:  # a seen step ran again
                    self._guard.provenance.saw(sid, outcome.output)
                kind = E.STEP_DEGRADED if outcome.degraded else E.STEP_SUCCEEDED
                if outcome.degraded and outcome.reason:
                    data["reason"] = outcome.reason
                # Not woken yet: the dependents started below run before iter()'s loop does.
                self._emit(kind, sid, outcome.attempts, data, at=finished, wake=False)
                self._skipped(sched.succeeded(sid))
            elif outcome.status == S.SKIPPED:
                self._emit(E.STEP_SKIPPED, sid, outcome.attempts, {"reason": outcome.reason})
                self._skipped(sched.skip(sid, outcome.reason or "skipped")[1:])
            elif outcome.status == S.CANCELLED:
                self._emit(E.STEP_CANCELLED, sid, outcome.attempts, {"reason": outcome.reason})
                self._skipped(sched.cancelled(sid))
            elif outcome.status == S.IN_DOUBT:  # its call crashed (CallCrashedError)
                sched.in_doubt(sid)
                data.update(error=outcome.error, reason=outcome.reason)
                self._emit(E.STEP_IN_DOUBT, sid, outcome.attempts, data, at=finished)
            else:
                data["error"] = outcome.error
                self._emit(E.STEP_FAILED, sid, outcome.attempts, data, at=finished)
                self._skipped(sched.failed(sid))
                if (self.failure_mode == "fail_fast" or outcome.fatal) and not self._aborted:
                    self._fail_fast(sid, outcome.reason if outcome.fatal else None)
            self._dispatch()
        finally:  # woken once the dependents exist, and woken even if starting one failed
            if self._wakeup is not None:
                self._wakeup.set()

    def _skipped(self, skips: list[Skip]) -> None:
        for skip in skips:
            res = self.results[skip.step]
            res.status = S.SKIPPED
            res.reason = skip.reason
            self._dirty.add(skip.step)
            self._emit(E.STEP_SKIPPED, skip.step, data={"reason": skip.reason})

    def _fail_fast(self, failed: str, why: str | None = None) -> None:
        """Stop everything: ``failed`` failed under fail-fast, or hit a run-wide limit (``why``)."""
        self._aborted = True
        if why is not None and self.error is None:
            self.error = why
        why = why or "the run fails fast"
        self._abort_reason = f"cancelled: '{failed}' failed ({why})"
        running, skips = self.scheduler.abort(f"not started: '{failed}' failed ({why})")
        self._skipped(skips)
        for sid in running:
            task = self._tasks.get(sid)
            if task is not None:
                self._cancel(sid, task)

    def _start_background(self) -> None:
        """The lease's renewal and the watch for operator requests (durable runs only)."""
        ckpt = self._ckpt
        assert ckpt is not None
        self._background = [
            asyncio.create_task(keep_lease(ckpt.lease, self.clock, self._lost)),
            asyncio.create_task(
                watch_requests(ckpt, self.clock, self.watch_interval, self._cancel_requested)
            ),
        ]

    def _lost(self, why: str) -> None:
        """The lease could not be renewed: the run stops."""
        self.error = why
        self._fail_fast("(lease)", why)
        if self._wakeup is not None:
            self._wakeup.set()

    def _cancel_requested(self, by: str) -> None:
        """An operator asked to cancel the run (from any process): it stops as on Ctrl-C."""
        self.error = f"cancelled by {by}"
        self._cancelled_by = by
        self._fail_fast("(cancel)", self.error)
        self._abort_reason = self.error
        if self._wakeup is not None:
            self._wakeup.set()

    async def _cancel_all(self, reason: str) -> None:
        self._aborted = True
        self._abort_reason = reason
        running = list(self._tasks.items())
        for sid, task in running:
            self._cancel(sid, task)
        if running:
            await asyncio.gather(*(task for _, task in running), return_exceptions=True)
        for res in self.results.values():
            if res.status in (S.PENDING, S.RUNNING):
                if res.status == S.RUNNING:
                    res.finished_at = self.clock.now()
                res.status = S.CANCELLED
                res.reason = recordable(reason)
                self._dirty.add(res.id)

    def _finish(self) -> None:
        statuses = {r.status for r in self.results.values()}
        if self._cancelled_by is not None:
            statuses.add(S.CANCELLED)
        if self._cancelled_by is not None:
            self.status = "cancelled"
        elif S.FAILED in statuses or S.IN_DOUBT in statuses or self._rejected():
            self.status = "failed"
        elif S.CANCELLED in statuses or S.PENDING in statuses or self._aborted:
            self.status = "cancelled" if S.CANCELLED in statuses or self._aborted else "failed"
        else:
            self.status = "succeeded"
        doubtful = [r.id for r in self.results.values() if r.status == S.IN_DOUBT]
        if doubtful and self.error is None:
            self.error = (
                f"in doubt: {', '.join(doubtful)} — decide with `planrail resolve "
                f"{self.run_id} STEP --succeeded|--retry`, then resume"
            )
        if self.plan.output is not None and self.status == "succeeded":
            try:
                self.run_output = resolve_value(
                    self.plan.output, self.outputs, parse=self.compiled.template
                )
            except ReferenceResolutionError as exc:
                self.status = "failed"
                self.error = f"the plan's output could not be resolved: {exc.message}"
        self._emit(E.RUN_FINISHED, data={"status": self.status, "error": self.error})
        self._save_final()

    def _rejected(self) -> bool:
        return self._stages is not None and bool(self._stages.rejected)

    def _save_final(self) -> None:
        self._ended = True
        if self._ckpt is None:
            return
        dirty, self._dirty = self._dirty, set()
        try:
            self._ckpt.finish(
                self.status,
                self.run_output,
                self.error,
                [self.results[s] for s in dirty],
                self.args,
            )
        except Exception:
            log.exception("could not record the end of run %s", self.run_id)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, PlanrailError):
        return exc.message
    return "the run was cancelled"


def _steps_that(ids: list[str]) -> str:
    """What ``ids`` do that needs approval, as a message says it."""
    if len(ids) == 1:
        return f"step {ids[0]!r} changes the world or asks for approval"
    return f"steps {', '.join(repr(i) for i in ids)} change the world or ask for approval"
