"""API probes: the step-context parameter however it is annotated, and Plan objects whose
values are not JSON (refused like the same plan given as Python data)."""

from __future__ import annotations

import datetime
import math
from typing import Annotated, Any, Optional

import pydantic
import pytest

import planrail
from planrail import Plan, Step
from planrail.errors import ToolDefinitionError
from planrail.plan.define import tool
from planrail.plan.tools import StepContext

# --- the StepContext parameter -------------------------------------------------------------


def _optional(amount: int, ctx: StepContext | None = None) -> str:
    return "none" if ctx is None else ctx.idempotency_key


def _typing_optional(amount: int, ctx: Optional[StepContext] = None) -> str:  # noqa: UP045
    return "none" if ctx is None else ctx.idempotency_key


def _annotated(amount: int, ctx: Annotated[StepContext, "the step"]) -> str:
    return ctx.idempotency_key


def _annotated_optional(amount: int, ctx: Annotated[StepContext | None, "c"] = None) -> str:
    return "none" if ctx is None else ctx.idempotency_key


@pytest.mark.parametrize("fn", [_optional, _typing_optional, _annotated, _annotated_optional])
def test_an_optional_or_annotated_step_context_is_the_context_parameter(fn: Any) -> None:
    """``StepContext | None``, ``Optional[StepContext]`` and ``Annotated[StepContext, ...]``
    receive the step's context and are not plan arguments."""
    charge = tool(side_effects="keyed", name="charge")(fn)
    assert charge.context_param == "ctx"
    assert list(charge.spec.input_schema["properties"]) == ["amount"]
    assert charge.spec.input_schema.get("required") == ["amount"]
    plan = {"steps": [{"id": "a", "tool": "charge", "args": {"amount": 5}}]}
    result = planrail.run(plan, [charge], approve=True, run_id="r1")
    assert result.steps["a"].output == "r1:a"


def test_a_plan_cannot_pass_the_context_and_forge_the_idempotency_key() -> None:
    """With the context an argument, a plan could set another run's idempotency key."""
    charge = tool(side_effects="keyed", name="charge")(_optional)
    forged = {"run_id": "other", "step_id": "x", "attempt": 1, "idempotency_key": "other:x"}
    plan = {"steps": [{"id": "a", "tool": "charge", "args": {"amount": 5, "ctx": forged}}]}
    report = planrail.validate(plan, [charge])
    assert [i.code for i in report.errors] == ["unknown_argument"]
    with pytest.raises(planrail.PlanValidationError):
        planrail.run(plan, [charge], approve=True)


def test_step_context_in_a_union_with_another_type_is_refused() -> None:
    def either(ctx: StepContext | str) -> str:
        return "x"

    def inside(ctxs: list[StepContext]) -> str:
        return "x"

    for fn in (either, inside):
        with pytest.raises(ToolDefinitionError, match="mixes StepContext with other types"):
            tool(side_effects="none")(fn)


def test_two_step_context_parameters_are_refused_when_the_tool_is_defined() -> None:
    """Only one could be filled: every call failed with a raw TypeError."""

    def two(a: StepContext, b: StepContext) -> str:
        return a.idempotency_key

    def two_optional(a: StepContext, b: StepContext | None = None) -> str:
        return a.idempotency_key

    for fn in (two, two_optional):
        with pytest.raises(ToolDefinitionError, match="two StepContext parameters"):
            tool(side_effects="none")(fn)


# --- Plan objects whose values are not JSON -------------------------------------------------


class _Model(pydantic.BaseModel):
    score: float = 0.0


_NOT_JSON = [
    pytest.param(math.nan, "$.steps[0].args.x: NaN is not JSON", id="nan"),
    pytest.param(math.inf, "$.steps[0].args.x: Infinity is not JSON", id="inf"),
    pytest.param(-math.inf, "$.steps[0].args.x: Infinity is not JSON", id="-inf"),
    pytest.param({1, 2}, "$.steps[0].args.x: set values are not allowed", id="set"),
    pytest.param(b"ab", "$.steps[0].args.x: bytes values are not allowed", id="bytes"),
    pytest.param({1: "a"}, "$.steps[0].args.x: keys must be strings", id="int-key"),
    pytest.param(object(), "$.steps[0].args.x: object values are not allowed", id="object"),
    pytest.param(datetime.date(2024, 1, 2), "$.steps[0].args.x: date values", id="date"),
    pytest.param([1, {"y": math.nan}], "$.steps[0].args.x[1].y: NaN", id="nested"),
    pytest.param(_Model(score=math.nan), "$.steps[0].args.x.score: NaN", id="model"),
    pytest.param("\ud800", "$.steps[0].args.x: the string holds a lone surrogate", id="surrogate"),
]


@pytest.mark.parametrize(("value", "message"), _NOT_JSON)
def test_a_plan_object_with_a_value_that_is_not_json_is_a_parse_error(
    value: Any, message: str
) -> None:
    """As for the same plan given as text or Python data: NaN and Infinity no longer reach
    the tool as None, a set or bytes is not converted, an object is no raw Pydantic error."""
    plan = Plan(steps=[Step(id="a", tool="record", args={"x": value})])
    report = planrail.validate(plan)
    assert [i.code for i in report.errors] == ["parse_error"]
    assert message in report.errors[0].message


def test_a_plan_object_is_refused_before_its_tool_is_called() -> None:
    seen: list[Any] = []

    @tool(side_effects="none")
    def record(x: Any = "default") -> str:
        seen.append(x)
        return "ok"

    plan = Plan(steps=[Step(id="a", tool="record", args={"x": math.nan})])
    with pytest.raises(planrail.PlanValidationError, match="parse_error"):
        planrail.run(plan, [record])
    assert seen == []


@pytest.mark.parametrize(
    "field",
    [
        {"output": {"k": math.nan}},
        {"metadata": {"k": {1, 2}}},
    ],
)
def test_every_free_form_field_of_a_plan_object_is_checked(field: dict[str, Any]) -> None:
    plan = Plan(steps=[Step(id="a", tool="t")], **field)
    assert [i.code for i in planrail.validate(plan).errors] == ["parse_error"]


def test_a_step_fallback_and_guard_of_a_plan_object_are_checked() -> None:
    step = Step(id="a", tool="t", when={"eq": [1, math.inf]}, fallback={"value": b"x"})
    report = planrail.validate(Plan(steps=[step]))
    assert [i.code for i in report.errors] == ["parse_error"]


def test_a_plan_object_that_contains_itself_is_refused_not_a_traceback() -> None:
    loop: dict[str, Any] = {}
    loop["again"] = loop
    report = planrail.validate(Plan(steps=[Step(id="a", tool="t", args={"x": loop})]))
    assert [i.code for i in report.errors] == ["limit_exceeded"]


def test_a_json_plan_object_is_valid_as_before() -> None:
    """Tuples (how the model keeps lists) and models with JSON fields are fine."""
    step = Step(
        id="a",
        tool="t",
        args={"pair": (1, 2), "m": _Model(score=1.5), "text": "héllo", "n": 10**30},
        depends_on=(),
        retry={"max_attempts": 2, "retry_on": ["KeyError"]},
    )
    plan = Plan(steps=[step, Step(id="b", tool="t", depends_on=["a"])], output="${a}")
    report = planrail.validate(plan)
    assert report.errors == []
    assert report.plan is not None
    assert report.plan.to_json_data() == plan.to_json_data()
