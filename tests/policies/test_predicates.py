"""The predicate language: static checks with paths, evaluation on plain JSON without eval."""

from __future__ import annotations

from typing import Any

import pytest

from planrail.errors import ReferenceResolutionError
from planrail.plan.predicates import (
    PredicateError,
    PredicateSyntaxError,
    check_predicate,
    compile_predicate,
)

OUT = {"a": {"n": 3, "s": "pro", "tags": ["x", "y"], "ok": True, "none": None, "m": {"k": 1}}}


@pytest.mark.parametrize(
    ("pred", "expected"),
    [
        (True, True),
        ("${a.ok}", True),
        ({"eq": ["${a.s}", "pro"]}, True),
        ({"==": ["${a.n}", 3.0]}, True),
        ({"eq": ["${a.ok}", 1]}, False),
        ({"ne": ["${a.none}", None]}, False),
        ({"gt": ["${a.n}", 2]}, True),
        ({"le": ["${a.s}", "abc"]}, False),
        ({"in": ["x", "${a.tags}"]}, True),
        ({"in": ["pr", "${a.s}"]}, True),
        ({"in": ["k", "${a.m}"]}, True),
        ({"contains": ["${a.tags}", "z"]}, False),
        ({"exists": "${a.m.k}"}, True),
        ({"exists": "${a.missing}"}, False),
        ({"exists": "${b.x}"}, False),
        ({"all": [{"exists": "${b.x}"}, {"eq": ["${b.x}", 1]}]}, False),
        ({"any": [{"eq": ["${a.n}", 1]}, {"not": {"eq": ["${a.n}", 1]}}]}, True),
        ({"eq": ["${a.tags}", ["x", "y"]]}, True),
        ({"eq": ["n=${a.n}", "n=3"]}, True),
        # a list is in c when each of its elements is (docs/policies.md)
        ({"in": [["x", "y"], "${a.tags}"]}, True),
        ({"in": [["x", "z"], "${a.tags}"]}, False),
        ({"in": [["k"], "${a.m}"]}, True),
        ({"in": [["pr", "o"], "${a.s}"]}, True),
        ({"in": [[], "${a.tags}"]}, False),
        ({"in": [3, "n=3.0"]}, True),  # a number written there as a number
    ],
)
def test_predicate_evaluation(pred: Any, expected: bool) -> None:
    """Comparison, membership, exists and all/any/not evaluate on plain JSON values."""
    assert compile_predicate(pred).evaluate(OUT) is expected


@pytest.mark.parametrize(
    ("pred", "error"),
    [
        ({"lt": ["${a.s}", 3]}, PredicateError),
        ("${a.n}", PredicateError),
        ({"in": [{"k": 1}, "${a.s}"]}, PredicateError),  # a number in text is looked for
        ({"eq": ["${a.missing}", 1]}, ReferenceResolutionError),
        ({"eq": ["${b.x}", 1]}, ReferenceResolutionError),
    ],
)
def test_predicate_errors_are_never_silently_false(pred: Any, error: type[Exception]) -> None:
    """Type errors and unresolvable references raise; a missing value is never null."""
    with pytest.raises(error):
        compile_predicate(pred).evaluate(OUT)


@pytest.mark.parametrize(
    ("pred", "path"),
    [
        ({"equal": [1, 1]}, ""),
        ({"eq": [1]}, ".eq"),
        ({"all": []}, ".all"),
        ({"all": [True, {"gt": 1}]}, ".all[1].gt"),
        ({"exists": "a.b"}, ".exists"),
        ({"eq": [1, 1], "ne": [1, 2]}, ""),
        ("no reference", ""),
        ({"eq": ["${a.}", 1]}, ".eq[0]"),
        (3, ""),
        ({"not": {"not": {"bogus": 1}}}, ".not.not"),
    ],
)
def test_malformed_predicates_are_reported_with_a_path(pred: Any, path: str) -> None:
    """Unknown operators, wrong arity, bad references: each problem has a path into the JSON."""
    problems = check_predicate(pred)
    assert problems
    assert problems[0][0] == path
    with pytest.raises(PredicateSyntaxError):
        compile_predicate(pred)


def test_predicates_cannot_reach_python_internals() -> None:
    """Operands are data: dunder paths are refused, text like {0.__class__} stays inert."""
    assert check_predicate({"eq": ["${a.__class__}", 1]})
    assert compile_predicate({"eq": ["{0.__class__}", "{0.__class__}"]}).evaluate(OUT)


def test_in_finds_a_number_written_in_text() -> None:
    """``in`` looks for a number in a string as it would be written (``42``, ``42.50``)."""
    pred = compile_predicate({"in": ["${a.n}", "pay 42.50 today"]})
    assert pred.evaluate({"a": {"n": 42.5}})
    assert not pred.evaluate({"a": {"n": 2.5}})
