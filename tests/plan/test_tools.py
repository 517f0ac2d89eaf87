"""``@tool``: schemas from signatures and return annotations, StepContext, options, registry."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

import pydantic
import pytest
from typing_extensions import TypedDict

from planrail.errors import ToolDefinitionError, UnknownToolError
from planrail.plan.define import tool
from planrail.plan.effects import tool_effect
from planrail.plan.tools import StepContext, Tool, ToolRegistry, ToolSpec


class Account(pydantic.BaseModel):
    user_id: str
    name: str


@dataclasses.dataclass
class Invoice:
    number: int
    total: float


class Hit(TypedDict):
    url: str
    score: float


@tool
def create_account(name: str, email: str, plan: str = "free") -> Account:
    """Create a user account.

    Longer text that is not part of the description.
    """
    return Account(user_id="u1", name=name)


@tool(name="bill", side_effects="keyed", timeout=5, resource="stripe", requires_approval=True,
      retry={"max_attempts": 3}, secret_params=["card"], estimated_duration=0.5,
      description="Charge a card.")  # fmt: skip
async def charge(card: str, amount: int, ctx: StepContext) -> Invoice:
    return Invoice(number=ctx.attempt, total=float(amount))


@tool
def search(query: str, limit: int = 10) -> list[Hit]:
    return [Hit(url="https://example.com", score=1.0)][:limit]


@tool
def count(text: str) -> int:
    return len(text.split())


@tool
def untyped(x, y=2):  # type: ignore[no-untyped-def]
    return {"sum": x + y}


def test_bare_decorator_builds_a_tool_that_is_still_callable() -> None:
    """``@tool`` on a function gives a Tool named after it, still callable as the function."""
    assert isinstance(create_account, Tool)
    assert create_account.name == "create_account"
    assert create_account.is_async is False
    assert create_account("Alice", "a@example.com") == Account(user_id="u1", name="Alice")
    assert create_account.spec.description == "Create a user account."
    assert create_account.spec.side_effects == "unsafe"
    assert "Longer text" in (create_account.__doc__ or "")


def test_decorator_with_options_records_the_metadata() -> None:
    """``@tool(...)`` records name, description, side effects, retry, timeout, resource, ..."""
    spec = charge.spec
    assert charge.name == spec.name == "bill"
    assert charge.is_async is True
    assert spec.description == "Charge a card."
    assert spec.side_effects == "keyed"
    assert tool_effect(spec).may_rerun
    assert spec.timeout == 5
    assert spec.resource == "stripe"
    assert spec.requires_approval is True
    assert spec.retry == {"max_attempts": 3}
    assert spec.secret_params == frozenset({"card"})
    assert spec.estimated_duration == 0.5


def test_input_schema_comes_from_the_signature() -> None:
    """Parameters become properties; those without defaults are required; extras are refused."""
    schema = create_account.spec.input_schema
    assert schema["type"] == "object"
    assert set(schema["properties"]) == {"name", "email", "plan"}
    assert schema["properties"]["name"]["type"] == "string"
    assert schema["properties"]["plan"]["default"] == "free"
    assert sorted(schema["required"]) == ["email", "name"]
    assert schema.get("additionalProperties") is False


def test_step_context_parameter_is_not_part_of_the_input_schema() -> None:
    """A parameter annotated StepContext is excluded from the schema and remembered."""
    assert set(charge.spec.input_schema["properties"]) == {"card", "amount"}
    assert charge.context_param == "ctx"
    assert create_account.context_param is None


@pytest.mark.parametrize(
    ("t", "check"),
    [
        (create_account, lambda s: set(s["properties"]) == {"user_id", "name"}),
        (charge, lambda s: s["properties"]["number"]["type"] == "integer"),
        (search, lambda s: s["type"] == "array" and "$ref" in s["items"]),
        (count, lambda s: s == {"type": "integer"}),
    ],
    ids=["pydantic-model", "dataclass", "typeddict-list", "scalar"],
)
def test_output_schema_comes_from_the_return_annotation(t: Tool, check: Any) -> None:
    """Pydantic models, dataclasses, TypedDicts and scalars all give an output schema."""
    assert t.spec.output_schema is not None
    assert check(t.spec.output_schema)


def test_typed_dict_output_fields_are_reachable_through_defs() -> None:
    """A TypedDict's fields are declared (under $defs) so references into it can be checked."""
    schema = search.spec.output_schema
    assert schema is not None
    (hit,) = schema["$defs"].values()
    assert set(hit["properties"]) == {"url", "score"}


def test_no_return_annotation_means_unknown_output_shape() -> None:
    """Without a return annotation the output schema is None (references are not checked)."""
    assert untyped.spec.output_schema is None
    assert set(untyped.spec.input_schema["properties"]) == {"x", "y"}
    assert untyped.spec.input_schema["required"] == ["x"]


