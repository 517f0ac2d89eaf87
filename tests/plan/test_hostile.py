"""Hostile plans get one clear Issue — never a traceback, never a hang, never a huge message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from planrail.errors import PlanLoadError
from planrail.plan.loader import PlanLimits, load_document
from planrail.plan.model import Plan
from planrail.plan.validate import validate

from .helpers import codes

BILLION_LAUGHS = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
steps: [{id: s, tool: t, args: {x: *i}}]
"""


def _one_issue(source: Any, code: str, **kw: Any) -> str:
    report = validate(source, **kw)
    assert [i.code for i in report.errors] == [code], report.errors
    message = report.errors[0].message
    assert message
    assert len(message) < 600  # a clear one-liner, not a dump of the input
    assert "Traceback" not in message
    return message


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('{"steps": [', "invalid JSON at line 1"),
        ('{"steps": [}', "invalid JSON"),
        ("{'steps': []}", "invalid JSON"),
        ("steps: [a, b\n  - x: : :", "invalid YAML at line"),
        ("steps:\n  - id: a\n   tool: b\n", "invalid YAML"),
        ("steps: !!python/object/apply:os.system ['echo hi']", "invalid YAML"),
        ("", "empty"),
        ("   \n", "empty"),
    ],
)
def test_malformed_json_and_yaml_are_parse_errors(text: str, fragment: str) -> None:
    """Broken JSON/YAML (and YAML's Python tags) is a parse_error with the location."""
    assert fragment in _one_issue(text, "parse_error")


def test_non_utf8_bytes_are_a_parse_error() -> None:
    """Bytes that are not UTF-8 are a parse_error naming the byte offset."""
    assert "not UTF-8" in _one_issue(b'{"steps": []}\xff', "parse_error")


@pytest.mark.parametrize("source", ["[1, 2]", "hello", "42", "null", '"steps"'])
def test_documents_that_are_not_objects_are_parse_errors(source: str) -> None:
    """A document that parses but is not an object of steps is a parse_error."""
    _one_issue(source, "parse_error")


def test_ten_megabyte_plan_is_refused_before_parsing() -> None:
    """A 10 MB plan exceeds PlanLimits.max_plan_bytes (4 MiB): limit_exceeded, with the size."""
    text = '{"goal": "' + "a" * 10_000_000 + '", "steps": []}'
    message = _one_issue(text, "limit_exceeded")
    assert "max_plan_bytes" in message
    assert "10,000,0" in message


def test_ten_megabyte_plan_file_is_refused_before_reading(tmp_path: Path) -> None:
    """The file size is checked before the file is read."""
    path = tmp_path / "big.json"
    path.write_text('{"steps": [], "goal": "' + "x" * 10_000_000 + '"}', encoding="utf-8")
    assert "max_plan_bytes" in _one_issue(path, "limit_exceeded")


ENDLESS = Path("/dev/zero")  # its size is 0 and it never ends, like a pipe fed forever


@pytest.mark.skipif(not ENDLESS.exists(), reason="no /dev/zero here")
def test_a_file_that_never_ends_is_refused_past_the_limit() -> None:
    """A device or pipe is read up to the limit, not until memory runs out (``planrail
    validate /dev/zero`` took 4.5 GB in 10 s), and so are catalogs and policy files."""
    from planrail.errors import ToolLoadError
    from planrail.plan.catalog import load_catalog
    from planrail.policies.security import SecurityPolicy

    message = _one_issue(ENDLESS, "limit_exceeded", limits=PlanLimits(max_plan_bytes=10_000))
    assert "more than 10,000 bytes" in message
    with pytest.raises(ToolLoadError, match="the catalog is more than"):
        load_catalog(ENDLESS)
    with pytest.raises(PlanLoadError, match="the policy is more than"):
        SecurityPolicy.load(ENDLESS)


def test_multibyte_text_is_measured_in_bytes() -> None:
    """The size limit counts UTF-8 bytes, not characters."""
    text = '{"steps": [], "goal": "' + "é" * 600 + '"}'
    report = validate(text, limits=PlanLimits(max_plan_bytes=1000))
    assert codes(report) == {"limit_exceeded"}


def test_one_hundred_thousand_steps_exceed_max_steps() -> None:
    """100,000 steps exceed PlanLimits.max_steps (10,000): one limit_exceeded, not 100,000."""
    plan = {"steps": [{"id": f"s{i}", "tool": "t"} for i in range(100_000)]}
    assert "max_steps" in _one_issue(json.dumps(plan), "limit_exceeded")
    assert "max_steps" in _one_issue(plan, "limit_exceeded")


def test_more_steps_validate_when_the_limit_is_raised() -> None:
    """Raising PlanLimits.max_steps deliberately lets a plan over the default validate."""
    plan = {"steps": [{"id": f"s{i}", "tool": "t"} for i in range(20_000)]}
    assert codes(validate(plan)) == {"limit_exceeded"}
    report = validate(plan, limits=PlanLimits(max_steps=20_000))
    assert report.valid
    assert report.plan is not None
    assert len(report.plan.steps) == 20_000


