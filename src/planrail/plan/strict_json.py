"""Strict JSON for tool outputs: what a step hands its dependents and the store must be JSON.

A tool's return value is walked once before it is converted (:func:`odd_value`). What strict
JSON cannot hold fails the step with an :class:`~planrail.errors.OutputError` naming the place
(``$.score``, ``$.rows[3]``), so it never becomes ``null`` for a dependent and never reaches the
store:

- ``NaN``, ``Infinity`` and ``-Infinity`` (JSON has no such numbers);
- ``bytes``, ``bytearray`` and ``memoryview`` (no encoding is implied);
- ``set`` and ``frozenset`` (no order: the stored list would differ from run to run);
- a mapping key that is not a string;
- text holding a lone surrogate (``"\\ud800"``: not Unicode, so no UTF-8 store takes it);
- a container that contains itself (a cycle).

What pydantic converts the documented way passes on to it: ``datetime``/``date``/``time`` (ISO
8601 text), ``Decimal`` and ``UUID`` (text), tuples (lists), pydantic models and dataclasses
(objects), enums (their value). Integers of any size are kept exactly. Anything else (an
arbitrary object) fails as a value that does not fit its return type. See ``docs/execution.md``.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections import Counter
from typing import Any, NamedTuple

import pydantic

from planrail._json import escape_surrogates, lone_surrogate

__all__ = [
    "CONTROL_CHARACTERS",
    "RepeatedKey",
    "escape_surrogates",
    "loads_noting_repeats",
    "lone_surrogate",
    "odd_value",
    "path_of",
    "surrogate_problem",
]

_PLAIN = (int, bool, type(None))
_MAX_DEPTH = 200
CONTROL_CHARACTERS = "\x00-\x1f\x7f-\x9f"
"""The control characters, as the body of a regex character class: C0 (newline and tab
included), DEL and C1. Text that reaches a terminal shows them as escapes
(``planrail.cli.printable``); a run id may not hold them (``engine.executor``)."""


def surrogate_problem(text: str) -> str | None:
    """What is wrong with ``text`` as Unicode (``holds a lone surrogate ('\\ud800'), ...``), or
    None when nothing is."""
    found = lone_surrogate(text)
    return None if found is None else f"holds a lone surrogate ({found!a}), not Unicode text"


def path_of(parent: str, key: Any) -> str:
    """The JSONPath-like place of ``key`` under ``parent``: ``$.a``, ``$[2]``, ``$['a b']``."""
    if isinstance(key, int) and not isinstance(key, bool):
        return f"{parent}[{key}]"
    text = str(key)
    if text.isidentifier():
        return f"{parent}.{text}"
    return f"{parent}[{text!r}]"


class RepeatedKey(NamedTuple):
    """A key written more than once in one JSON object (only its last value is read)."""

    where: str
    """The JSONPath of the object (``$.steps[1]``)."""
    key: str

    @property
    def path(self) -> str:
        """The JSONPath of the key (``$.steps[1].args``)."""
        return path_of(self.where, self.key)


def loads_noting_repeats(text: str, *, strict: bool = True) -> tuple[Any, list[RepeatedKey]]:
    """``json.loads(text)`` and each key written more than once in one object, object by
    object in the order the objects open in the text (an object's own repeats before those of
    the objects inside it). ``json`` keeps a repeated key's last value
    silently; plan files and model answers refuse it (which value was meant is not ours to
    guess). ``strict=False`` reads raw control characters inside strings as themselves.
    An object that was itself a repeated key's overwritten value is not in the data: not
    reported."""
    flagged: dict[int, list[str]] = {}
    kept: list[dict[str, Any]] = []  # holds each flagged object, so its id stays its own

    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if len(obj) != len(pairs):
            counts = Counter(k for k, _ in pairs)
            flagged[id(obj)] = [k for k, n in counts.items() if n > 1]
            kept.append(obj)
        return obj

    data = json.loads(text, strict=strict, object_pairs_hook=pairs_hook)
    if not flagged:
        return data, []
    found: list[RepeatedKey] = []
    stack: list[tuple[str, Any]] = [("$", data)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, dict):
            found.extend(RepeatedKey(where, k) for k in flagged.get(id(value), ()))
            children: list[tuple[str, Any]] = [(path_of(where, k), v) for k, v in value.items()]
        elif isinstance(value, list):
            children = [(path_of(where, i), v) for i, v in enumerate(value)]
        else:
            continue
        stack.extend(c for c in reversed(children) if isinstance(c[1], dict | list))
    return data, found


def odd_value(value: Any, root: str = "$") -> str | None:
    """Where ``value`` holds something strict JSON cannot, and what: ``"$.score: NaN is not a
    JSON number"``; None when there is nothing odd in it."""
    if type(value) in _PLAIN:  # the common case, at no cost
        return None
    return _walk(value, root, set(), 0)


def _walk(value: Any, path: str, seen: set[int], depth: int) -> str | None:
    kind = type(value)
    if kind in _PLAIN:
        return None
    if isinstance(value, str):
        problem = surrogate_problem(value)
        return None if problem is None else f"{path}: the string {problem}"
    if kind is float:
        return None if math.isfinite(value) else f"{path}: {_number(value)} is not a JSON number"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return f"{path}: {kind.__name__} is not JSON (decode it to text first)"
    if isinstance(value, (set, frozenset)):
        return f"{path}: a {kind.__name__} has no order (return a sorted list)"
    if isinstance(value, float):  # a float subclass
        return None if math.isfinite(value) else f"{path}: {_number(value)} is not a JSON number"
    if depth > _MAX_DEPTH:
        return f"{path}: nested more than {_MAX_DEPTH} levels deep"
    if isinstance(value, dict):
        children: Any = value.items()
        for key, _ in list(children):
            if not isinstance(key, str):
                return f"{path}: the key {key!r} is a {type(key).__name__}, not a string"
            if (problem := surrogate_problem(key)) is not None:
                return f"{path}: the key {key!a} {problem}"
    elif isinstance(value, (list, tuple)):
        children = enumerate(value)
    elif isinstance(value, pydantic.BaseModel):
        children = value.__dict__.items()
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        children = ((f.name, getattr(value, f.name)) for f in dataclasses.fields(value))
    else:
        return None  # pydantic converts it (datetime, Decimal, ...) or refuses it
    ident = id(value)
    if ident in seen:
        return f"{path}: the value contains itself (a cycle)"
    seen.add(ident)
    for key, child in children:
        if type(child) in _PLAIN or (type(child) is str and child.isascii()):
            continue
        found = _walk(child, path_of(path, key), seen, depth + 1)
        if found is not None:
            return found
    seen.discard(ident)
    return None


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"
