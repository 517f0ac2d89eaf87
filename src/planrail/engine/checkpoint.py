"""Checkpoints: what the executor writes to a store, and what a resume reads back.

The guarantees (see ``docs/durability.md``):

- a step's outcome is committed before any of its dependents calls anything (in the same
  transaction as their intents, when they start together);
- before a side-effecting call, its *intent* (idempotency key and a hash of the resolved
  arguments) is committed; a key later reused with other arguments is refused;
- on resume, a succeeded step is never run again (its stored output feeds its dependents); a
  step found started-but-unfinished runs again with the same key only if its tool honours keys,
  otherwise it is ``in_doubt`` until an operator decides;
- one runner per run: a lease, renewed by a heartbeat, that a second runner cannot take until it
  expires.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from planrail.engine.events import Event, EventType
from planrail.engine.guard import admitted
from planrail.engine.lease import RunLease
from planrail.engine.result import StepResult, history_of, usage_of
from planrail.errors import ExecutionError, error_dict
from planrail.plan.effects import Effect, effects_of, step_effect
from planrail.plan.model import Plan, Step
from planrail.plan.secrets import Redactor
from planrail.plan.tools import ToolRegistry, step_key
from planrail.policies.security import args_digest
from planrail.store.base import Event as StoredEvent
from planrail.store.base import IdempotencyConflictError, Intent, RunRecord, StepRecord, Store
from planrail.types import Clock, StepStatus

__all__ = [
    "Checkpointer",
    "PlanMismatchError",
    "args_hash",
    "load_result",
]

S = StepStatus


class PlanMismatchError(ExecutionError):
    """A run id that already exists was given a different plan: resuming it is refused."""

    code = "plan_mismatch"


class PolicyMismatchError(ExecutionError):
    """A resume was given other policies than the run started with, without overriding them."""

    code = "policy_mismatch"


def check_same_plan(stored: RunRecord, current: str) -> None:
    """:class:`PlanMismatchError` unless run ``stored`` was stored with the plan whose hash is
    ``current``: a run only resumes its own plan."""
    if stored.plan_hash != current:
        raise PlanMismatchError(
            f"run '{stored.run_id}' exists with another plan ({stored.plan_hash[:19]}…);"
            f" this plan is {current[:19]}…: a run only resumes its own plan",
            run_id=stored.run_id,
        )


args_hash = args_digest
"""A stable hash of resolved arguments: ``sha256:`` + the digest of their canonical JSON (the
same as an approval's :func:`~planrail.policies.security.args_digest`)."""


class Checkpointer:
    """Writes one run's progress to a :class:`~planrail.store.Store`."""

    def __init__(
        self,
        store: Store,
        plan: Plan,
        registry: ToolRegistry,
        run_id: str,
        clock: Clock,
        *,
        lease_ttl: float = 30.0,
        owner: str | None = None,
        approval: dict[str, Any] | None = None,
        redactor: Redactor | None = None,
        policies: dict[str, Any] | None = None,
        effects: Mapping[str, Effect] | None = None,
        schemas: Mapping[str, str] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        self.store = store
        self.plan = plan
        self.registry = registry
        self.run_id = run_id
        self._key_prefix = step_key(run_id, "")
        """What every idempotency key of this run starts with (:meth:`intent`)."""
        self.clock = clock
        self.lease = RunLease(store, run_id, clock, lease_ttl, owner)
        """The run's lease: taken as the run opens, checked before each write."""
        self.approval = approval
        self.redactor = redactor
        """Redacts secrets from every record before it is written (``docs/security.md``)."""
        self.policies = policies
        """The security and run policies the run runs under, stored with it for resume."""
        self.effects = effects if effects is not None else effects_of(plan.steps, registry)
        """Each step's effect, as the execution computed it (``plan/effects.py``)."""
        self.schemas = dict(schemas or {})
        """Schema hashes of the plan's tools, kept with a run that waits for approval (an
        operator's approval binds them)."""
        self.metadata = dict(metadata or {})
        """The rest of what the run's record keeps in its metadata, fixed as the run is created
        (the run version it replaces: :data:`planrail.engine.gate.REPLACES`)."""
        self._seq = 0
        """The seq of the last event this runner committed: later ones are someone else's."""
        self.created_at = clock.now()
        self._events: list[StoredEvent] = []
        self._digests: dict[str, tuple[Any, str]] = {}
        """Per step: the arguments its intent hashed, and their hash (reused by the record)."""
        self._queued: list[_Queued] = []
        """Intents waiting for their group commit (see :meth:`intent`)."""
        self.unsaved: asyncio.Future[None] | None = None
        """Set by the executor while a loop turn's outcomes are applied but not committed. The
        intents and events queued meanwhile wait for the next :meth:`record`, which carries them
        with those outcomes in one transaction (whatever order the loop runs its callbacks in:
        an eager task factory queues a dependent's intent while its producer's outcome is being
        applied); a call without an intent awaits it. Done, and unset, by :meth:`saved`."""
        self._plan_data: dict[str, Any] | None = None
        """The plan as the run's record stores it (redacted), dumped once per run: the plan of
        a run never changes, and a big plan's dump costs tens of µs per step."""
        self.resumed = False
        self._items: dict[str, dict[str, Any]] = {}
        """Per fan-out step: the items that succeeded, by index (``{"item", "output"}``)."""
        self.items_done: dict[str, dict[int, tuple[Any, Any]]] = {}
        """What a resume found of fan-outs that did not finish: per step, per item index that
        succeeded, its item and its output (those items are not run again)."""
        self._iterations: dict[str, dict[str, list[dict[str, Any]]]] = {}
        """Per ``repeat`` step, per unit (``""``, or an item's index): its finished iterations
        (``{"iteration", "args_hash", "output", "error"}``), in order."""
        self.iterations_done: dict[str, dict[str, list[dict[str, Any]]]] = {}
        """What a resume found of loops that did not finish (the same form): a resumed loop
        continues after them instead of calling them again."""
        self.admitted = 0
        """The tool calls the security guard admitted before this resume (its stored
        ``policy_decision`` events say so): ``SecurityPolicy.max_tool_calls`` counts them."""

    # ------------------------------------------------------------------ opening

    def open(self, *, checked: bool = False) -> tuple[dict[str, StepResult], dict[str, StepResult]]:
        """Create the run, or take it over for a resume.

        Returns ``(restored, in_doubt)``: steps whose success is recorded (not to be run again)
        and steps whose outcome is unknown and whose tool does not honour idempotency keys.

        A run stored with another plan is refused before the lease is taken, unless the caller
        has just checked that (``checked``: :func:`planrail.engine.gate.adopt`, from the record
        it read); it is checked again once the lease is held, from the record read then.
        """
        if not checked:
            existing = self.store.get_run(self.run_id)
            if existing is not None:
                check_same_plan(existing, self.plan.hash)
        # The lease comes first, even for a new run: two runners started together on one run id
        # must not both create it, nor one create it while the other reads its steps.
        self.lease.acquire()
        try:
            return self._open_leased()
        except BaseException:
            self.release()
            raise

    def _open_leased(self) -> tuple[dict[str, StepResult], dict[str, StepResult]]:
        existing = self.store.get_run(self.run_id)
        if existing is None:
            self.store.create_run(self._run_record("running"))
            return {}, {}
        check_same_plan(existing, self.plan.hash)
        self.resumed = True
        earlier = self.store.events(self.run_id)
        self._seq = earlier[-1].seq if earlier else 0  # requests before this resume are spent
        decided = EventType.POLICY_DECISION
        self.admitted = sum(1 for e in earlier if e.type == decided and admitted(e.data))
        self.created_at = existing.created_at
        self.approval = self.approval or existing.approval
        restored: dict[str, StepResult] = {}
        in_doubt: dict[str, StepResult] = {}
        doubtful: list[StepRecord] = []
        for sid, rec in self.store.get_steps(self.run_id).items():
            if sid not in self.plan.by_id:
                continue
            if rec.status == S.SUCCEEDED:
                restored[sid] = _result(rec)
                continue
            kept = rec.metadata.get("items")
            if isinstance(kept, dict) and kept:
                self._items[sid] = dict(kept)
                self.items_done[sid] = {
                    int(i): (v.get("item"), v.get("output")) for i, v in kept.items()
                }
            loops = rec.metadata.get("iterations")
            # A loop cut off goes on; one that ended failed (out of iterations) starts over.
            if isinstance(loops, dict) and loops and rec.status != S.FAILED:
                self._iterations[sid] = {u: list(done) for u, done in loops.items()}
                self.iterations_done[sid] = {u: list(done) for u, done in loops.items()}
            if rec.status in (S.RUNNING, S.IN_DOUBT) and not self._may_rerun(self.plan.by_id[sid]):
                reason = (
                    "started but its outcome was not recorded, and its tool does not honour "
                    "idempotency keys: decide with `planrail resolve`"
                )
                # Recorded as in_doubt (not left "running") so `planrail show` reports it too.
                doubtful.append(dataclasses.replace(rec, status=S.IN_DOUBT, reason=reason))
                in_doubt[sid] = _result(doubtful[-1])
        self.store.commit(run=self._run_record("running"), steps=doubtful)
        return restored, in_doubt

    def _may_rerun(self, step: Step) -> bool:
        return self.effects[step.id].may_rerun

    def _run_record(
        self, status: str, output: Any = None, error: dict[str, Any] | None = None
    ) -> RunRecord:
        red = self.redactor
        if red is not None:
            output, error = red.scrub(output), red.scrub(error)
        plan = self._plan_data
        if plan is None:
            plan = self._keep_plan(self.plan.dump()[1])
        return RunRecord(
            run_id=self.run_id,
            plan=plan,
            plan_hash=self.plan.hash,
            status=status,
            created_at=self.created_at,
            updated_at=self.clock.now(),
            output=output,
            error=error,
            approval=self.approval,
            metadata=self._run_metadata(),
        )

    def _keep_plan(self, data: dict[str, Any]) -> dict[str, Any]:
        red = self.redactor
        kept = self._plan_data = data if red is None else red.plan_data(data)
        return kept

    def _run_metadata(self) -> dict[str, Any]:
        found: dict[str, Any] = dict(self.metadata)
        if self.policies is not None:
            found["policies"] = self.policies
        if self.schemas:
            found["tool_schemas"] = self.schemas
        return found

    # ------------------------------------------------------------------ progress

    def needs_intent(self, step: Step) -> bool:
        """Whether a call of this step changes the world (its intent must be recorded first)."""
        effect = self.effects.get(step.id)
        return (effect or step_effect(step, self.registry)).changes_world

    def _commit(self, **parts: Any) -> None:
        stored = self.store.commit(**parts)
        # Our own events come back contiguous; a gap before them is someone else's (an
        # operator's): leave the cursor there so that cancel_request() reads it.
        if stored and stored[0].seq == self._seq + 1:
            self._seq = stored[-1].seq

    def _commit_events(self, **parts: Any) -> None:
        """Commit ``parts`` with the queued events; if that fails, the events stay queued for
        the next commit (the log loses none)."""
        events = self._take_events()
        try:
            self._commit(events=events, **parts)
        except BaseException:
            self._events[:0] = events
            raise

    def record_approval(
        self, approval: dict[str, Any], plan_data: dict[str, Any] | None = None
    ) -> None:
        """Commit the run's approval (and queued events) before its first step starts;
        ``plan_data``: the plan as approved (:meth:`Plan.dump`'s), stored from now on."""
        self.lease.check()
        self.approval = approval
        if plan_data is not None:
            self._keep_plan(plan_data)
        self._commit_events(run=self._run_record("running"))

    def cancel_request(self) -> dict[str, Any] | None:
        """An operator's cancel request committed since this runner's last commit, if any."""
        for event in self.store.events(self.run_id, after_seq=self._seq):
            self._seq = max(self._seq, event.seq)
            if event.type == "cancel_requested":
                return dict(event.data)
        return None

    def event(self, event: Event) -> None:
        """Queue an event for the next commit."""
        self._events.append(
            StoredEvent(
                run_id=event.run_id,
                type=str(event.type),
                at=event.at,
                step_id=event.step_id,
                attempt=event.attempt,
                data=event.data,
            )
        )

    def intent(
        self, result: StepResult, step: Step, key: str, attempt: int, args: Any
    ) -> asyncio.Future[None]:
        """Queue the intent to call ``step`` with ``args`` under idempotency key ``key`` (the
        step runner's: ``RUN_ID:STEP``, an item's ``RUN_ID:STEP:i``, a fallback call's with
        ``:fallback``): the returned future is done once the intent is committed, and the call
        must wait for it.

        Intents queued in one turn of the event loop are committed together in one transaction
        (group commit: one fsync for a whole wave of steps), with the outcomes committed in that
        turn if there are any. Each call still waits for its own intent to be durable.
        """
        # Every key the executor makes is RUN_ID:STEP (plan.tools.step_key), and the step
        # runner's build on it (step_runner.fallback_key): the step key is what follows RUN_ID:.
        # Another key is a planrail bug; it is refused before anything is queued or called
        # (a check, not an assert: ``python -O`` would drop an assert, and record a wrong key).
        prefix = self._key_prefix
        if not key.startswith(prefix):
            raise ExecutionError(f"an idempotency key outside run {self.run_id}: {key}")
        step_key = key[len(prefix) :]  # STEP, or STEP:unit
        digest = args_hash(args)
        if step_key == step.id:
            self._digests[step.id] = (args, digest)
        record = self._clean(
            _record(
                self.run_id,
                result,
                key,
                status=S.RUNNING,
                args=args,
                args_hash=digest,
                attempts=attempt,
                kept=self._kept(step.id),
            )
        )
        loop = asyncio.get_running_loop()
        queued = _Queued(
            record,
            Intent(run_id=self.run_id, step_key=step_key, idempotency_key=key, args_hash=digest),
            loop.create_future(),
        )
        self._queued.append(queued)
        if len(self._queued) == 1:
            loop.call_soon(self.commit_intents)
        return queued.future

    def commit_intents(self) -> None:
        """Commit the queued intents (if an outcome commit has not taken them already, and
        none is about to: :attr:`unsaved`)."""
        if self.unsaved is not None:
            return
        queued = self._take_queued()
        if not queued:
            return
        try:
            self.lease.check()
            self._commit_queued(queued)
        except Exception as exc:  # each waiting call fails with it (a callback cannot raise)
            _fail(queued, exc)

    def _commit_queued(self, queued: list[_Queued], steps: Iterable[StepRecord] = ()) -> None:
        """One transaction: ``queued`` intents (their futures resolved once it is durable), then
        ``steps``. An idempotency conflict rolls it all back: each is then committed alone, so
        that only the conflicting call fails. Any other failure keeps the events for the next
        commit; the intents fail with it, unless ``steps`` were outcomes: then they stay queued
        for the commit that follows those outcomes (:meth:`record`)."""
        steps = list(steps)
        try:
            self._commit_events(
                steps=[q.record for q in queued] + steps, intents=[q.intent for q in queued]
            )
        except IdempotencyConflictError as exc:
            if len(queued) == 1 and not steps:
                _fail(queued, exc)
                return
            if steps:
                self._commit_events(steps=steps)
            for one in queued:
                self._commit_queued([one])
            return
        except BaseException as exc:
            if steps:  # outcomes failed: their dependents' intents wait for them (see record)
                self._queued[:0] = queued
            else:
                _fail(queued, exc)
            raise
        for q in queued:
            if not q.future.done():
                q.future.set_result(None)

    def _take_queued(self) -> list[_Queued]:
        """The queued intents whose call still waits (a cancelled wait makes no call)."""
        queued, self._queued = self._queued, []
        return [q for q in queued if not q.future.done()]

    def item_done(self, result: StepResult, index: int, item: Any, output: Any) -> None:
        """Commit that item ``index`` of a fan-out succeeded with ``output`` (before the step
        ends), so that a resume runs only the items that did not."""
        self.lease.check()
        if self.redactor is not None:
            output = self.redactor.output(result.id, output)
        self._items.setdefault(result.id, {})[str(index)] = {"item": item, "output": output}
        self._iterations.get(result.id, {}).pop(str(index), None)  # its loop is over
        self._commit_progress(result)

    def iteration_done(
        self, result: StepResult, index: int | None, args: Any, entry: dict[str, Any]
    ) -> None:
        """Commit a finished iteration of a ``repeat`` step (of item ``index`` inside a
        fan-out) before the next starts, so that a resume continues after it. ``entry`` is the
        iteration's history entry; its arguments are kept as their hash only."""
        self.lease.check()
        red = self.redactor
        output, error = entry.get("output"), entry.get("error")
        if red is not None:
            output, error = red.output(result.id, output), red.scrub(error)
        kept = {
            "iteration": entry.get("iteration"),
            "args_hash": self._digest(result.id, args, keep=True),
            "output": output,
            "error": error,
        }
        unit = "" if index is None else str(index)
        done = self._iterations.setdefault(result.id, {}).setdefault(unit, [])
        if kept["iteration"] == 1:  # the loop (re)started: what a resume kept is void
            done.clear()
        done.append(kept)
        self._commit_progress(result)

    def _commit_progress(self, result: StepResult) -> None:
        """Commit the step as still running, with what of it has finished (items, iterations)."""
        record = self._clean(
            _record(
                self.run_id,
                result,
                step_key(self.run_id, result.id),
                status=S.RUNNING,
                kept=self._kept(result.id),
            )
        )
        # Events wait while outcomes are unsaved: the log never runs ahead of the records.
        if self.unsaved is None:
            self._commit_events(steps=[record])
        else:
            self._commit(steps=[record])

    def saved(self) -> None:
        """The outcomes :attr:`unsaved` stood for are committed (or never will be: the run
        stopped): the calls waiting are released, and the intents no record carried committed."""
        unsaved, self.unsaved = self.unsaved, None
        self.commit_intents()
        if unsaved is not None and not unsaved.done():
            unsaved.set_result(None)

    def abandon(self) -> None:
        """The run stops: the queued intents are dropped, their calls never start (each waiting
        call is cancelled)."""
        for q in self._take_queued():
            q.future.cancel()

    def _kept(self, step_id: str) -> dict[str, Any] | None:
        """What of an unfinished step a resume keeps: its succeeded items, finished iterations."""
        items, loops = self._items.get(step_id), self._iterations.get(step_id)
        if not items and not loops:
            return None
        kept: dict[str, Any] = {}
        if items:
            kept["items"] = items
        if loops:
            kept["iterations"] = loops
        return kept

    def record(
        self, results: Iterable[StepResult], args: dict[str, Any], *, alone: bool = False
    ) -> None:
        """Commit step outcomes (and queued events and intents) in one transaction.

        If that commit fails, the intents stay queued and the events kept: once the outcomes
        are committed some other way — ``alone`` (outcomes only, so that no dependent's intent
        or event is stored before every outcome it may follow), one by one — :meth:`saved`
        commits them. If the outcomes cannot be committed, :meth:`abandon` drops them."""
        if alone:
            self.lease.check()
            self._commit(steps=self._records(results, args))
            return
        queued = self._take_queued()
        try:
            self.lease.check()
        except BaseException as exc:
            _fail(queued, exc)
            raise
        records = self._records(results, args)
        if queued:
            self._commit_queued(queued, records)
        else:
            self._commit_events(steps=records)

    def carry(
        self, results: Iterable[StepResult], source: str | None, args: dict[str, Any]
    ) -> None:
        """Commit steps reused from run version ``source`` (the one this run replaces, when
        known) as that version stored them — the idempotency key their calls were made with,
        their arguments, hash and attempts — under this run; a step it has no succeeded
        record of is recorded from its result."""
        found = self.store.get_steps(source) if source is not None else {}
        records = []
        for r in results:
            kept = found.get(r.id)
            if kept is not None and kept.status == S.SUCCEEDED:
                records.append(dataclasses.replace(kept, run_id=self.run_id))
            else:
                records.extend(self._records([r], args))
        self.lease.check()
        self._commit_events(steps=records)

    def finish(
        self,
        status: str,
        output: Any,
        error: str | None,
        results: Iterable[StepResult],
        args: dict[str, Any],
    ) -> None:
        """Commit the last step records and the run's final status, then release the lease."""
        self.lease.check()
        self.abandon()
        err = error_dict("RunError", error) if error else None
        self._commit_events(
            run=self._run_record(_stored_status(status), output, err),
            steps=self._records(results, args),
        )
        self.release()

    def _records(self, results: Iterable[StepResult], args: dict[str, Any]) -> list[StepRecord]:
        return [
            self._clean(
                _record(
                    self.run_id,
                    r,
                    step_key(self.run_id, r.id),
                    args=args.get(r.id),
                    args_hash=self._digest(r.id, args[r.id]) if r.id in args else None,
                    kept=self._kept(r.id),
                )
            )
            for r in results
        ]

    def _digest(self, step_id: str, args: Any, *, keep: bool = False) -> str:
        """The hash of a step's arguments, reusing the one its intent computed for them (given
        up, unless ``keep``: the step's record is the last to need it)."""
        seen = self._digests.get(step_id) if keep else self._digests.pop(step_id, None)
        return seen[1] if seen is not None and seen[0] is args else args_hash(args)

    def _clean(self, rec: StepRecord) -> StepRecord:
        """``rec`` with its secrets redacted (arguments first: they teach the values)."""
        red = self.redactor
        if red is None:
            return rec
        return dataclasses.replace(
            rec,
            args=red.args(rec.step_id, rec.args),
            output=red.output(rec.step_id, rec.output),
            error=red.scrub(rec.error),
            reason=red.scrub(rec.reason),
            attempt_history=red.scrub(rec.attempt_history),
        )

    def release(self) -> None:
        """Give the run's lease back (:meth:`RunLease.release`)."""
        self.lease.release()

    def _take_events(self) -> list[StoredEvent]:
        events, self._events = self._events, []
        return events


class _Queued(NamedTuple):
    """An intent waiting for its group commit, and the future its call waits on."""

    record: StepRecord
    intent: Intent
    future: asyncio.Future[None]


def _fail(queued: Iterable[_Queued], exc: BaseException) -> None:
    for q in queued:
        if not q.future.done():
            q.future.set_exception(exc)


def _stored_status(status: str) -> str:
    return (
        status
        if status in ("succeeded", "failed", "cancelled", "awaiting_approval")
        else ("failed")
    )


def _record(
    run_id: str,
    r: StepResult,
    key: str,
    *,
    status: StepStatus | None = None,
    args: Any = None,
    args_hash: str | None = None,
    attempts: int | None = None,
    kept: dict[str, Any] | None = None,
) -> StepRecord:
    return StepRecord(
        run_id=run_id,
        step_id=r.id,
        status=status or r.status,
        idempotency_key=key,
        attempts=r.attempts if attempts is None else attempts,
        args=args,
        args_hash=args_hash,
        output=r.output,
        error=r.error,
        reason=r.reason,
        started_at=r.started_at,
        finished_at=r.finished_at,
        degraded=r.degraded,
        attempt_history=history_of(r),
        metadata=_metadata(r, kept),
    )


def _metadata(r: StepResult, kept: dict[str, Any] | None) -> dict[str, Any]:
    usage = usage_of(r)
    meta: dict[str, Any] = {"usage": usage} if usage else {}
    if kept and r.status != S.SUCCEEDED:  # a whole output replaces the items' outputs
        meta.update(kept)
    return meta


def _result(rec: StepRecord) -> StepResult:
    return StepResult(
        id=rec.step_id,
        status=rec.status,
        attempts=rec.attempts,
        started_at=rec.started_at,
        finished_at=rec.finished_at,
        output=rec.output,
        error=rec.error,
        reason=rec.reason,
        degraded=rec.degraded,
        attempt_history=list(rec.attempt_history),
        usage=dict(rec.metadata.get("usage", {})),
    )


def load_result(store: Store, run_id: str) -> Any:
    """The :class:`~planrail.engine.result.RunResult` of a stored run (None if unknown).

    Steps appear in plan order; a step with no record is ``pending``. This is what ``planrail
    show`` prints, and it equals the result the run itself returned.
    """
    from planrail.engine.result import RunResult

    run = store.get_run(run_id)
    if run is None:
        return None
    records = store.get_steps(run_id)
    steps: dict[str, StepResult] = {}
    for raw in run.plan.get("steps", []):
        sid = raw["id"]
        rec = records.get(sid)
        steps[sid] = _result(rec) if rec is not None else StepResult(sid)
    error = run.error.get("message") if run.error else None
    return RunResult(
        run_id=run.run_id,
        status=run.status,
        steps=steps,
        output=run.output,
        error=error,
        plan_hash=run.plan_hash,
    )