def test_validate_args_checks_and_coerces_against_the_signature() -> None:
    """validate_args returns the keyword arguments, or raises pydantic.ValidationError."""
    assert create_account.validate_args({"name": "A", "email": "e"}) == {
        "name": "A", "email": "e", "plan": "free",
    }  # fmt: skip
    with pytest.raises(pydantic.ValidationError):
        create_account.validate_args({"name": "A"})
    with pytest.raises(pydantic.ValidationError):
        create_account.validate_args({"name": "A", "email": "e", "bogus": 1})


def test_dump_output_gives_plain_json() -> None:
    """dump_output turns models, dataclasses and TypedDicts into plain JSON data."""
    assert create_account.dump_output(Account(user_id="u", name="n")) == {
        "user_id": "u", "name": "n",
    }  # fmt: skip
    assert charge.dump_output(Invoice(number=1, total=2.0)) == {"number": 1, "total": 2.0}
    assert search.dump_output([{"url": "u", "score": 1}]) == [{"url": "u", "score": 1.0}]
    assert count.dump_output(3) == 3
    assert untyped.dump_output({"sum": 3}) == {"sum": 3}


def test_catalog_entry_is_mcp_form() -> None:
    """A tool's catalog entry has name, description, inputSchema, outputSchema, x-planrail."""
    entry = charge.spec.to_catalog_entry()
    assert entry["name"] == "bill"
    assert entry["inputSchema"] == charge.spec.input_schema
    assert entry["outputSchema"] == charge.spec.output_schema
    assert entry["x-planrail"]["side_effects"] == "keyed"
    assert "outputSchema" not in untyped.spec.to_catalog_entry()


def _varargs(*items: str) -> None: ...


def _varkw(**options: str) -> None: ...


def _posonly(a: str, /) -> None: ...


@pytest.mark.parametrize("fn", [_varargs, _varkw, _posonly])
def test_parameters_that_cannot_be_described_are_rejected(fn: Any) -> None:
    """``*args``, ``**kwargs`` and positional-only parameters raise ToolDefinitionError."""
    with pytest.raises(ToolDefinitionError, match=r"_varargs|_varkw|_posonly"):
        tool(fn)


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"side_effects": "sometimes"}, "side_effects"),
        ({"timeout": 0}, "timeout"),
        ({"timeout": float("nan")}, "timeout"),  # NaN > 0 is False, and so is NaN <= 0
        ({"timeout": "5"}, "timeout"),
        ({"timeout": True}, "timeout"),
        ({"estimated_duration": float("nan")}, "estimated_duration"),
        ({"estimated_duration": -1}, "estimated_duration"),
        ({"compute": {"num_cpus": float("nan")}}, "num_cpus"),
        ({"secret_params": ["nope"]}, "secret_params"),
    ],
)
def test_bad_options_are_rejected(options: dict[str, Any], fragment: str) -> None:
    """Invalid decorator options raise ToolDefinitionError naming the option."""
    with pytest.raises(ToolDefinitionError, match=fragment):
        tool(**options)(count.fn)


def test_an_async_generator_is_not_a_tool() -> None:
    """It returns no output to record (it failed every call with an OutputError)."""

    async def items(n: int) -> Any:
        yield n

    with pytest.raises(ToolDefinitionError, match="async generator"):
        tool(items)


def test_unresolvable_annotations_are_a_definition_error() -> None:
    """An annotation that cannot be resolved is a ToolDefinitionError, not a NameError."""

    def f(x: NoSuchType) -> None:  # type: ignore[name-defined]  # noqa: F821
        ...

    with pytest.raises(ToolDefinitionError, match="annotations"):
        tool(f)


def test_registry_holds_tools_and_specs_by_name() -> None:
    """A registry maps names to specs; only real tools are executable."""
    remote = ToolSpec(name="remote")
    reg = ToolRegistry([create_account, remote])
    assert "create_account" in reg
    assert "remote" in reg
    assert len(reg) == 2
    assert reg.names() == ["create_account", "remote"]
    assert reg.spec("remote") is remote
    assert reg.spec("nope") is None
    assert reg.executable("create_account") is create_account
    with pytest.raises(UnknownToolError, match="only in a catalog"):
        reg.executable("remote")
    with pytest.raises(UnknownToolError):
        reg.executable("nope")
    assert ToolRegistry.of(reg) is reg
    assert len(ToolRegistry.of(None)) == 0
    with pytest.raises(TypeError, match=r"@planrail\.tool"):
        reg.add(count.fn)  # type: ignore[arg-type]


class PlainRow(typing.TypedDict):
    key: str
    count: int


def test_typing_typeddict_return_is_accepted() -> None:
    """A ``typing.TypedDict`` return annotation gives an output schema on every Python version,
    with its fields declared, and outputs are converted to plain JSON."""

    def rows() -> list[PlainRow]:
        return [{"key": "k", "count": 1}]

    t = tool(rows)
    schema = t.spec.output_schema
    assert schema is not None
    assert schema["$defs"]["PlainRow"]["required"] == ["key", "count"]
    assert t.dump_output([{"key": "k", "count": 1}]) == [{"key": "k", "count": 1}]
