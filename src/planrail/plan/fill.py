"""Arguments compiled once per step, filled many times: the executor's hot path.

``compile_value(args, parse)`` takes the parsed form of every template in ``args`` once (from
``parse``: a compiled plan's ``template``) and returns a function that builds a fresh copy of
``args`` with the references filled from a mapping of outputs. Behaviour is exactly
:func:`planrail.plan.resolve.resolve_value`'s; only the lookups move out of the loop.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from planrail.plan.refs import Parse, Reference, parse_template, resolve_path
from planrail.plan.resolve import copy_json

__all__ = ["Filler", "compile_value"]

Filler = Callable[[Mapping[str, Any]], Any]


def compile_value(value: Any, parse: Parse = parse_template) -> Filler:
    """A function ``outputs -> value with references filled`` (fresh containers every call)."""
    if isinstance(value, str) and "$" in value:
        template = parse(value)
        single = template.single
        return _single(single) if single is not None else template.render
    if isinstance(value, dict) and _has_dollar(value):
        parts = [(k, compile_value(v, parse)) for k, v in value.items()]

        def fill_dict(outputs: Mapping[str, Any]) -> Any:
            return {k: f(outputs) for k, f in parts}

        return fill_dict
    if isinstance(value, list) and _has_dollar(value):
        items = [compile_value(v, parse) for v in value]

        def fill_list(outputs: Mapping[str, Any]) -> Any:
            return [f(outputs) for f in items]

        return fill_list
    return _constant(value)


def _single(ref: Reference) -> Filler:
    def fill(outputs: Mapping[str, Any]) -> Any:
        return copy_json(resolve_path(outputs, ref))

    return fill


def _constant(value: Any) -> Filler:
    if isinstance(value, dict | list):

        def copy(_outputs: Mapping[str, Any]) -> Any:
            return copy_json(value)

        return copy

    def same(_outputs: Mapping[str, Any]) -> Any:
        return value

    return same


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
