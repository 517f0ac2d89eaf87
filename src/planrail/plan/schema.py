"""The small part of JSON Schema the validator needs: types, local ``$ref``, paths, literals.

A schema is never executed; it is only read. Unknown keywords are ignored, which errs on the
side of accepting (the tool's own input validation still runs at call time).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

__all__ = [
    "ANY",
    "check_literal",
    "child_schema",
    "deref",
    "json_type",
    "literal_fits",
    "schema_types",
    "types_compatible",
]

Schema = dict[str, Any]
ANY: frozenset[str] | None = None
"""``schema_types`` returns ``None`` when a schema accepts any type."""

_ALL_TYPES = frozenset({"object", "array", "string", "integer", "number", "boolean", "null"})
_ONE = {t: frozenset({t}) for t in _ALL_TYPES}
"""One frozenset per type name, shared (``schema_types`` answers one type most of the time)."""


def deref(schema: Any, root: Schema | None) -> Schema:
    """Follow local ``$ref`` pointers (``#/$defs/X``, ``#/definitions/X``) to the real schema."""
    seen = 0
    while isinstance(schema, dict) and "$ref" in schema and root is not None and seen < 32:
        ref = schema["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#/"):
            return {}
        target: Any = root
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, dict) or part not in target:
                return {}
            target = target[part]
        schema = target
        seen += 1
    return schema if isinstance(schema, dict) else {}


def _alternatives(schema: Schema, root: Schema | None) -> list[Schema] | None:
    for key in ("anyOf", "oneOf"):
        alts = schema.get(key)
        if isinstance(alts, list) and alts:
            return [deref(a, root) for a in alts]
    return None


def schema_types(
    schema: Any, root: Schema | None = None, _within: frozenset[int] = frozenset()
) -> frozenset[str] | None:
    """The JSON types a schema admits, or ``None`` for any type. An alternative that leads
    back to a schema being read (``{"anyOf": [{"$ref": "#/$defs/a"}, …]}`` inside ``a``)
    admits nothing the others do not."""
    if type(schema) is dict:  # the usual {"type": "string", ...}: no lookups beyond its type
        t = schema.get("type")
        if (
            type(t) is str
            and "$ref" not in schema
            and "anyOf" not in schema
            and "oneOf" not in schema
            and "const" not in schema
            and "enum" not in schema
        ):
            return _ONE.get(t)
    schema = deref(schema, root)
    if id(schema) in _within:
        return frozenset()
    alts = _alternatives(schema, root)
    if alts is not None:
        found: set[str] = set()
        within = _within | {id(schema)}
        for alt in alts:
            t = schema_types(alt, root, within)
            if t is None:
                return None
            found |= t
        return frozenset(found)
    if "const" in schema:
        return frozenset({json_type(schema["const"])})
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return frozenset(json_type(v) for v in schema["enum"])
    t = schema.get("type")
    if isinstance(t, str) and t in _ALL_TYPES:
        return _ONE[t]
    if isinstance(t, list):
        ts = frozenset(x for x in t if isinstance(x, str) and x in _ALL_TYPES)
        return ts or None
    return None


_KINDS = {
    bool: "a boolean",
    int: "a number",
    float: "a number",
    str: "a string",
    list: "a list",
    dict: "an object",
}


def json_kind(value: Any) -> str:
    """What a value is, in words for a message: ``null``, ``a number``, ``a list``…"""
    if value is None:
        return "null"
    return _KINDS.get(type(value), f"a {type(value).__name__}")


