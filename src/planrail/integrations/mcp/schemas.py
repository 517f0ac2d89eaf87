"""A listed MCP tool's input schema, checked once when the tool is listed.

A server's ``inputSchema`` is checked against the arguments before each call; a schema that is
not JSON Schema at all (an unknown type, a pattern that is no regular expression) used to pass
validation and approval and then fail every call with the validator's own internal exception.
So each schema is checked when the tool is listed, with the draft its ``$schema`` names (MCP's
default, 2020-12, without one — or draft-07 for a schema only draft-07 accepts, such as the
tuple form ``items: [...]`` older servers send), and a bad one is a :class:`ToolLoadError`
naming the server and the tool. So is a ``$ref`` that resolves nowhere (``refs.py``: a
``$defs`` entry that does not exist, a remote schema — never fetched) or only back to itself.
What still only shows when an instance is checked (a loop through ``anyOf``, which may end) is
a :class:`ToolDefinitionError` of the call, never the validator's exception.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import jsonschema
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for

from planrail.errors import ToolDefinitionError, ToolLoadError
from planrail.integrations.mcp.refs import REGISTRY, ref_problem

__all__ = ["argument_problem", "checked_validator"]


def checked_validator(server: str, tool: str, label: str, schema: Mapping[str, Any]) -> Validator:
    """A validator of ``schema``, the ``label`` (``inputSchema``) of ``server``'s ``tool``.

    (An ``outputSchema`` is the SDK's to apply: a broken one fails that tool's calls with an
    :class:`~planrail.errors.OutputError` saying so, and no other tool.)"""
    with warnings.catch_warnings():  # an unknown $schema: 2020-12, which checks it below
        warnings.simplefilter("ignore", DeprecationWarning)
        cls = validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        try:
            cls.check_schema(schema)
        except jsonschema.SchemaError as exc:
            if "$schema" in schema or not _is_draft7(schema):
                where = "/".join(str(p) for p in exc.absolute_path) or "(top)"
                draft = cls.__name__.removesuffix("Validator")
                raise ToolLoadError(
                    f"MCP server {server!r}: tool {tool!r} has an {label} that is not valid"
                    f" JSON Schema ({draft}) at {where}: {exc.message}"
                ) from None
            cls = jsonschema.Draft7Validator
        problem = ref_problem(schema, cls.META_SCHEMA["$schema"])
    except ToolLoadError:
        raise
    except Exception as exc:  # the checker itself failed (a schema too deep to walk)
        raise ToolLoadError(
            f"MCP server {server!r}: tool {tool!r} has an {label} that cannot be checked:"
            f" {type(exc).__name__}: {exc}"
        ) from None
    if problem is not None:
        ref, what = problem
        raise ToolLoadError(
            f"MCP server {server!r}: tool {tool!r} has an {label} whose $ref {ref!r} {what}"
        )
    return cls(schema, registry=REGISTRY)


def _is_draft7(schema: Mapping[str, Any]) -> bool:
    try:
        jsonschema.Draft7Validator.check_schema(schema)
    except Exception:
        return False
    return True


def argument_problem(name: str, validator: Validator, arguments: Any) -> str | None:
    """Why ``arguments`` do not fit the input schema of tool ``name``, or None when they do.

    Raises :class:`ToolDefinitionError` when the schema cannot be applied at all."""
    try:
        problem = jsonschema.exceptions.best_match(validator.iter_errors(arguments))
    except Exception as exc:  # RecursionError, an unresolvable $ref: the schema's fault
        raise ToolDefinitionError(
            f"the input schema of MCP tool '{name}' cannot be applied to its arguments"
            f" ({type(exc).__name__}: {_short(exc)}); the server's schema is broken"
        ) from None
    if problem is None:
        return None
    where = ".".join(str(p) for p in problem.absolute_path) or "(arguments)"
    return f"{where}: {problem.message}"


def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return text[:200]
