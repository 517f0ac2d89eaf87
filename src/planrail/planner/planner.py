"""The planner: a goal and a tool catalog in, a validated plan out — or every reason why not.

One attempt is: ask the model (with the plan schema), read the JSON out of its answer
tolerantly, let :func:`planrail.plan.repair.repair` fix what is mechanical (aliases, missing
``depends_on`` edges) without a model call, then validate. An invalid plan goes back to the
model with every issue in a repair prompt, up to ``max_repairs`` times. Every attempt — the
messages sent, the raw answer, the issues, the automatic fixes, the structured-output form the
provider was asked in — is kept for the trace and the run's record.

An answer cut off at ``max_tokens`` is never parsed (issue ``answer_cut_off``), nor one larger
than a plan file may be (``limit_exceeded``); an object holding a key twice is refused
(``duplicate_key``: which value was meant is the model's to say; :mod:`.answer`); a plan
without steps is an error (``empty_plan``); a model that answers a repair with its previous
answer again (the same JSON, however spaced) is not asked a third time (``repeated_answer``);
a request that does not fit the model's context ends planning with ``context_length`` instead
of being mistaken for a refused schema. The prompt is ``full`` (:mod:`planrail.planner.prompt`)
or ``compact`` (:mod:`planrail.planner.compact`); ``auto`` picks compact for small contexts.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from planrail.clock import SYSTEM_CLOCK
from planrail.errors import PlanError, RetryableError
from planrail.llm.base import LLM, LLMResponse, Message, Usage
from planrail.llm.errors import LLMAnswerError, LLMContextLengthError
from planrail.plan.loader import PlanLimits
from planrail.plan.model import Plan
from planrail.plan.repair import repair
from planrail.plan.tools import Tool, ToolRegistry, ToolSpec
from planrail.plan.validate import Issue, ValidationOptions, ValidationReport
from planrail.planner import prompt as prompts
from planrail.planner.answer import read_answer, same_answer
from planrail.planner.compact import COMPACT_CONTEXT, compact_messages, compact_repair_message
from planrail.planner.finished import DATA_NOTE, ReplanView, shown_outputs
from planrail.planner.fixes import prefix_fixes, prefix_ids
from planrail.planner.retry import LLMRetry, call_with_retry
from planrail.planner.schema import DEFAULT_MAX_STEPS
from planrail.planner.stages import kept_stages, merge_stages
from planrail.planner.stream import StepStream
from planrail.types import Clock

__all__ = ["Attempt", "Planner", "PlanningError", "PlanningResult", "StepCallback"]

AttemptKind = Literal["plan", "repair", "replan"]
PromptMode = Literal["full", "compact", "auto"]
StepCallback = Callable[[dict[str, Any]], "Awaitable[None] | None"]
"""Told of each step of a streamed plan as soon as it has fully arrived (raw JSON data)."""
PlannerEvent = Callable[[str, dict[str, Any]], None]


@dataclass
class Attempt:
    """One request to the model and what became of its answer."""

    kind: AttemptKind
    messages: list[dict[str, str]]
    """What was sent."""
    raw: str = ""
    """The answer as received."""
    issues: list[Issue] = field(default_factory=list)
    """Errors left after the automatic fixes (empty when the plan was valid)."""
    warnings: list[Issue] = field(default_factory=list)
    """The valid plan's warnings: what may be a mistake in it (a placeholder such as
    ``<user_id>``, a lint), for a person to see before approving."""
    changes: list[str] = field(default_factory=list)
    """What was fixed automatically, without a model call."""
    usage: Usage = field(default_factory=Usage)
    retries: list[str] = field(default_factory=list)
    """Transient failures that were retried before this answer came."""
    streamed: bool = False
    structured: str = ""
    """The structured-output form the provider was asked in (``json_schema_strict``,
    ``json_schema``, ``json_object_schema``, ``json_object``, ``none``; ``tool``: Anthropic)."""
    fallbacks: list[str] = field(default_factory=list)
    """Forms the provider refused on the way to ``structured``, and how."""
    finish_reason: str = ""
    """Why the model stopped (``length``: cut off at ``max_tokens``)."""
    prompt: str = "full"
    """The prompt mode: ``full`` or ``compact``."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "messages": self.messages,
            "raw": self.raw,
            "issues": [i.to_dict() for i in self.issues],
            "warnings": [i.to_dict() for i in self.warnings],
            "changes": self.changes,
            "usage": self.usage.to_dict(),
            "retries": self.retries,
            "streamed": self.streamed,
            "structured": self.structured,
            "fallbacks": self.fallbacks,
            "finish_reason": self.finish_reason,
            "prompt": self.prompt,
        }