def json_type(value: Any) -> str:
    """The JSON Schema type name of a plain Python value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def types_compatible(produced: frozenset[str] | None, accepted: frozenset[str] | None) -> bool:
    """Whether a value of one of ``produced`` types may be one of ``accepted`` types."""
    if produced is None or accepted is None or not produced.isdisjoint(accepted):
        return True
    widened = set(produced)
    if "integer" in widened:
        widened.add("number")
    if "number" in widened:
        widened.add("integer")  # a number may hold an integral value
    return bool(widened & accepted)


def child_schema(
    schema: Any, root: Schema | None, seg: str | int, _within: frozenset[int] = frozenset()
) -> tuple[str, Any]:
    """Walk one reference segment into a schema.

    Returns ``("ok", subschema)``, ``("unknown", None)`` when the schema does not say (the rest of
    the path is unchecked), or ``("missing", detail)`` when the schema rules the segment out.
    Declared ``properties`` are the complete set of fields unless ``additionalProperties`` says
    otherwise. An alternative leading back to a schema being walked adds nothing.
    """
    schema = deref(schema, root)
    if id(schema) in _within:
        return "missing", None
    alts = _alternatives(schema, root)
    if alts is not None:
        details = []
        within = _within | {id(schema)}
        for alt in alts:
            if schema_types(alt, root) == frozenset({"null"}):
                continue
            status, sub = child_schema(alt, root, seg, within)
            if status != "missing":
                return status, sub
            if sub is not None:  # None: the alternative led back (it adds nothing)
                details.append(sub)
        return "missing", details[0] if details else "no alternative has it"
    types = schema_types(schema, root)
    if isinstance(seg, int):
        if types is not None and "array" not in types and "object" not in types:
            return "missing", f"a {'/'.join(sorted(types))} has no index {seg}"
        if "items" in schema:
            items = schema["items"]
            if isinstance(items, list):  # tuple form
                return ("ok", items[seg]) if seg < len(items) else ("unknown", None)
            return "ok", items
        if "prefixItems" in schema and isinstance(schema["prefixItems"], list):
            pi = schema["prefixItems"]
            return ("ok", pi[seg]) if seg < len(pi) else ("unknown", None)
        if types is not None and "array" in types:
            return "unknown", None
    key = str(seg)
    if types is not None and "object" not in types:
        if isinstance(seg, int) and "array" in types:
            return "unknown", None
        return "missing", f"a {'/'.join(sorted(types))} has no field {key!r}"
    props = schema.get("properties")
    if isinstance(props, dict):
        if key in props:
            return "ok", props[key]
        extra = schema.get("additionalProperties", None)
        if extra is True or (isinstance(extra, dict) and extra):
            return ("ok", extra) if isinstance(extra, dict) else ("unknown", None)
        declared = ", ".join(sorted(props)) or "none"
        return "missing", f"declared fields: {declared}"
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict) and extra:
        return "ok", extra
    if extra is False:
        return "missing", "the schema declares no fields"
    return "unknown", None


RefTypes = Callable[[str], "frozenset[str] | bool | None"]


def check_literal(
    value: Any,
    schema: Any,
    root: Schema | None,
    string_types: Callable[[str], frozenset[str] | bool | None],
    path: tuple[str | int, ...] = (),
    *,
    target: str = "the parameter",
) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """Yield ``(path, problem)`` for each place where ``value`` cannot match ``schema``.

    ``string_types(s)`` handles strings: ``True`` for a plain literal string, or the types a
    string holding references will produce (``None`` for unknown). A literal's type is checked
    exactly (:func:`literal_fits`); a reference's declared type by :func:`types_compatible`.
    ``target`` names what the schema describes in messages.
    """
    if type(value) is dict and len(value) == 1 and type(value.get("$first")) is list:
        for candidate in value["$first"]:  # a first-available value: each candidate must fit
            yield from check_literal(candidate, schema, root, string_types, path, target=target)
        return
    schema = deref(schema, root)
    accepted = schema_types(schema, root)
    if isinstance(value, str):
        st = string_types(value)
        if st is not True:
            produced = None if st is False else st
            if not types_compatible(produced, accepted):
                yield path, _mismatch(produced, accepted, "the referenced output", target)
            return
    actual = json_type(value)
    if not literal_fits(actual, accepted):
        yield path, _mismatch(frozenset({actual}), accepted, _shown(value), target)
        return
    alts = _alternatives(schema, root)
    if alts is not None:
        matching = [a for a in alts if literal_fits(actual, schema_types(a, root))]
        if len(matching) == 1:
            yield from check_literal(value, matching[0], root, string_types, path, target=target)
        return
    enum = schema.get("enum")
    if (  # a literal outside the enum (a string only when it holds no reference)
        isinstance(enum, list)
        and not isinstance(value, dict | list)
        and (not isinstance(value, str) or string_types(value) is True)
        and value not in enum
    ):
        yield path, f"{value!r} is not one of {enum!r}"
    if isinstance(value, dict):
        props = schema.get("properties")
        if isinstance(props, dict):
            for k, v in value.items():
                if k in props:
                    yield from check_literal(
                        v, props[k], root, string_types, (*path, k), target=target
                    )
                elif schema.get("additionalProperties") is False:
                    yield (*path, k), f"unexpected field {k!r} (allowed: {', '.join(props)})"
        req = schema.get("required")
        if isinstance(req, list):
            for r in req:
                if isinstance(r, str) and r not in value:
                    yield (*path, r), f"missing required field {r!r}"
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for i, v in enumerate(value):
                yield from check_literal(v, items, root, string_types, (*path, i), target=target)


def literal_fits(actual: str, accepted: frozenset[str] | None) -> bool:
    """Whether a literal of JSON type ``actual`` fits ``accepted`` exactly: an integer is a
    number, nothing else converts (``2.5`` is not an integer, ``"5"`` not a number)."""
    return accepted is None or actual in accepted or (actual == "integer" and "number" in accepted)


def _shown(value: Any) -> str:
    if isinstance(value, dict | list):
        return "the value"
    text = json.dumps(value, ensure_ascii=False)
    return f"the value {text if len(text) <= 40 else text[:40] + '…'}"


def _mismatch(
    produced: frozenset[str] | None,
    accepted: frozenset[str] | None,
    what: str,
    target: str = "the parameter",
) -> str:
    p = "/".join(sorted(produced or ())) or "any"
    a = "/".join(sorted(accepted or ())) or "any"
    return f"{what} is {p} but {target} expects {a}"