@pytest.mark.parametrize(
    "text",
    [
        "[" * 10_000 + "]" * 10_000,
        '{"steps": [{"id": "a", "tool": "t", "args": {"x": ' + "[" * 10_000 + "]" * 10_000 + "}}]}",
        '{"steps": [], "goal": ' + '{"a":' * 10_000 + "1" + "}" * 10_000 + "}",
        "steps: [{id: a, tool: t, args: {x: " + "[" * 10_000 + "]" * 10_000 + "}}]",
        "steps:\n  " + "- " * 10_000 + "x\n",
        "goal: " + "{a: " * 10_000 + "1" + "}" * 10_000 + "\nsteps: []\n",
    ],
    ids=["json-list", "json-args", "json-objects", "yaml-flow", "yaml-block", "yaml-mapping"],
)
def test_ten_thousand_deep_nesting_is_limit_exceeded(text: str) -> None:
    """10,000 levels of nesting in JSON or YAML is limit_exceeded — no RecursionError escapes."""
    assert "nest" in _one_issue(text, "limit_exceeded")


def test_nesting_just_over_max_depth_is_limit_exceeded() -> None:
    """Nesting beyond PlanLimits.max_depth (64) is refused even where the parser copes."""
    plan = {"steps": [{"id": "a", "tool": "t", "args": {"x": json.loads("[" * 70 + "]" * 70)}}]}
    assert "deeper than 64" in _one_issue(plan, "limit_exceeded")


def test_deeply_nested_python_mapping_is_limit_exceeded() -> None:
    """A dict built in Python 10,000 levels deep is walked iteratively and refused."""
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(10_000):
        node["x"] = {}
        node = node["x"]
    _one_issue({"steps": [], "goal": "g", "metadata": deep}, "limit_exceeded")


def test_yaml_billion_laughs_is_limit_exceeded() -> None:
    """A YAML alias bomb (9^9 'lol's) counts every use of an alias and stops at max_nodes."""
    assert "values" in _one_issue(BILLION_LAUGHS, "limit_exceeded")


def test_recursive_yaml_alias_is_limit_exceeded() -> None:
    """A YAML node that contains itself cannot loop the walk: it hits the depth limit."""
    _one_issue("steps: &a [*a]\n", "limit_exceeded")
    _one_issue("steps:\n- &s {id: a, tool: t, args: {x: *s}}\n", "limit_exceeded")


@pytest.mark.parametrize(
    "source",
    [
        "steps:\n- id: a\n  tool: t\n  args: {1: x}\n",
        "steps:\n- id: a\n  tool: t\n  args: {true: x}\n",
        "steps:\n- id: a\n  tool: t\n  args: {1.5: x}\n",
        "steps:\n- id: a\n  tool: t\n  args: {null: x}\n",
        {"steps": [{"id": "a", "tool": "t", "args": {1: "x"}}]},
        {"steps": [], 1: 2},
    ],
)
def test_non_string_keys_are_parse_errors(source: Any) -> None:
    """Object keys must be strings (YAML allows others; JSON does not)."""
    assert "keys must be strings" in _one_issue(source, "parse_error")


@pytest.mark.parametrize(
    "source",
    [
        '{"steps": [{"id": "a", "tool": "t", "args": {"x": NaN}}]}',
        '{"steps": [{"id": "a", "tool": "t", "args": {"x": Infinity}}]}',
        '{"steps": [{"id": "a", "tool": "t", "args": {"x": -Infinity}}]}',
        '{"steps": [{"id": "a", "tool": "t", "args": {"x": 1e999}}]}',
        "steps:\n- {id: a, tool: t, args: {x: .nan}}\n",
        "steps:\n- {id: a, tool: t, args: {x: .inf}}\n",
        {"steps": [{"id": "a", "tool": "t", "args": {"x": float("nan")}}]},
    ],
)
def test_nan_and_infinity_are_parse_errors(source: Any) -> None:
    """NaN and ±Infinity are not JSON numbers; a plan holding one is a parse_error."""
    assert "not JSON" in _one_issue(source, "parse_error")


@pytest.mark.parametrize(
    ("source", "where"),
    [
        ('{"steps": [{"id": "a", "tool": "t", "args": {"x": "a\\ud800b"}}]}', "$.steps[0].args.x"),
        ('{"goal": "\\udcff", "steps": []}', "$.goal"),
        ('{"steps": [{"id": "a", "tool": "t", "args": {"k\\udfff": 1}}]}', "$.steps[0].args"),
        (
            {"steps": [{"id": "a", "tool": "t", "args": {"x": ["ok", "\udc80"]}}]},
            "$.steps[0].args.x[1]",
        ),
        (Plan.model_validate({"goal": "\ud800", "steps": []}), "$.goal"),
    ],
)
def test_lone_surrogates_are_parse_errors(source: Any, where: str) -> None:
    """A lone surrogate (JSON's ``"\\ud800"`` escape, undecodable command-line bytes) is not
    Unicode text: no UTF-8 store, terminal or tool takes it. Refused where it is, in text,
    values, keys, Python data and Plan objects alike; the message itself can be printed."""
    message = _one_issue(source, "parse_error")
    assert message.startswith(f"{where}: the ")
    assert "holds a lone surrogate" in message
    message.encode("utf-8")  # the message is text, whatever the plan held