@dataclass
class PlanningResult:
    """A valid plan and how it was reached."""

    plan: Plan
    report: ValidationReport
    attempts: list[Attempt]

    @property
    def usage(self) -> Usage:
        total = Usage()
        for a in self.attempts:
            total += a.usage
        return total


class PlanningError(PlanError):
    """No valid plan within the allowed repairs; ``attempts`` holds every try and its issues."""

    code = "planning_failed"

    def __init__(self, message: str, attempts: list[Attempt]) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.issues = attempts[-1].issues if attempts else []


Checker = Callable[[dict[str, Any]], tuple[dict[str, Any], list[str], ValidationReport]]


class Planner:
    """Writes plans with a model. ``max_repairs`` bounds the repair prompts per plan."""

    def __init__(
        self,
        llm: LLM,
        tools: ToolRegistry | Sequence[Tool | ToolSpec],
        *,
        max_repairs: int = 3,
        retry: LLMRetry | None = None,
        clock: Clock = SYSTEM_CLOCK,
        llm_steps: bool = True,
        instructions: str = prompts.PLANNER_INSTRUCTIONS,
        limits: PlanLimits | None = None,
        options: ValidationOptions | None = None,
        on_event: PlannerEvent | None = None,
        prompt: PromptMode = "auto",
        max_steps: int = DEFAULT_MAX_STEPS,
    ) -> None:
        if max_repairs < 0:
            raise ValueError("max_repairs must be >= 0")
        if prompt not in ("full", "compact", "auto"):
            raise ValueError("prompt must be full, compact or auto")
        self.llm = llm
        self.registry = ToolRegistry.of(tools)
        self.max_repairs = max_repairs
        self.retry = retry or LLMRetry()
        self.clock = clock
        self.instructions = instructions
        self.limits = limits
        self.options = options
        """How plans are validated: those of the run they are for (a strict security policy
        makes a placeholder in a world-changing step an error, which the model is asked to
        repair, instead of a plan that its run then refuses)."""
        self.llm_steps = llm_steps
        self.max_steps = max_steps
        """Most steps in one answer: the schema's bound, and refused beyond it."""
        self.schema = prompts.plan_schema(self.registry, llm_steps=llm_steps, max_steps=max_steps)
        self.on_event = on_event
        window = getattr(llm, "context_window", None)
        if prompt == "auto":
            small = isinstance(window, int) and 0 < window <= COMPACT_CONTEXT
            prompt = "compact" if small else "full"
        self.prompt: Literal["full", "compact"] = "compact" if prompt == "compact" else "full"
        """The prompt mode in use (``auto`` resolved from the model's context window)."""

    def _event(self, event: str, **data: Any) -> None:
        if self.on_event is not None:
            self.on_event(event, data)

    async def plan(self, goal: str, *, on_step: StepCallback | None = None) -> PlanningResult:
        """A valid plan for ``goal``. With ``on_step`` and a streaming model, the first answer
        is streamed and each step is handed to ``on_step`` the moment it is complete.

        Raises :class:`PlanningError` when every allowed attempt stayed invalid.
        """
        if self.prompt == "compact":
            messages = compact_messages(goal, self.registry, llm_steps=self.llm_steps)
        else:
            messages = prompts.planning_messages(
                goal, self.registry, instructions=self.instructions
            )

        def check(data: dict[str, Any]) -> tuple[dict[str, Any], list[str], ValidationReport]:
            return self._check(goal, data, prefix=())

        return await self._loop(messages, "plan", check, on_step)

    async def replan(
        self,
        goal: str,
        plan: Plan,
        finished: Mapping[str, Any],
        failure: str,
        *,
        summary_chars: int = 4000,
        view: ReplanView | None = None,
    ) -> PlanningResult:
        """A plan for the remaining work after a failure.

        ``finished`` maps the ids of succeeded steps of ``plan`` to their outputs. The result
        is the *combined* plan: those steps, unchanged, followed by the new ones (which may
        reference them); it is validated as a whole. The prompt shows the finished outputs by
        reference and shape only, secrets never, within ``view`` (default: ``summary_chars``
        characters, strings cut to 80; :mod:`planrail.planner.finished`).
        """
        kept = tuple(plan.step(sid) for sid in finished)
        view = view or ReplanView(max_chars=summary_chars)
        messages = prompts.replan_messages(
            goal,
            self.registry,
            finished=shown_outputs(finished, plan, self.registry, view),
            failure=f"<data>{failure[: view.max_chars]}</data>",
            taken_ids=plan.by_id,
            instructions=self.instructions,
        )
        last = messages[-1]  # the goal restated after the data it must not be steered by
        messages[-1] = Message(
            last.role, f"{last.content}\n\n{DATA_NOTE}\nThe goal is still: {goal}"
        )
        prefix = tuple(s.model_dump(mode="json", exclude_defaults=True) for s in kept)
        stages = kept_stages(plan, finished)

        def check(data: dict[str, Any]) -> tuple[dict[str, Any], list[str], ValidationReport]:
            return self._check(goal, data, prefix=prefix, stages=stages)

        return await self._loop(messages, "replan", check, None)

    # ------------------------------------------------------------------ the loop

    def _check(
        self,
        goal: str,
        data: dict[str, Any],
        *,
        prefix: tuple[dict[str, Any], ...],
        stages: tuple[dict[str, Any], ...] = (),
    ) -> tuple[dict[str, Any], list[str], ValidationReport]:
        changes: list[str] = []
        if data.get("goal") != goal:
            if data.get("goal"):
                changes.append("$.goal: set to the goal as the user stated it (the goal anchor)")
            data = {**data, "goal": goal}
        data, fixed = prefix_fixes(data, self.registry, prefix_ids(prefix))
        changes.extend(fixed)
        if not prefix:
            result = repair(data, self.registry, limits=self.limits, options=self.options)
            return result.plan_data or data, changes + result.changes, result.report
        steps = data.get("steps")
        new = list(steps) if isinstance(steps, list) else []
        for i, step in reversed(list(enumerate(new))):
            if step in prefix:  # a finished step written out again: it will not run again
                del new[i]
                changes.append(f"$.steps[{i}]: dropped; it repeats a finished step")
        data, dropped = merge_stages(data, stages)
        changes.extend(dropped)
        result = repair(
            {**data, "steps": [*prefix, *new]},
            self.registry,
            limits=self.limits,
            options=self.options,
        )
        shown = dict(result.plan_data or data)
        if isinstance(shown.get("steps"), list):
            shown["steps"] = shown["steps"][len(prefix) :]  # the model sees only its own steps
        if stages and isinstance(shown.get("stages"), list):
            shown["stages"] = shown["stages"][len(stages) :]
        return shown, changes + result.changes, result.report

    async def _loop(
        self,
        messages: list[Message],
        kind: AttemptKind,
        check: Checker,
        on_step: StepCallback | None,
    ) -> PlanningResult:
        attempts: list[Attempt] = []
        first = list(messages)
        for n in range(self.max_repairs + 1):
            attempt = Attempt(kind if n == 0 else "repair", [m.to_dict() for m in messages])
            attempt.prompt = self.prompt
            attempts.append(attempt)
            self._event(
                "plan_requested",
                kind=attempt.kind,
                attempt=n + 1,
                at=self.clock.now(),
                model=getattr(self.llm, "model", None),
            )
            stream = on_step is not None and n == 0 and self.llm.supports_streaming
            try:
                response = await self._ask(messages, attempt, on_step if stream else None)
            except PlanningError as exc:
                exc.attempts = attempts
                raise
            except LLMContextLengthError as exc:
                attempt.issues = [Issue("context_length", None, "$", exc.message)]
                raise PlanningError(
                    f"the request does not fit the model's context: {exc.message}", attempts
                ) from exc
            attempt.raw, attempt.usage = response.text, response.usage
            attempt.structured, attempt.finish_reason = response.structured, response.finish_reason
            attempt.fallbacks = list(response.fallbacks)
            self._event(
                "plan_answered",
                attempt=n + 1,
                streamed=attempt.streamed,
                at=self.clock.now(),
                usage=response.usage.to_dict(),
            )
            if n > 0 and same_answer(response.text, attempts[-2].raw):
                # Asking again would get the same answer: stop, keeping what was wrong with it.
                attempt.issues = [
                    *attempts[-2].issues,
                    Issue(
                        "repeated_answer",
                        None,
                        "$",
                        "the model answered the repair with its previous answer",
                    ),
                ]
                self._event(
                    "plan_invalid", attempt=n + 1, issues=[i.to_dict() for i in attempt.issues]
                )
                break
            repaired: dict[str, Any] | None = None
            data, attempt.issues = read_answer(
                response, self.limits or PlanLimits(), self.max_steps
            )
            if data is not None:
                repaired, attempt.changes, report = check(data)
                if kind == "plan" and not _new_steps(data):
                    attempt.issues = [
                        Issue(
                            "empty_plan",
                            None,
                            "$.steps",
                            "the plan has no steps: write the steps that reach the goal",
                        )
                    ]
                elif report.valid and report.plan is not None:
                    attempt.warnings = list(report.warnings)
                    self._event(
                        "plan_valid",
                        attempt=n + 1,
                        changes=attempt.changes,
                        warnings=[i.to_dict() for i in attempt.warnings],
                    )
                    return PlanningResult(report.plan, report, attempts)
                else:
                    attempt.issues = list(report.errors)
            self._event("plan_invalid", attempt=n + 1, issues=[i.to_dict() for i in attempt.issues])
            messages = self._repair_messages(first, messages, response, attempt, repaired)
        count = len(attempts)
        shown = "; ".join(str(i) for i in attempts[-1].issues[:3])
        raise PlanningError(
            f"no valid plan after {count} attempt{'s' if count > 1 else ''}"
            f" ({self.max_repairs} repair{'s' if self.max_repairs != 1 else ''} allowed): {shown}",
            attempts,
        )

    def _repair_messages(
        self,
        first: list[Message],
        messages: list[Message],
        response: LLMResponse,
        attempt: Attempt,
        repaired: dict[str, Any] | None,
    ) -> list[Message]:
        """The next request: in compact mode the first request, the last answer and the errors
        (the transcript does not grow); in full mode the whole conversation so far."""
        answer = Message("assistant", "(cut off)" if response.cut_off else response.text)
        if self.prompt == "compact":
            return [
                *first,
                answer,
                compact_repair_message(attempt.issues, attempt.changes, repaired),
            ]
        return [
            *messages,
            answer,
            prompts.repair_message(attempt.issues, attempt.changes, repaired),
        ]

    async def _ask(
        self, messages: list[Message], attempt: Attempt, on_step: StepCallback | None
    ) -> LLMResponse:
        def on_retry(n: int, exc: RetryableError, delay: float) -> None:
            attempt.retries.append(f"attempt {n}: {exc.message} (retrying in {delay:g}s)")
            self._event("llm_retry", attempt=n, error=exc.message, delay=delay)

        async def once() -> LLMResponse:
            if on_step is None:
                return await self.llm.complete(messages, schema=self.schema, schema_name="plan")
            attempt.streamed = True
            return await self._stream(messages, on_step)

        try:
            return await call_with_retry(once, self.retry, self.clock, on_retry)
        except RetryableError as exc:
            tries = len(attempt.retries) + 1
            # an empty answer (or a body that is not JSON) was an answer: the model was asked
            failed = (
                "gave no usable answer" if isinstance(exc, LLMAnswerError) else "could not be asked"
            )
            raise PlanningError(
                f"the model {failed} ({tries} attempt{'s' if tries > 1 else ''}): {exc.message}",
                [attempt],
            ) from exc

    async def _stream(self, messages: list[Message], on_step: StepCallback) -> LLMResponse:
        scanner = StepStream()
        stream = self.llm.stream(messages, schema=self.schema, schema_name="plan")
        async for delta in stream:
            for step in scanner.feed(delta):
                self._event("plan_step_streamed", step=step.get("id"))
                result = on_step(step)
                if inspect.isawaitable(result):
                    await result
        if stream.response is None:
            raise LLMAnswerError("the stream ended without an answer")
        self._event("plan_streamed", steps=scanner.count)
        return stream.response


def _new_steps(data: dict[str, Any]) -> bool:
    steps = data.get("steps")
    return not isinstance(steps, list) or bool(steps)
