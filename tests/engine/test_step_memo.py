"""What the step runner derives from a step once (:class:`planrail.engine.step_memo.StepMemo`),
checked without running anything: the fallback call as a step of its own, an unknown effect
without a registry, fills that give the same values whether the field is walked (its first
fill) or compiled (every later one); and the retry policy's precedence, which the step runner
derives on each attempt."""

from __future__ import annotations

import planrail
from planrail.engine.step_memo import StepMemo
from planrail.engine.step_runner import StepRunner
from planrail.plan.model import Step
from planrail.plan.refs import parse_template
from planrail.plan.tools import ToolSpec
from planrail.policies.limits import RunPolicy
from planrail.policies.retry import RetryPolicy


def _step(**fields: object) -> Step:
    return Step.model_validate({"id": "s", "tool": "t", **fields})


def test_the_retry_policy_is_the_steps_else_its_tools_else_the_runs() -> None:
    """Not memoized (a step and its fallback may share an id and a tool, not a policy): the
    step runner derives it on each attempt."""
    run_default = RetryPolicy(max_attempts=2)
    runner = StepRunner({}, policy=RunPolicy(default_retry=run_default))
    spec = ToolSpec(name="t", retry={"max_attempts": 3})
    assert runner._retry(_step(retry={"max_attempts": 4}), spec).max_attempts == 4
    assert runner._retry(_step(), spec).max_attempts == 3
    assert runner._retry(_step(), ToolSpec(name="t")).max_attempts == 2
    assert StepRunner({})._retry(_step(), None).max_attempts == 1


def test_the_fallback_is_a_step_of_its_own_without_the_steps_policies() -> None:
    step = _step(
        args={"a": 1},
        retry={"max_attempts": 5},
        timeout=3,
        fallback={"tool": "backup", "args": {"b": 2}},
    )
    memo = StepMemo(parse_template, None)
    fb = memo.fallback_step(step)
    assert (fb.id, fb.tool, fb.args, fb.retry, fb.timeout, fb.fallback) == (
        "s",
        "backup",
        {"b": 2},
        None,
        None,
        None,
    )
    assert memo.fallback_step(step) is fb  # made once


def test_without_a_registry_no_tool_may_run_again() -> None:
    memo = StepMemo(parse_template, None)
    assert not memo.effect(_step()).may_rerun

    @planrail.tool(side_effects="none")
    def t() -> int:
        """Reads."""
        return 1

    known = StepMemo(parse_template, planrail.ToolRegistry.of([t]))
    assert known.effect(_step()).may_rerun


def test_a_field_filled_again_gives_what_its_first_fill_gave() -> None:
    step = _step(args={"x": "${a.n}", "y": "id-${a.n}", "z": [1, "${a}"]})
    memo = StepMemo(parse_template, None)
    for n in (1, 2, 3):  # the first fill walks the field, the later ones compile it
        outputs = {"a": {"n": n}}
        assert memo.filled(step, "args", step.args, outputs) == {
            "x": n,
            "y": f"id-{n}",
            "z": [1, {"n": n}],
        }
