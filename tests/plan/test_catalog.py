"""Loading tools from modules, ``.py`` files and catalogs (MCP and OpenAI forms)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from planrail.errors import ToolLoadError
from planrail.plan.catalog import load_catalog, load_tools, parse_catalog
from planrail.plan.tools import Tool
from planrail.plan.validate import validate

from .helpers import PLANS

TOOLS_SOURCE = """
import planrail
from planrail import tool

@tool
def greet(name: str) -> str:
    return "hello " + name

@planrail.tool(side_effects="none")
async def shout(text: str) -> str:
    return text.upper()

def not_a_tool():
    pass
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_load_tools_from_a_py_file(tmp_path: Path) -> None:
    """Every @tool in a ``.py`` file is returned; plain functions are not."""
    path = _write(tmp_path, "my_tools.py", TOOLS_SOURCE)
    tools = load_tools(str(path))
    assert sorted(t.name for t in tools) == ["greet", "shout"]
    assert all(isinstance(t, Tool) for t in tools)
    assert load_tools(str(path))[0].fn is tools[0].fn  # loading twice reuses the module


def test_load_tools_from_a_module_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``pkg.module`` is imported (the working directory is on the path) and its tools returned."""
    pkg = f"planrail_test_pkg_{uuid.uuid4().hex[:8]}"
    (tmp_path / pkg).mkdir()
    _write(tmp_path / pkg, "__init__.py", "")
    _write(tmp_path / pkg, "tools.py", TOOLS_SOURCE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    tools = load_tools(f"{pkg}.tools")
    assert sorted(t.name for t in tools) == ["greet", "shout"]


@pytest.mark.parametrize(
    ("name", "text", "fragment"),
    [
        (None, None, "no such file"),
        ("broken.py", "def f(:\n    pass\n", "syntax error at line 1"),
        ("empty.py", "x = 1\n", "no @planrail.tool functions found"),
        ("raises.py", "raise RuntimeError('boom')\n", "RuntimeError: boom"),
        ("imports.py", "import planrail_no_such_module_xyz\n", "planrail_no_such_module_xyz"),
    ],
)
def test_load_tools_errors_are_one_line(
    tmp_path: Path, name: str | None, text: str | None, fragment: str
) -> None:
    """Missing file, syntax error, no tools, import failure: a clean ToolLoadError each."""
    target = (
        str(tmp_path / "missing.py") if name is None else str(_write(tmp_path, name, text or ""))
    )
    with pytest.raises(ToolLoadError) as info:
        load_tools(target)
    assert fragment in info.value.message
    assert target in info.value.message
    assert "\n" not in info.value.message


def test_load_tools_unknown_module() -> None:
    """An unknown module path is a ToolLoadError saying it was not found."""
    with pytest.raises(ToolLoadError, match="module not found"):
        load_tools("planrail_no_such_pkg_xyz.tools")


# ---------------------------------------------------------------- catalogs

MCP = {
    "name": "get_weather",
    "description": "Weather for a city.",
    "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}},
                    "required": ["city"]},
    "outputSchema": {"type": "object", "properties": {"temp_c": {"type": "number"}}},
    "annotations": {"readOnlyHint": True},
}  # fmt: skip
OPENAI = {
    "type": "function",
    "function": {
        "name": "send_sms",
        "description": "Send a text message.",
        "parameters": {"type": "object", "properties": {"to": {"type": "string"},
                       "body": {"type": "string"}}, "required": ["to", "body"]},
    },
    "x-planrail": {"side_effects": "keyed", "resource": "twilio", "timeout": 10,
                   "secret_params": ["to"], "requires_approval": True},
}  # fmt: skip


@pytest.mark.parametrize("wrap", [lambda ts: ts, lambda ts: {"tools": ts}], ids=["list", "object"])
def test_catalogs_in_mcp_and_openai_form(wrap: Any) -> None:
    """Both entry forms, in a bare list or under ``tools``, give the same specs."""
    weather, sms = parse_catalog(wrap([MCP, OPENAI]))
    assert weather.name == "get_weather"
    assert weather.input_schema == MCP["inputSchema"]
    assert weather.output_schema == MCP["outputSchema"]
    assert weather.side_effects == "none"  # from annotations.readOnlyHint
    assert sms.name == "send_sms"
    assert sms.input_schema["required"] == ["to", "body"]
    assert sms.output_schema is None
    assert sms.side_effects == "keyed"
    assert sms.resource == "twilio"
    assert sms.timeout == 10
    assert sms.secret_params == frozenset({"to"})
    assert sms.requires_approval is True


def test_mcp_idempotent_hint_and_defaults() -> None:
    """``idempotentHint`` → idempotent; no hints → unsafe; no input schema → any object."""
    a, b = parse_catalog([{"name": "a", "annotations": {"idempotentHint": True}}, {"name": "b"}])
    assert (a.side_effects, b.side_effects) == ("idempotent", "unsafe")
    assert b.input_schema == {"type": "object"}


def test_a_catalog_file_validates_plans(tmp_path: Path) -> None:
    """load_catalog reads a file; its specs check tool names and arguments of a plan."""
    path = _write(tmp_path, "cat.json", json.dumps({"tools": [MCP, OPENAI]}))
    specs = load_catalog(path)
    plan = {"steps": [{"id": "w", "tool": "get_weather", "args": {"city": "Paris"}},
                      {"id": "s", "tool": "send_sms",
                       "args": {"to": "+33", "body": "It is ${w.temp_c} C"},
                       "depends_on": ["w"]}]}  # fmt: skip
    assert validate(plan, specs).valid
    plan["steps"][1]["args"]["body"] = "${w.humidity}"
    assert [i.code for i in validate(plan, specs).errors] == ["unknown_output_field"]


def test_catalog_from_tools_round_trips(tmp_path: Path) -> None:
    """A tool's ``to_catalog_entry`` reads back as an equivalent spec."""
    path = _write(tmp_path, "t.py", TOOLS_SOURCE)
    tools = {t.name: t for t in load_tools(str(path))}
    (spec,) = parse_catalog([tools["shout"].spec.to_catalog_entry()])
    assert spec.input_schema == tools["shout"].spec.input_schema
    assert spec.output_schema == tools["shout"].spec.output_schema
    assert spec.side_effects == "none"


