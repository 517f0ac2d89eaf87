"""Arguments filled from real outputs: a copy of a value with every ``${...}`` reference in it
filled (:func:`resolve_value`), sharing no container with the value or the outputs
(:func:`copy_json`), so that a tool that mutates its arguments cannot change another step's
inputs. The grammar and the parser are :mod:`planrail.plan.refs`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from planrail.plan.refs import NON_TEXT_SCALARS, Parse, Template, parse_template, resolve_path

__all__ = ["FIRST", "copy_json", "resolve_value"]

FIRST = "$first"
"""The key of a first-available object (:mod:`planrail.plan.first`)."""


def resolve_value(
    value: Any,
    outputs: Mapping[str, Any],
    on_first: Callable[[dict[str, Any], Mapping[str, Any]], Any] | None = None,
    parse: Parse = parse_template,
) -> Any:
    """A copy of ``value`` (args, an output mapping) with every reference filled in.

    The result shares no containers with ``value`` or ``outputs``: a tool that mutates its
    arguments cannot change another step's inputs. With ``on_first``, a ``{"$first": ...}``
    object is replaced by ``on_first(that object, outputs)`` (see :mod:`planrail.plan.first`);
    without it, such an object is filled like any other. ``parse`` gives the parsed form of
    each string (a compiled plan's ``template``).
    """
    kind = type(value)  # exact types first: plan data is plain JSON almost always
    if kind is str:
        return _fill_text(parse(value), outputs) if "$" in value else value
    if kind in NON_TEXT_SCALARS:
        return value
    if kind is dict or (kind is not list and isinstance(value, dict)):
        if on_first is not None and FIRST in value:
            return on_first(value, outputs)
        out = {}
        for k, v in value.items():  # leaves here: one call per container, not per value
            leaf = type(v)
            if leaf is str:
                out[k] = _fill_text(parse(v), outputs) if "$" in v else v
            elif leaf in NON_TEXT_SCALARS:
                out[k] = v
            else:
                out[k] = resolve_value(v, outputs, on_first, parse)
        return out
    if kind is list or isinstance(value, list):
        items = []  # the dict's leaves again: one loop over (key, value) pairs serving both
        for v in value:  # measured 1% more of a run's instructions (an index list, enumerate)
            leaf = type(v)
            if leaf is str:
                items.append(_fill_text(parse(v), outputs) if "$" in v else v)
            elif leaf in NON_TEXT_SCALARS:
                items.append(v)
            else:
                items.append(resolve_value(v, outputs, on_first, parse))
        return items
    if isinstance(value, str):  # a str subclass: filled as the plain string it holds
        return resolve_value(str(value), outputs, on_first, parse)
    return value


def _fill_text(t: Template, outputs: Mapping[str, Any]) -> Any:
    if t.single is None:
        return t.render(outputs)
    found = resolve_path(outputs, t.single)
    kind = type(found)
    return copy_json(found) if kind is dict or kind is list else found


def copy_json(value: Any, on_string: Callable[[str], Any] | None = None) -> Any:
    """A deep copy of plain JSON data (dicts and lists are copied; scalars are immutable).

    With ``on_string``, every string is replaced by ``on_string(string)`` and tuples are
    copied as lists too (how secrets are scrubbed from what a run records). Deeply nested data
    cannot exhaust the stack: past a few dozen levels the copy goes on iteratively.
    """
    kind = type(value)
    if on_string is None:
        return _copy(value, _RECURSIVE_DEPTH) if kind is dict or kind is list else value
    if kind is str:
        return on_string(value)
    return _copy_iter(value, on_string) if kind in _WITH_TUPLES else value


_RECURSIVE_DEPTH = 32
"""Levels copied by recursion (several times faster than the explicit stack on small data)."""
_WITH_TUPLES = frozenset((dict, list, tuple))


def _copy(value: Any, depth: int) -> Any:
    if depth == 0:
        return _copy_iter(value, None)
    out = value.copy()  # scalars are shared (immutable); nested containers are replaced below
    pairs = value.items() if type(value) is dict else enumerate(value)
    for k, v in pairs:
        if type(v) in _CONTAINERS:
            out[k] = _copy(v, depth - 1)
    return out


_CONTAINERS = frozenset((dict, list))


def _copy_iter(value: Any, on_string: Callable[[str], Any] | None) -> Any:
    """The explicit-stack copy: any depth, and the ``on_string`` rewrite."""
    containers = _CONTAINERS if on_string is None else _WITH_TUPLES
    root: Any = {} if type(value) is dict else []
    stack: list[tuple[Any, Any]] = [(value, root)]
    while stack:
        src, dst = stack.pop()
        items = src.items() if type(src) is dict else enumerate(src)
        for k, v in items:
            vk = type(v)
            if vk is str:
                if on_string is not None:
                    v = on_string(v)
            elif vk in containers:
                child: Any = {} if vk is dict else []
                stack.append((v, child))
                v = child
            if type(dst) is dict:
                dst[k] = v
            else:
                dst.append(v)
    return root
