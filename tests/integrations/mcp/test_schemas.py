"""Input schemas checked when a tool is listed (``schemas.py``, ``refs.py``): a ``$ref`` that
resolves nowhere is refused then, and every reference the validator can follow is accepted and
applied. (The real-server tests are in ``test_client.py``.)"""

from __future__ import annotations

from typing import Any

import pytest

from planrail.errors import ToolLoadError
from planrail.integrations.mcp.schemas import argument_problem, checked_validator

DRAFT_07 = "http://json-schema.org/draft-07/schema#"

RESOLVING = [
    # a $ref relative to a nested $id's base URI
    ({"$id": "https://example.com/root/", "$defs": {"i": {"$id": "item", "type": "string"}},
      "properties": {"d": {"$ref": "item"}}}, {"d": 5}, "d: 5 is not of type 'string'"),
    # recursion through the root
    ({"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}}},
     {"kids": [{"kids": [1]}]}, "kids.0.kids.0: 1 is not of type 'object'"),
    # an anchor
    ({"$defs": {"a": {"$anchor": "word", "type": "string"}},
      "properties": {"d": {"$ref": "#word"}}}, {"d": 1}, "d: 1 is not of type 'string'"),
    # the 2020-12 meta-schema (known to the validator; not fetched)
    ({"properties": {"d": {"$ref": "https://json-schema.org/draft/2020-12/schema"}}},
     {"d": {"type": "nonsense"}}, "d.type: 'nonsense' is not valid under any of the given"),
    # draft-07: a $ref hides its siblings, so the broken one next to it is never applied
    ({"$schema": DRAFT_07, "definitions": {"x": {"type": "string"}},
      "properties": {"d": {"$ref": "#/definitions/x", "items": {"$ref": "#/nowhere"}}}},
     {"d": [1]}, "d: [1] is not of type 'string'"),
    # a $defs entry no reference reaches is never applied
    ({"$defs": {"unused": {"$ref": "#/nowhere"}}, "properties": {"d": {"type": "integer"}}},
     {"d": "x"}, "d: 'x' is not of type 'integer'"),
    # a recursive data structure: each $ref back checks a smaller part (it ends)
    ({"$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}},
                         "allOf": [{"required": ["v"]}]}},
      "properties": {"d": {"$ref": "#/$defs/node"}}},
     {"d": {"v": 1, "next": {"next": {"v": 2}}}}, "d.next: 'v' is a required property"),
    # one schema applied twice in place, by two $refs: no loop
    ({"$defs": {"s": {"type": "string"}},
      "properties": {"d": {"allOf": [{"$ref": "#/$defs/s"}, {"$ref": "#/$defs/s"}]}}},
     {"d": 1}, "d: 1 is not of type 'string'"),
    # a loop through anyOf whose first branch holds: may end, so left to the call
    ({"$defs": {"a": {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/a"}]}},
      "properties": {"d": {"$ref": "#/$defs/a"}}}, {"d": "x"}, ""),
]  # fmt: skip


@pytest.mark.parametrize(("schema", "arguments", "problem"), RESOLVING)
def test_references_the_validator_follows_are_accepted_and_applied(
    schema: dict[str, Any], arguments: dict[str, Any], problem: str
) -> None:
    """No false refusal: each of these schemas is listed, and its references are applied."""
    validator = checked_validator("srv", "t", "inputSchema", {"type": "object", **schema})
    assert (argument_problem("t", validator, arguments) or "").startswith(problem)
    assert (argument_problem("t", validator, arguments) is None) == (problem == "")


DANGLING = [
    ({"$schema": DRAFT_07, "properties": {"d": {"$ref": "#/definitions/x"}}}, "#/definitions/x"),
    ({"$defs": {"a": {"$ref": "#/$defs/b"}}, "properties": {"d": {"$ref": "#/$defs/a"}}},
     "#/$defs/b"),
    ({"properties": {"d": {"anyOf": [{"type": "null"}, {"$dynamicRef": "#/$defs/gone"}]}}},
     "#/$defs/gone"),
    ({"$id": "https://example.com/root/", "properties": {"d": {"$ref": "other.json"}}},
     "other.json"),
]  # fmt: skip


@pytest.mark.parametrize(("schema", "ref"), DANGLING)
def test_a_reference_to_nowhere_is_refused_naming_the_server_the_tool_and_the_ref(
    schema: dict[str, Any], ref: str
) -> None:
    """Before, each of these passed the listing and failed every call."""
    with pytest.raises(ToolLoadError) as caught:
        checked_validator("srv", "t", "inputSchema", {"type": "object", **schema})
    assert (
        f"MCP server 'srv': tool 't' has an inputSchema whose $ref {ref!r} resolves nowhere"
        in caught.value.message
    )


LOOPS = [
    ({"$defs": {"a": {"$ref": "#/$defs/a"}}, "properties": {"d": {"$ref": "#/$defs/a"}}},
     "#/$defs/a"),
    ({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}},
      "properties": {"d": {"$ref": "#/$defs/a"}}}, None),
    ({"allOf": [{"$ref": "#"}]}, "#"),
    ({"$schema": DRAFT_07, "definitions": {"a": {"not": {"$ref": "#/definitions/a"}}},
      "properties": {"d": {"$ref": "#/definitions/a"}}}, "#/definitions/a"),
]  # fmt: skip


@pytest.mark.parametrize(("schema", "ref"), LOOPS)
def test_a_reference_that_only_leads_back_to_itself_is_refused_at_listing(
    schema: dict[str, Any], ref: str | None
) -> None:
    """Applying any of these recursed until Python stopped it, at every call (a
    ToolDefinitionError after the plan was approved): refused when the tool is listed."""
    with pytest.raises(ToolLoadError) as caught:
        checked_validator("srv", "t", "inputSchema", {"type": "object", **schema})
    message = caught.value.message
    assert "leads back to itself before any part of the arguments is checked" in message
    if ref is not None:
        assert f"whose $ref {ref!r}" in message
