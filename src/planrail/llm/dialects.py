"""How a schema is asked for, provider by provider: the structured-output *dialects*.

OpenAI-compatible servers agree on ``response_format`` only in part. The modes, strongest first:

- ``json_schema_strict`` — ``{"type": "json_schema", "json_schema": {..., "strict": true}}``
  with the schema made strict (:func:`strict_schema`): OpenAI's API.
- ``json_schema`` — ``{"type": "json_schema", "json_schema": {"name", "schema"}}``: vLLM (its
  guided decoding), LM Studio, Ollama, OpenAI without strict.
- ``json_object_schema`` — ``{"type": "json_object", "schema": ...}``: llama.cpp's own form
  (llama-cpp-python's server and llama-server turn the schema into a grammar).
- ``json_object`` — JSON mode, the schema only in words in a system message.
- ``none`` — nothing; the schema in words, the JSON read out of the text.

A provider that refuses a form (HTTP 400/422, or a 500 saying so — llama-cpp-python's server
answers ``json_schema`` with one) is asked again in the next simpler one (:data:`FALLBACK`),
and the client remembers what worked. A context-length 400 is *not* a refusal of the form
(:func:`is_context_length_error`).
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any, Literal

__all__ = [
    "FALLBACK",
    "MODES",
    "StructuredMode",
    "is_context_length_error",
    "is_format_error",
    "response_format",
    "schema_in_words",
    "strict_schema",
]

StructuredMode = Literal[
    "json_schema_strict", "json_schema", "json_object_schema", "json_object", "none"
]
MODES: tuple[StructuredMode, ...] = (
    "json_schema_strict",
    "json_schema",
    "json_object_schema",
    "json_object",
    "none",
)
FALLBACK: dict[StructuredMode, StructuredMode] = {
    "json_schema_strict": "json_schema",
    "json_schema": "json_object_schema",
    "json_object_schema": "json_object",
    "json_object": "none",
}
"""The next simpler form after a provider refused one."""

ENFORCED: frozenset[StructuredMode] = frozenset(
    {"json_schema_strict", "json_schema", "json_object_schema"}
)
"""The modes in which the provider itself enforces the schema (no need to state it in words)."""

_CONTEXT = re.compile(
    r"context[ _-]?(length|window|size)|maximum context|context_length_exceeded|"
    r"too many tokens|exceeds? the (model'?s )?(context|maximum)|n_ctx",
    re.IGNORECASE,
)


_FORMAT = re.compile(r"response_format|json_schema|schema|grammar", re.IGNORECASE)


def is_format_error(message: str) -> bool:
    """Whether a server error's message is about the structured-output form (llama-cpp-python
    answers an unknown ``response_format`` type with a 500 saying so); any other 500 is a
    transient failure, retried as such."""
    return bool(_FORMAT.search(message))


def is_context_length_error(message: str) -> bool:
    """Whether a provider's error message says the request does not fit the model's context."""
    return bool(_CONTEXT.search(message))


def response_format(
    mode: StructuredMode, schema: dict[str, Any], name: str
) -> dict[str, Any] | None:
    """The ``response_format`` for ``mode`` (``None``: send none)."""
    if mode == "json_schema_strict":
        return {
            "type": "json_schema",
            "json_schema": {"name": name, "schema": strict_schema(schema), "strict": True},
        }
    if mode == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}
    if mode == "json_object_schema":
        return {"type": "json_object", "schema": schema}
    if mode == "json_object":
        return {"type": "json_object"}
    return None


def schema_in_words(schema: dict[str, Any]) -> str:
    """The system message that states a schema the provider cannot enforce (JSON mode also needs
    the word "JSON" in the messages)."""
    return (
        "Answer with one JSON value, and nothing else, that follows this JSON Schema:\n"
        + json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
    )


def strict_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` in the form OpenAI's strict mode demands: every object closed
    (``additionalProperties: false``) with every property required, an optional property made
    nullable instead; ``oneOf`` becomes ``anyOf``; keywords strict mode refuses are dropped.

    The planner drops the ``null`` s such a schema makes the model write for optional fields.
    """
    strict: dict[str, Any] = _strict(copy.deepcopy(schema))
    return strict


_UNSUPPORTED = ("default", "format", "minLength", "maxLength", "title", "examples")


def _strict(node: Any) -> Any:
    if isinstance(node, list):
        return [_strict(n) for n in node]
    if not isinstance(node, dict):
        return node
    for key in _UNSUPPORTED:
        node.pop(key, None)
    if "oneOf" in node:
        node["anyOf"] = node.pop("oneOf")
    for key in ("anyOf", "allOf", "prefixItems"):
        if key in node:
            node[key] = _strict(node[key])
    if "items" in node:
        node["items"] = _strict(node["items"])
    if isinstance(node.get("$defs"), dict):
        node["$defs"] = {k: _strict(v) for k, v in node["$defs"].items()}
    props = node.get("properties")
    if node.get("type") == "object" or isinstance(props, dict):
        props = props if isinstance(props, dict) else {}
        required = set(node.get("required", ()))
        node["properties"] = {
            k: _strict(v) if k in required else _nullable(_strict(v)) for k, v in props.items()
        }
        node["required"] = list(props)
        node["additionalProperties"] = False
    return node


def _nullable(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    kind = node.get("type")
    if isinstance(kind, str) and "enum" not in node and "const" not in node:
        return {**node, "type": [kind, "null"]}
    if isinstance(kind, list):
        return node if "null" in kind else {**node, "type": [*kind, "null"]}
    return {"anyOf": [node, {"type": "null"}]}
