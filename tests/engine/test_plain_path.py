"""Steps with no policy around their one call take a short path through the step runner.

It must be indistinguishable from the full attempt machinery: the same records, hooks, errors
and events. Each test runs the same step both ways — plain, and with a generous ``timeout``
that sends it through the attempt loop without changing what happens — and compares.
"""

from __future__ import annotations

from typing import Any

import pytest

import planrail
from planrail.engine.events import Event
from planrail.engine.runners import LocalRunner
from planrail.engine.step_runner import StepRunner, ToolAction
from planrail.plan.model import Step
from planrail.plan.tools import StepContext, ToolRegistry
from planrail.policies.limits import ResourceLimit, RunPolicy
from planrail.policies.retry import RetryPolicy
from planrail.runs import prepare


class Boom(Exception):
    """Raised by ``flaky`` when told to."""

    retryable = True


@planrail.tool(side_effects="none")
async def flaky(n: int, fail: bool = False) -> dict[str, int]:
    if fail:
        raise Boom(f"no luck with {n}")
    return {"n": n * 2}


@planrail.tool(side_effects="none")
def echo(v: Any) -> Any:
    """No output schema: references into its output are checked only at run time."""
    return {"v": v}


@planrail.tool(side_effects="none")
def lying(n: int) -> int:
    return "not a number"  # type: ignore[return-value]


@planrail.tool(side_effects="none")
async def with_context(ctx: StepContext) -> str:
    return f"{ctx.step_id}#{ctx.attempt}@{ctx.idempotency_key}"


def _plan(args: dict[str, Any], *, slow_path: bool, tool: str = "flaky") -> dict[str, Any]:
    first: dict[str, Any] = {"id": "a", "tool": tool, "args": args}
    if slow_path:
        first["timeout"] = 3600
    return {
        "steps": [
            {"id": "src", "tool": "echo", "args": {"v": "twenty"}},
            {**first, "depends_on": ["src"]},
            {"id": "b", "tool": "flaky", "args": {"n": 1}, "depends_on": ["a"]},
        ]
    }


def _shape(result: Any, events: list[Event]) -> dict[str, Any]:
    """Everything about a run but its timings and ids."""
    steps = {}
    for sid, rec in result.steps.items():
        steps[sid] = {
            "status": rec.status,
            "attempts": rec.attempts,
            "output": rec.output,
            "error": rec.error,
            "reason": rec.reason,
            "history": [
                {k: v for k, v in h.items() if k not in ("started_at", "duration")}
                for h in rec.attempt_history
            ],
            "history_timed": all(
                isinstance(h["started_at"], float) and h["duration"] >= 0
                for h in rec.attempt_history
            ),
        }
    kinds = [
        (str(e.type), e.step_id, e.attempt, sorted(k for k in e.data if k != "duration"))
        for e in events
    ]
    return {"status": result.status, "steps": steps, "events": kinds}


async def _run(plan: dict[str, Any], **kw: Any) -> dict[str, Any]:
    events: list[Event] = []
    execution = prepare(plan, [echo, flaky, lying, with_context], run_id="run_same", **kw)
    async for event in execution.iter():
        events.append(event)
    return _shape(execution.result(), events)


@pytest.mark.parametrize(
    ("args", "tool"),
    [
        pytest.param({"n": 21}, "flaky", id="succeeds"),
        pytest.param({"n": 21, "fail": True}, "flaky", id="tool-raises"),
        pytest.param({"n": "${src.v}"}, "flaky", id="arguments-do-not-fit"),
        pytest.param({"n": 3}, "lying", id="output-does-not-fit"),
        pytest.param({}, "with_context", id="step-context"),
    ],
)
async def test_the_plain_path_records_exactly_what_the_attempt_loop_records(
    args: dict[str, Any], tool: str
) -> None:
    # The comparison means something only if the two runs took different paths.
    assert _decides({}) is True
    assert _decides({"timeout": 3600}) is False
    plain = await _run(_plan(args, slow_path=False, tool=tool))
    full = await _run(_plan(args, slow_path=True, tool=tool))
    assert plain == full
    a = plain["steps"]["a"]
    assert a["attempts"] == 1
    assert len(a["history"]) == 1
    assert a["history_timed"]
    if a["status"] == "succeeded":
        assert a["history"][0] == {"attempt": 1, "error": None}
    else:
        assert a["error"] is not None
        assert a["history"][0]["error"] == a["error"]
        assert plain["steps"]["b"]["status"] == "skipped"


