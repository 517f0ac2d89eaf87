"""Arguments compiled once per step, filled many times: the executor's hot path.

``compile_value(args)`` parses every template in ``args`` a single time and returns a function
that builds a fresh copy of ``args`` with the references filled from a mapping of outputs.
Behaviour is exactly :func:`planrail.plan.refs.resolve_value`'s; only the parsing moves out of
the loop.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from planrail.plan.refs import copy_json, parse_template, resolve_path

__all__ = ["Filler", "compile_value"]

Filler = Callable[[Mapping[str, Any]], Any]


def compile_value(value: Any) -> Filler:
    """A function ``outputs -> value with references filled`` (fresh containers every call)."""
    if isinstance(value, str):
        if "$" not in value:
            return lambda _o, v=value: v
        t = parse_template(value)
        single = t.single
        if single is not None:
            return lambda o, r=single: copy_json(resolve_path(o, r))
        return t.render
    if isinstance(value, dict):
        if not _has_dollar(value):
            return lambda _o, v=value: copy_json(v)
        parts = [(k, compile_value(v)) for k, v in value.items()]
        return lambda o: {k: f(o) for k, f in parts}
    if isinstance(value, list):
        if not _has_dollar(value):
            return lambda _o, v=value: copy_json(v)
        items = [compile_value(v) for v in value]
        return lambda o: [f(o) for f in items]
    return lambda _o, v=value: v


def _has_dollar(value: Any) -> bool:
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            if "$" in v:
                return True
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return False