def test_the_shared_miniature_catalog_loads() -> None:
    """tests/data/plans/tools.catalog.json mixes both forms and loads."""
    names = [s.name for s in load_catalog(PLANS / "tools.catalog.json")]
    assert names == ["create_account", "create_subscription", "send_welcome_email", "fetch"]


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"not_tools": []}, "expected a list of tools"),
        ("tools", "expected a list of tools"),
        ([1], "expected an object"),
        ([{"description": "no name"}], "non-empty string 'name'"),
        ([{"name": "  "}], "non-empty string 'name'"),
        ([{"name": "a"}, {"name": "a"}], "defined twice"),
        ([{"name": "a", "inputSchema": []}], "input schema must be a JSON object"),
        ([{"name": "a", "outputSchema": "x"}], "output schema must be a JSON object"),
        ([{"name": "a", "description": 3}], "'description' must be a string"),
        ([{"name": "a", "x-planrail": []}], "must be objects"),
        ([{"name": "a", "x-planrail": {"side_effects": "maybe"}}], "side_effects must be one of"),
        ([{"name": "a", "x-planrail": {"timeout": -1}}], "timeout must be a positive"),
        ([{"type": "function", "function": {"description": "x"}}], "'name'"),
    ],
)
def test_bad_catalogs_raise_tool_load_error(data: Any, fragment: str) -> None:
    """Each malformed catalog is a ToolLoadError naming the tool entry and the problem."""
    with pytest.raises(ToolLoadError) as info:
        parse_catalog(data, source="cat.json")
    assert fragment in info.value.message
    assert info.value.message.startswith("cat.json")


@pytest.mark.parametrize(
    ("content", "fragment"),
    [(None, "cannot read it"), ("{nope", "invalid JSON at line 1"), (b"\xff\xfe", "not UTF-8")],
)
def test_bad_catalog_files_raise_tool_load_error(
    tmp_path: Path, content: str | bytes | None, fragment: str
) -> None:
    """Missing, malformed or non-UTF-8 catalog files are a ToolLoadError with the reason."""
    path = tmp_path / "cat.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(ToolLoadError, match=fragment):
        load_catalog(path)


@pytest.mark.parametrize(
    ("extra", "word"),
    [
        ({"secret_params": "card"}, "secret_params"),
        ({"resource": 3}, "resource"),
        ({"requires_approval": "yes"}, "requires_approval"),
        ({"estimated_duration": -1}, "estimated_duration"),
        ({"timeout": True}, "timeout"),
        ({"retry": [1]}, "retry"),
    ],
)
def test_x_planrail_values_are_type_checked(extra: dict[str, Any], word: str) -> None:
    """Wrongly typed ``x-planrail`` metadata is refused with the field named, never coerced
    (a string of secret parameter names must not become a set of letters)."""
    entry = {"name": "t", "inputSchema": {"type": "object"}, "x-planrail": extra}
    with pytest.raises(ToolLoadError, match=word):
        parse_catalog([entry])


def test_an_edited_tools_file_is_loaded_again(tmp_path: Path) -> None:
    """Loading a ``.py`` tools file after editing it gives the new tools, not a cached module."""
    path = _write(tmp_path, "mytools.py", TOOLS_SOURCE)
    assert {t.name for t in load_tools(str(path))} == {"greet", "shout"}
    path.write_text(TOOLS_SOURCE.replace("def greet", "def welcome") + "\n", encoding="utf-8")
    assert {t.name for t in load_tools(str(path))} == {"welcome", "shout"}