def test_surrogate_pairs_and_other_text_are_fine() -> None:
    """A pair of escapes is one character beyond the first plane (an emoji): valid text."""
    report = validate('{"goal": "\\ud83d\\ude00 \u00e9 \u2028", "steps": []}')
    assert report.valid, report.errors
    assert report.plan is not None
    assert report.plan.goal == "\U0001f600 \u00e9 \u2028"


@pytest.mark.parametrize(
    "source",
    [
        '{"steps": [{"id": "a", "tool": "t", "args": {"x": ' + "9" * 5000 + "}}]}",
        "steps:\n- {id: a, tool: t, args: {x: " + "9" * 5000 + "}}\n",
    ],
)
def test_an_integer_too_long_to_read_is_a_parse_error(source: str) -> None:
    """Python refuses to read integers of >4,300 digits; that is a parse_error, not a ValueError."""
    assert "cannot be read" in _one_issue(source, "parse_error")


@pytest.mark.parametrize(
    "source",
    [
        "steps:\n- {id: a, tool: t, args: {x: 2024-01-01}}\n",
        "steps:\n- {id: a, tool: t, args: {x: !!binary aGVsbG8=}}\n",
        "steps:\n- {id: a, tool: t, args: !!set {a, b}}\n",
        {"steps": [{"id": "a", "tool": "t", "args": {"x": object()}}]},
        {"steps": [{"id": "a", "tool": "t", "args": {"x": (1, 2)}}]},
    ],
)
def test_values_that_are_not_json_are_parse_errors(source: Any) -> None:
    """Dates, bytes, sets and Python objects are refused: a plan is JSON data."""
    assert "not allowed in a plan" in _one_issue(source, "parse_error")


def test_dunder_reference_is_an_invalid_reference() -> None:
    """``${s1.__class__.__init__}`` is refused by the grammar: invalid_reference on that arg."""
    plan = {
        "steps": [
            {"id": "s1", "tool": "t"},
            {"id": "s2", "tool": "t", "args": {"x": "${s1.__class__.__init__}"},
             "depends_on": ["s1"]},
        ]
    }  # fmt: skip
    report = validate(plan)
    assert [(i.code, i.path) for i in report.errors] == [("invalid_reference", "$.steps[1].args.x")]
    assert "__class__" in report.errors[0].message


def test_format_string_attribute_access_is_inert() -> None:
    """``{0.__class__}`` is not a reference: the plan is valid and the text stays text."""
    plan = {"steps": [{"id": "s1", "tool": "t", "args": {"x": "{0.__class__}"}}]}
    assert validate(plan).valid


def test_one_megabyte_reference_string() -> None:
    """A 1 MB reference is over max_string_length by default; with it raised, invalid_reference."""
    plan = {"steps": [{"id": "s1", "tool": "t"},
                      {"id": "s2", "tool": "t", "args": {"x": "${s1." + "a" * 1_000_000 + "}"},
                       "depends_on": ["s1"]}]}  # fmt: skip
    assert "1,000,006 characters" in _one_issue(plan, "limit_exceeded")
    raised = PlanLimits(max_string_length=2_000_000)
    message = _one_issue(plan, "invalid_reference", limits=raised)
    assert "longer than 1024" in message


def test_many_references_in_one_long_string_are_linear() -> None:
    """A 250,000-character string of 50,000 references parses (the parser is linear)."""
    plan = {"steps": [{"id": "s1", "tool": "t"},
                      {"id": "s2", "tool": "t", "args": {"x": "${s1}" * 50_000},
                       "depends_on": ["s1"]}]}  # fmt: skip
    assert validate(plan).valid


def test_too_many_dependencies_on_one_step_is_limit_exceeded() -> None:
    """More than PlanLimits.max_dependencies entries in one depends_on is limit_exceeded."""
    plan = {
        "steps": [{"id": "a", "tool": "t", "depends_on": ["b"] * 1001}, {"id": "b", "tool": "t"}]
    }
    report = validate(plan)
    assert [(i.code, i.step) for i in report.errors] == [("limit_exceeded", "a")]


def test_too_long_a_string_is_limit_exceeded() -> None:
    """A single string longer than max_string_length is refused with its path."""
    plan = {"steps": [{"id": "a", "tool": "t", "args": {"x": "y" * 300_000}}]}
    assert "$.steps[0].args.x" in _one_issue(plan, "limit_exceeded")


def test_load_document_raises_plan_load_errors_only() -> None:
    """The loader's own API raises PlanLoadError (with a code) for every hostile document."""
    for text in ("[" * 10_000, "{", "a: [", BILLION_LAUGHS, "x: .nan"):
        with pytest.raises(PlanLoadError) as info:
            load_document(text)
        assert info.value.code in {"parse_error", "limit_exceeded"}
