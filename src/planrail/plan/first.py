"""First-available values: ``{"$first": ["${a.x}", "${b.x}", "default"]}``.

Anywhere a step holds JSON with references (``args``, ``fallback``, predicate operands), an
object whose only key is ``$first`` stands for the first of its candidates whose referenced
steps all have a recorded output. A failed, skipped or cancelled producer has none, so its
candidate is passed over — it never yields ``null``. A candidate without references is always
available (a default). When no candidate is available the step fails with a
:class:`~planrail.errors.ReferenceResolutionError` naming the producers it tried.

Candidates are only passed over for a *missing producer*; a producer that succeeded but lacks
the referenced field is an error, as everywhere else. Use ``$first`` in a step whose ``join``
lets it run with some dependencies unfinished (``any_succeeded`` or ``all_finished``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from planrail.errors import ReferenceResolutionError
from planrail.plan.fill import Filler, compile_value
from planrail.plan.refs import Parse, parse_template
from planrail.plan.resolve import FIRST

__all__ = [
    "FIRST",
    "MAX_CANDIDATES",
    "compile_args",
    "fill_first",
    "first_problems",
    "is_first",
]

MAX_CANDIDATES = 16
"""Most candidates in one ``$first``."""


def is_first(value: Any) -> bool:
    """Whether ``value`` is a ``{"$first": ...}`` object (well-formed or not)."""
    return type(value) is dict and FIRST in value


def first_problems(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """``(path, message)`` for every malformed ``$first`` object inside ``value``."""
    stack: list[tuple[str, Any]] = [(path, value)]
    while stack:
        p, v = stack.pop()
        if type(v) is dict:
            if FIRST in v:
                problem = _shape_problem(v)
                if problem:
                    yield p, problem
                    continue
            stack.extend((f"{p}.{k}" if k != FIRST else f'{p}["$first"]', x) for k, x in v.items())
        elif type(v) is list:
            stack.extend((f"{p}[{i}]", x) for i, x in enumerate(v))


def _shape_problem(v: dict[str, Any]) -> str | None:
    if len(v) != 1:
        return f"a {FIRST} object has no other keys (found {', '.join(sorted(v))})"
    cands = v[FIRST]
    if type(cands) is not list or not cands:
        return f'{FIRST} takes a non-empty list of candidates, such as ["${{a.x}}", "${{b.x}}"]'
    if len(cands) > MAX_CANDIDATES:
        return f"{FIRST} has {len(cands)} candidates; the limit is {MAX_CANDIDATES}"
    return None


def compile_args(value: Any, parse: Parse = parse_template) -> Filler:
    """Like :func:`~planrail.plan.fill.compile_value`, also resolving ``$first`` objects.

    Raises ``ValueError`` for a malformed ``$first`` (the validator reports those first).
    """
    if not has_first(value):
        return compile_value(value, parse)
    if type(value) is dict and FIRST in value:
        problem = _shape_problem(value)
        if problem:
            raise ValueError(problem)
        candidates = [(compile_args(c, parse), _steps_of(c, parse)) for c in value[FIRST]]

        def first(outputs: Mapping[str, Any]) -> Any:
            absent: list[str] = []
            for fill, steps in candidates:
                missing = [s for s in steps if s not in outputs]
                if not missing:
                    return fill(outputs)
                absent.extend(s for s in missing if s not in absent)
            raise ReferenceResolutionError(
                f"{FIRST}: no candidate is available (no output from"
                f" {', '.join(repr(s) for s in absent)})"
            )

        return first
    if type(value) is dict:
        parts = [(k, compile_args(v, parse)) for k, v in value.items()]
        return lambda o: {k: f(o) for k, f in parts}
    items = [compile_args(v, parse) for v in value]
    return lambda o: [f(o) for f in items]


def fill_first(
    value: dict[str, Any], outputs: Mapping[str, Any], parse: Parse = parse_template
) -> Any:
    """The value of one ``{"$first": ...}`` object: ``resolve_value``'s ``on_first`` hook."""
    return compile_args(value, parse)(outputs)


_WALKED = frozenset((dict, list))
"""The containers :func:`has_first` walks into (exact types)."""


def has_first(value: Any) -> bool:
    """Whether ``value`` holds a ``$first`` object anywhere."""
    if type(value) is dict:
        if FIRST in value:
            return True
        # the usual arguments: scalars, and lists of them (nothing to walk)
        for v in value.values():
            kind = type(v)
            if kind is dict or (kind is list and not _WALKED.isdisjoint(map(type, v))):
                break
        else:
            return False
    stack = [value]
    while stack:
        v = stack.pop()
        if type(v) is dict:
            if FIRST in v:
                return True
            stack.extend(v.values())
        elif type(v) is list:
            stack.extend(v)
    return False


def _steps_of(value: Any, parse: Parse) -> frozenset[str]:
    """The steps a candidate references directly (not inside a nested ``$first``)."""
    steps: set[str] = set()
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            if "$" in v:
                steps.update(r.step for r in parse(v).references)
        elif type(v) is dict:
            if FIRST not in v:
                stack.extend(v.values())
        elif type(v) is list:
            stack.extend(v)
    return frozenset(steps)
