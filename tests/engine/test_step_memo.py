"""What the step runner derives from a step once (:class:`planrail.engine.step_memo.StepMemo`),
checked without running anything: the retry policy's precedence, the fallback call as a step of
its own, an unknown effect without a registry, and fills that give the same values whether the
field is walked (its first fill) or compiled (every later one)."""

from __future__ import annotations

import planrail
from planrail.engine.step_memo import StepMemo
from planrail.plan.model import Step
from planrail.plan.refs import parse_template
from planrail.plan.tools import ToolSpec
from planrail.policies.retry import RetryPolicy


def _step(**fields: object) -> Step:
    return Step.model_validate({"id": "s", "tool": "t", **fields})


def test_the_retry_policy_is_the_steps_else_its_tools_else_the_runs() -> None:
    run_default = RetryPolicy(max_attempts=2)
    memo = StepMemo(parse_template, None, run_default)
    spec = ToolSpec(name="t", retry={"max_attempts": 3})
    assert memo.retry(_step(retry={"max_attempts": 4}), spec).max_attempts == 4
    assert memo.retry(_step(), spec).max_attempts == 3
    assert memo.retry(_step(), ToolSpec(name="t")).max_attempts == 2
    assert StepMemo(parse_template, None, None).retry(_step(), None).max_attempts == 1


def test_the_fallback_is_a_step_of_its_own_without_the_steps_policies() -> None:
    step = _step(
        args={"a": 1},
        retry={"max_attempts": 5},
        timeout=3,
        fallback={"tool": "backup", "args": {"b": 2}},
    )
    memo = StepMemo(parse_template, None, None)
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
    memo = StepMemo(parse_template, None, None)
    assert not memo.effect(_step()).may_rerun

    @planrail.tool(side_effects="none")
    def t() -> int:
        """Reads."""
        return 1

    known = StepMemo(parse_template, planrail.ToolRegistry.of([t]), None)
    assert known.effect(_step()).may_rerun


def test_a_field_filled_again_gives_what_its_first_fill_gave() -> None:
    step = _step(args={"x": "${a.n}", "y": "id-${a.n}", "z": [1, "${a}"]})
    memo = StepMemo(parse_template, None, None)
    for n in (1, 2, 3):  # the first fill walks the field, the later ones compile it
        outputs = {"a": {"n": n}}
        assert memo.filled(step, "args", step.args, outputs) == {
            "x": n,
            "y": f"id-{n}",
            "z": [1, {"n": n}],
        }
