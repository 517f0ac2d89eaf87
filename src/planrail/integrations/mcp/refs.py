"""The ``$ref`` of an input schema that resolves nowhere, found when the tool is listed.

The validator looks a ``$ref`` up only when it applies it to arguments, so a reference to a
``$defs`` entry that does not exist used to pass validation and approval and fail the call.
:func:`dangling_ref` walks the schema as the validator applies it — from the root, into every
subschema a keyword applies, through every ``$ref`` and ``$dynamicRef`` to its target, each
with the base URI its ``$id`` scopes give it — and looks each reference up in the registry the
validator is given (:data:`REGISTRY`: the schema itself and the JSON Schema meta-schemas;
nothing is ever fetched). A ``$defs`` entry no reference reaches is never applied, so it is
not looked at; a draft-07 (or older) ``$ref`` hides its siblings, as in that draft.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import referencing
import referencing.exceptions
import referencing.jsonschema
from jsonschema_specifications import REGISTRY as _META_SCHEMAS  # type: ignore[import-untyped]

__all__ = ["REGISTRY", "dangling_ref"]

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


def dangling_ref(schema: Any, dialect: str) -> tuple[str, str] | None:
    """The first reference of ``schema`` (applied as the ``dialect`` meta-schema's URI says)
    that resolves nowhere, and why; None when every reference resolves."""
    spec = referencing.jsonschema.specification_with(
        dialect, default=referencing.jsonschema.DRAFT202012
    )
    root = spec.create_resource(schema)
    resolver = _META_SCHEMAS.combine(REGISTRY).resolver_with_root(root)
    todo: list[tuple[Any, Any, bool]] = [(schema, resolver, False)]
    seen: set[int] = set()
    while todo:
        node, resolver, resolved = todo.pop()
        if not isinstance(node, Mapping) or id(node) in seen:
            continue
        seen.add(id(node))
        if not resolved:  # as the validator descends: the node's own $id scopes it
            resolver = resolver.in_subresource(spec.create_resource(node))
        for keyword in _REFS:
            ref = node.get(keyword)
            if not isinstance(ref, str):
                continue
            try:
                target = resolver.lookup(ref)
            except referencing.exceptions.Unresolvable as exc:
                return ref, _why(exc)
            todo.append((target.contents, target.resolver, True))
        if spec in _SIBLINGS_IGNORED and "$ref" in node:
            continue
        defs = {id(d) for k in _DEFS for d in _values(node.get(k))}  # applied only by a $ref
        todo.extend((s, resolver, False) for s in spec.subresources_of(node) if id(s) not in defs)
    return None


def _values(container: Any) -> list[Any]:
    return list(container.values()) if isinstance(container, Mapping) else []


def _why(exc: referencing.exceptions.Unresolvable) -> str:
    if isinstance(exc, referencing.exceptions.PointerToNowhere):
        return f"the schema has nothing at {exc.ref!r}"
    if isinstance(exc, referencing.exceptions.NoSuchAnchor):
        return f"the schema has no anchor {exc.anchor!r}"
    return "not within the schema; planrail never fetches a schema"
