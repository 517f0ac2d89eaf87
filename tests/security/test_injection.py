"""An injection corpus against the reference grammar and resolver: every entry is either
rejected by the validator or treated as inert text, and a sentinel object whose attribute access
fails the test is never touched while references are resolved around it."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from planrail.errors import PlanrailError, ReferenceResolutionError, ReferenceSyntaxError
from planrail.plan.define import tool
from planrail.plan.first import compile_args
from planrail.plan.predicates import compile_predicate
from planrail.plan.refs import parse_template
from planrail.plan.resolve import resolve_value
from planrail.plan.tools import ToolRegistry
from planrail.plan.validate import validate

from .kit import run

SEGMENTS_10K = "${s1" + ".a" * 10_000 + "}"

CORPUS: list[str] = [
    # Python format-string traversal: no "$", so plain text
    "{0.__class__}",
    "{0.__class__.__mro__[1].__subclasses__()}",
    "{s1.__init__.__globals__[os]}",
    "%(s1)s and %s",
    "{!r:>{0.__class__}}",
    # dunders and attribute-style traversal inside references
    "${s1.__class__}",
    "${s1.__init__.__globals__}",
    "${s1.a.__class__.__base__}",
    "${__import__}",
    "${s1.__dict__}",
    "${s1.a.__len__}",
    # templates of other engines
    "{{ s1.__class__ }}",
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{% for x in ().__class__.__base__.__subclasses__() %}{{ x }}{% endfor %}",
    "#{s1}",
    "$(s1)",
    "`id`",
    # negative, huge and odd indexes
    "${s1.items.-1}",
    "${s1[-1]}",
    "${s1.items.01}",
    "${s1.items.99999999999}",
    "${s1[1:2]}",
    "${s1.items[0x10]}",
    # nesting and unterminated
    "${${s1}}",
    "${s1.${s1}}",
    "${s1[${s1}]}",
    "${",
    "${s1",
    "${s1.}",
    "${s1..a}",
    "${}",
    "${ s1 }",
    "$${s1.__class__}",
    "$$${s1.a}",
    # look-alike unicode: fullwidth, Cyrillic, zero-width, combining marks, RTL override
    "${ｓ1.a}",
    "${s1.ａ}",
    "${ѕ1.a}",
    "${s1.__сlass__}",
    "${s1\u200b.a}",
    "${s1.a\u0301}",
    "${s1.\u202ea}",
    "＄｛s1.a｝",
    # quoted keys are JSON keys only, never attributes
    '${s1["__class__"]}',
    "${s1['__globals__']}",
    '${s1["a"]["__init__"]}',
    # long paths
    SEGMENTS_10K,
    "${s1" + "[0]" * 5_000 + "}",
    "${" + "a" * 5_000 + "}",
]


class Sentinel:
    """Fails the test the moment anything looks inside it."""

    touched = 0

    def __getattribute__(self, name: str) -> Any:
        type(self).touched += 1
        raise AssertionError(f"the sentinel was touched: .{name}")

    def __getattr__(self, name: str) -> Any:
        type(self).touched += 1
        raise AssertionError(f"the sentinel was touched: .{name}")


def _plan(value: str) -> dict[str, Any]:
    return {
        "steps": [
            {"id": "s1", "tool": "source", "args": {}},
            {"id": "s2", "tool": "sink", "args": {"text": value}, "depends_on": ["s1"]},
        ]
    }


def _tools(received: list[Any]) -> ToolRegistry:
    @tool(side_effects="none")
    def source() -> dict[str, Any]:
        return {"a": "A", "items": [1, 2, 3]}

    @tool(side_effects="none")
    def sink(text: Any) -> str:
        received.append(text)
        return "ok"

    return ToolRegistry([source, sink])


@pytest.mark.parametrize("value", CORPUS, ids=lambda v: repr(v[:40]))
async def test_injection_is_rejected_or_inert(value: str) -> None:
    """Each entry is refused by the validator with ``invalid_reference`` (one short issue),
    or it is valid and the tool receives text made only of the literal characters and JSON
    values — never anything reached through Python attributes."""
    received: list[Any] = []
    reg = _tools(received)
    report = validate(_plan(value), reg)
    if not report.valid:
        assert {i.code for i in report.errors} <= {"invalid_reference", "unknown_step_reference"}
        assert all(len(i.message) < 600 for i in report.errors)
        return
    assert report.plan is not None
    result = await run(report.plan, reg)
    if result.steps["s2"].status != "succeeded":  # a valid path that is not in the output
        err = result.steps["s2"].error or {}
        assert err["type"] == "ReferenceResolutionError", err
        return
    (text,) = received
    expected = "".join(
        p
        if isinstance(p, str)
        else str(resolve_value(str(p), {"s1": {"a": "A", "items": [1, 2, 3]}}))
        for p in parse_template(value).parts
    )
    assert text == expected
    assert "class" not in text or "class" in value


@pytest.mark.parametrize("value", CORPUS, ids=lambda v: repr(v[:40]))
def test_the_sentinel_is_never_touched(value: str) -> None:
    """Resolving any corpus entry against outputs holding a sentinel (as a whole output, as a
    field, inside a list) raises a planrail error or gives text, and never looks at it."""
    Sentinel.touched = 0
    try:
        fill = compile_args({"text": value})
    except (ReferenceSyntaxError, ValueError):
        return
    for outputs in (
        {"s1": Sentinel()},
        {"s1": {"a": Sentinel(), "items": [Sentinel()], "__class__": Sentinel()}},
        {"s1": [Sentinel()]},
    ):
        with contextlib.suppress(ReferenceResolutionError):
            fill(outputs)
        assert Sentinel.touched == 0, value


def test_predicates_never_touch_the_sentinel() -> None:
    """Comparisons, membership and ``exists`` over a sentinel fail cleanly, untouched."""
    Sentinel.touched = 0
    outputs = {"s1": {"a": Sentinel()}, "s2": Sentinel()}
    for pred in (
        {"eq": ["${s1.a}", 1]},
        {"in": ["x", "${s2}"]},
        {"exists": "${s1.a.b}"},
        {"gt": ["${s1.a}", 1]},
        "${s2}",
        {"not": {"eq": ["${s1}", {"a": 1}]}},
    ):
        with contextlib.suppress(PlanrailError):
            compile_predicate(pred).evaluate(outputs)
        assert Sentinel.touched == 0, pred


async def test_a_tool_returning_a_foreign_object_fails_without_touching_it() -> None:
    """A tool that returns a non-JSON object fails its step and downstream references never
    see it. (Pydantic's serializer does look at the object while refusing it: that is the
    tool's own return value, inside the tool's trust boundary, not data a reference reached.)"""
    Sentinel.touched = 0

    @tool(side_effects="none")
    def evil() -> Any:
        return {"a": Sentinel()}

    received: list[Any] = []
    reg = ToolRegistry([evil, *_tools(received)])
    data = {
        "steps": [
            {"id": "s1", "tool": "evil"},
            {"id": "s2", "tool": "sink", "args": {"text": "${s1.a}"}, "depends_on": ["s1"]},
        ]
    }
    result = await run(validate(data, reg).raise_for_errors(), reg)
    assert result.steps["s1"].status == "failed"
    assert result.steps["s2"].status == "skipped"
    assert received == []