async def test_a_failed_plain_step_reports_whether_it_could_be_retried() -> None:
    """The error's ``retryable`` flag comes from the retry policy: the run's default policy
    (one attempt) says no, even for an exception that calls itself retryable."""
    shape = await _run(_plan({"n": 1, "fail": True}, slow_path=False))
    error = shape["steps"]["a"]["error"]
    assert error == {"type": "Boom", "message": "no luck with 1", "retryable": False}


async def test_the_before_attempt_hook_sees_plain_steps_too() -> None:
    """The security policy and intent records hang on ``before_attempt``: a plain step calls it
    once, with the resolved arguments, before the tool runs (key None: the step's own, as the
    executor makes it — no context is made for a tool that takes none)."""
    seen: list[tuple[str, int | None, int, Any, str | None]] = []

    def hook(step: Step, item: int | None, attempt: int, args: Any, key: str | None) -> None:
        seen.append((step.id, item, attempt, args, key))

    registry = ToolRegistry.of([flaky])
    runner = StepRunner({"tool_call": ToolAction(registry, LocalRunner())}, before_attempt=hook)
    step = Step.model_validate({"id": "a", "tool": "flaky", "args": {"n": "${src.n}"}})

    def context(attempt: int) -> StepContext:
        return StepContext("run", "a", attempt, "run:a")

    outcome = await runner.run(step, {"src": {"n": 4}}, context)
    assert outcome.output == {"n": 8}
    assert seen == [("a", None, 1, {"n": 4}, None)]


@planrail.tool(side_effects="none", resource="api")
async def metered(n: int) -> int:
    return n


@planrail.tool(side_effects="none", retry={"max_attempts": 3})
async def retried(n: int) -> int:
    return n


@planrail.tool(side_effects="none", timeout=5)
async def bounded(n: int) -> int:
    return n


def _decides(step: dict[str, Any], **runner_kw: Any) -> bool:
    registry = ToolRegistry.of([flaky, metered, retried, bounded])
    runner = StepRunner({"tool_call": ToolAction(registry, LocalRunner())}, **runner_kw)
    model = Step.model_validate({"id": "a", "tool": "flaky", "args": {"n": 1}, **step})
    return runner._plain_tool(model, runner.handlers["tool_call"]) is not None


@pytest.mark.parametrize(
    ("extra", "runner_kw", "plain"),
    [
        pytest.param({}, {}, True, id="no-policy"),
        pytest.param({"timeout": 5}, {}, False, id="timeout"),
        pytest.param({"total_timeout": 5}, {}, False, id="total-timeout"),
        pytest.param({"retry": {"max_attempts": 3}}, {}, False, id="retry"),
        pytest.param({"fallback": {"value": 0}}, {}, False, id="fallback"),
        pytest.param({"for_each": "${src.xs}", "args": {"n": "${item}"}}, {}, False, id="for-each"),
        pytest.param({"resource": "api"}, {}, False, id="resource"),
        pytest.param(
            {"repeat": {"until": {"op": "exists", "path": "${self}"}, "max_iterations": 2}},
            {},
            False,
            id="repeat",
        ),
        pytest.param({"timeout": None, "retry": None}, {}, True, id="policy-fields-set-to-null"),
        pytest.param(
            {},
            {"policy": RunPolicy(default_retry=RetryPolicy(max_attempts=2))},
            False,
            id="run-default-retry",
        ),
        pytest.param({}, {"policy": RunPolicy(deadline=60)}, False, id="run-deadline"),
        pytest.param(
            {"tool": "metered"},
            {"policy": RunPolicy(resources={"api": ResourceLimit(max_concurrency=1)})},
            False,
            id="tool-resource-limited",
        ),
        pytest.param({"tool": "metered"}, {}, True, id="tool-resource-not-limited"),
        pytest.param({"tool": "retried"}, {}, False, id="tool-retry"),
        pytest.param({"tool": "bounded"}, {}, False, id="tool-timeout"),
    ],
)
def test_only_steps_without_policies_take_the_plain_path(
    extra: dict[str, Any], runner_kw: dict[str, Any], plain: bool
) -> None:
    assert _decides(extra, **runner_kw) is plain
