"""The ``$ref`` of an input schema that cannot be applied, found when the tool is listed.

The validator looks a ``$ref`` up only when it applies it to arguments, so a reference to a
``$defs`` entry that does not exist used to pass validation and approval and fail the call.
:func:`ref_problem` walks the schema as the validator applies it — from the root, into every
subschema a keyword applies, through every ``$ref`` and ``$dynamicRef`` to its target, each
with the base URI its ``$id`` scopes give it — and looks each reference up in the registry the
validator is given (:data:`REGISTRY`: the schema itself and the JSON Schema meta-schemas;
nothing is ever fetched). A ``$defs`` entry no reference reaches is never applied, so it is
not looked at; a draft-07 (or older) ``$ref`` hides its siblings, as in that draft.

A ``$ref`` that leads back to itself with nothing of the arguments checked on the way
(``{"$defs": {"a": {"$ref": "#/$defs/a"}}}``, or through ``allOf``) would have the validator
recurse until Python stops it, at every call: it is refused at listing too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import referencing
import referencing.exceptions
import referencing.jsonschema
from jsonschema_specifications import REGISTRY as _META_SCHEMAS  # type: ignore[import-untyped]

__all__ = ["REGISTRY", "ref_problem"]

REGISTRY: referencing.jsonschema.SchemaRegistry = referencing.Registry()
"""The validators' registry: no retrieval, so a remote ``$ref`` is never fetched (the
validator's default fetches one over the network, with a deprecation warning); the
meta-schemas are added by the validator, as :data:`_META_SCHEMAS` here."""

_REFS = ("$ref", "$dynamicRef")
_DEFS = ("$defs", "definitions")
_SIBLINGS_IGNORED = {
    referencing.jsonschema.DRAFT7,
    referencing.jsonschema.DRAFT6,
    referencing.jsonschema.DRAFT4,
    referencing.jsonschema.DRAFT3,
}


def ref_problem(schema: Any, dialect: str) -> tuple[str, str] | None:
    """The first reference of ``schema`` (applied as the ``dialect`` meta-schema's URI says)
    that cannot be applied, and what is wrong with it (``"resolves nowhere (…)"``, ``"leads
    back to itself …"``); None when every reference can be applied."""
    spec = referencing.jsonschema.specification_with(
        dialect, default=referencing.jsonschema.DRAFT202012
    )
    root = spec.create_resource(schema)
    resolver = _META_SCHEMAS.combine(REGISTRY).resolver_with_root(root)
    todo: list[tuple[Any, Any, bool]] = [(schema, resolver, False)]
    # per applied schema (by id): what is applied to the same instance, and the $ref that
    # leads there (None: a subschema of an _IN_PLACE keyword)
    in_place: dict[int, list[tuple[int, str | None]]] = {}
    while todo:
        node, resolver, resolved = todo.pop()
        if not isinstance(node, Mapping) or id(node) in in_place:
            continue
        same = in_place[id(node)] = []
        if not resolved:  # as the validator descends: the node's own $id scopes it
            resolver = resolver.in_subresource(spec.create_resource(node))
        for keyword in _REFS:
            ref = node.get(keyword)
            if not isinstance(ref, str):
                continue
            try:
                target = resolver.lookup(ref)
            except referencing.exceptions.Unresolvable as exc:
                return ref, f"resolves nowhere ({_why(exc)})"
            todo.append((target.contents, target.resolver, True))
            if keyword == "$ref":
                same.append((id(target.contents), ref))
        if spec in _SIBLINGS_IGNORED and "$ref" in node:
            continue
        for keyword in _IN_PLACE:
            value = node.get(keyword)
            subs = value if isinstance(value, list) else [value]
            same.extend((id(sub), None) for sub in subs if isinstance(sub, Mapping))
        defs = {id(d) for k in _DEFS for d in _values(node.get(k))}  # applied only by a $ref
        todo.extend((s, resolver, False) for s in spec.subresources_of(node) if id(s) not in defs)
    loop = _ref_loop(in_place)
    if loop is not None:
        return loop, (
            "leads back to itself before any part of the arguments is checked: applying it"
            " would never end"
        )
    return None


_IN_PLACE = ("allOf", "not", "if")
"""Keywords that apply their subschemas to the same instance, always (``anyOf`` and
``oneOf`` may stop early, ``then``/``else`` depend on the instance: a loop through them might
end, so it is left to the call)."""


def _ref_loop(in_place: dict[int, list[tuple[int, str | None]]]) -> str | None:
    """A ``$ref`` that leads, through ``$ref`` s and :data:`_IN_PLACE` keywords only, back to a
    schema on its own way: the validator would apply it to the same instance for ever (a
    schema reached through ``properties``, ``items``… checks a smaller part: that recursion
    ends). Iterative depth-first search over every applied schema; None when there is none."""
    state: dict[int, bool] = {}  # False: on the current path; True: done
    for start in in_place:
        if start in state:
            continue
        state[start] = False
        # (schema, the $ref that led to it, what is left of what it applies in place)
        path: list[tuple[int, str | None, list[tuple[int, str | None]]]] = [
            (start, None, list(in_place[start]))
        ]
        while path:
            node, _, children = path[-1]
            if not children:
                state[node] = True
                path.pop()
                continue
            child, ref = children.pop()
            seen = state.get(child)
            if seen is False:  # back on the path: a loop, and a loop holds a $ref
                at = next(i for i, frame in enumerate(path) if frame[0] == child)
                return ref or next(r for _, r, _ in reversed(path[at + 1 :]) if r is not None)
            if seen is None and child in in_place:
                state[child] = False
                path.append((child, ref, list(in_place[child])))
    return None


def _values(container: Any) -> list[Any]:
    return list(container.values()) if isinstance(container, Mapping) else []


def _why(exc: referencing.exceptions.Unresolvable) -> str:
    if isinstance(exc, referencing.exceptions.PointerToNowhere):
        return f"the schema has nothing at {exc.ref!r}"
    if isinstance(exc, referencing.exceptions.NoSuchAnchor):
        return f"the schema has no anchor {exc.anchor!r}"
    return "not within the schema; planrail never fetches a schema"
