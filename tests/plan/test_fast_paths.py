"""The validator's fast paths agree with the full checks they stand in for, malformed input too.

Each fast path (the per-validation :class:`~planrail.plan.refs.Parser`, plain parameter schemas,
reference types checked by what they produce, the per-step-kind effects, the flat duplicate
key, the flat ``$first`` test, steps built without pydantic) is compared with the code it
skips: directly on generated input, and through whole validations run once as they are and
once with every fast path replaced by the full one.
"""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Iterator
from typing import Any

import pydantic
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from planrail.errors import PlanLoadError, ReferenceSyntaxError
from planrail.plan import (
    duplicates,
    first,
    loader,
    validate_args,
    validate_policies,
    validate_refs,
    validate_shape,
)
from planrail.plan import schema as js
from planrail.plan.catalog import load_catalog
from planrail.plan.compiled import step_fields
from planrail.plan.effects import StepEffects, step_effect
from planrail.plan.loader import PlanLimits, check_bounds
from planrail.plan.model import Fallback, Step, plain_step
from planrail.plan.refs import Parser, Template, iter_strings_with_dollar, parse_template
from planrail.plan.tools import ToolRegistry, ToolSpec
from planrail.plan.validate import ValidationReport, validate

from .helpers import PLANS

# ------------------------------------------------------------------ the parser


def _parsed(parse: Any, text: str) -> tuple[str, Any]:
    try:
        t: Template = parse(text)
    except ReferenceSyntaxError as exc:
        return "error", (exc.message, exc.position)
    return "ok", (t.parts, t.references, t.single)


TRICKY = [
    "${a}",
    "${a.b.0.c}",
    "x ${a.b} y ${c} z",
    "${a}${b}",
    "${a}}",
    "}${a}",
    "$${a}",
    "$$${a}",
    "a$",
    "$5 and ${a}",
    "${",
    "${}",
    "${a",
    "${a.}",
    "${a..b}",
    "${a.01}",
    "${a.1234567890}",
    "${a.123456789}",
    "${a[0]}",
    '${a["k"]}',
    '${a["${b}"]}',
    "${a${b}}",
    "${a.__class__}",
    "${__class__}",
    "${a.__x}",
    "${1a}",
    "${a-b}",
    "${ a}",
    "${a." + ".".join(["x"] * 16) + "}",
    "${a." + ".".join(["x"] * 17) + "}",
    "${a" + ".x" * 600 + "}",
    "${" + "a" * 1021 + "}",
    "${" + "a" * 1022 + "}",
    "é ${a.ü} ${b}",
    "${é}",
    "${aé.b}",
    "${a.bé}",
    "${_}",
    "${a._.__}",
    "${a.1_}",
    "${a.0x}",
    "${a.00}",
    "${a.b.__c__}",
    "${a.b.}",
    "${.a}",
    "${a\n}",
    "${a.b c}",
]


@pytest.mark.parametrize("text", TRICKY)
def test_the_parser_agrees_with_parse_template(text: str) -> None:
    parser = Parser()
    assert _parsed(parser, text) == _parsed(parse_template, text)
    assert _parsed(parser, text) == _parsed(parse_template, text)  # remembered: the same


@settings(max_examples=400, deadline=None)
@given(st.lists(st.text(alphabet="${}.[]\"'\\ab_09xé", max_size=24), min_size=1, max_size=8))
def test_the_parser_agrees_on_any_text(texts: list[str]) -> None:
    """One parser over many strings (its memo shared between them) gives what parse_template
    gives each, errors and their offsets included."""
    parser = Parser()
    for text in texts:
        assert _parsed(parser, text) == _parsed(parse_template, text), text


def test_the_parser_shares_one_reference_between_strings() -> None:
    parser = Parser()
    a, b = parser("${s.body}"), parser("see ${s.body}")
    assert a.single is b.references[0]
    parser.clear()
    assert parser("${s.body}") == a
    assert parser("${s.body}").single is not a.single  # forgotten: parsed again


def test_objects_built_by_their_slots_are_the_ones_their_classes_build() -> None:
    """References, templates and compiled steps made without ``__init__`` compare, hash, print
    and stay frozen as the ones made with it."""
    import dataclasses

    from planrail.plan import compiled, refs
    from planrail.plan.compiled import CompiledStep
    from planrail.plan.effects import Effect
    from planrail.plan.refs import Reference

    for name, path in (("a", ()), ("a", ("b", 0)), ("x_1", ("k",) * 3)):
        fast, slow = refs._reference(name, path), Reference(name, path)
        assert (fast, hash(fast), str(fast), repr(fast)) == (
            slow,
            hash(slow),
            str(slow),
            repr(slow),
        )
        with pytest.raises(dataclasses.FrozenInstanceError):
            fast.step = "b"  # type: ignore[misc]
    ref = Reference("a")
    for parts, found in (
        ((ref,), (ref,)),
        (("x", ref), (ref,)),
        (("x",), ()),
        ((ref, ref), (ref, ref)),
    ):
        fast_t, slow_t = Template._of(parts, found), Template(parts, found)
        assert (fast_t.parts, fast_t.references, fast_t.single) == (
            slow_t.parts,
            slow_t.references,
            slow_t.single,
        )
        assert fast_t == slow_t
        assert hash(fast_t) == hash(slow_t)
    step = Step(id="a", tool="t")
    effect = Effect("none", False)
    fast_c = compiled._compiled_step(step, (("args", "x"), ref), effect)
    slow_c = CompiledStep(step, (("args", "x"), ref), effect)
    assert fast_c == slow_c
    assert repr(fast_c) == repr(slow_c)
    assert fast_c.references == slow_c.references
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast_c.effect = effect  # type: ignore[misc]


# ------------------------------------------------------------------ plain parameter schemas

SCHEMAS: list[Any] = [
    {"type": "string"},
    {"type": "integer"},
    {"type": "number"},
    {"type": "boolean"},
    {"type": "null"},
    {"type": "array"},
    {"type": "object"},
    {"type": "whatever"},
    {"type": ["string", "integer"]},
    {"type": "string", "enum": ["fast", "careful"]},
    {"type": "integer", "enum": ["a", 1]},
    {"enum": [1, True, None, "x", [1]]},
    {"enum": []},
    {"enum": "x"},
    {"type": "string", "const": "x"},
    {"anyOf": [{"type": "string"}, {"type": "integer"}]},
    {"$ref": "#/$defs/n"},
    {"type": "string", "description": "text", "minLength": 3},
    {},
    "not a schema",
]
VALUES: list[Any] = [
    "x",
    "fast",
    "",
    "a",
    "$5",
    "$${x}",
    "${s.n}",
    "${s.t} text",
    "${nope}",
    1,
    0,
    -3,
    2.0,
    2.5,
    True,
    False,
    None,
    [1, 2],
    {"k": 1},
    {"$first": ["${s.n}", 1]},
]
OUT = {"type": "object", "properties": {"n": {"type": "integer"}, "t": {"type": "string"}}}


def _types_of(text: str) -> Any:
    """The validator's answer for the few references of these tests."""
    if "$" not in text or "${" not in text.replace("$${", ""):
        return True
    if text == "${s.n}":
        return frozenset({"integer"})
    if text == "${nope}":
        return False
    return frozenset({"string"})


@pytest.mark.parametrize("schema", SCHEMAS, ids=repr)
def test_a_plain_fit_passes_only_what_the_full_check_passes(schema: Any) -> None:
    root = {"$defs": {"n": {"type": "integer"}}}
    fit = validate_args.plain_fit(schema)
    for value in VALUES:
        full = list(js.check_literal(value, schema, root, _types_of))
        if fit is not None and validate_args._fits_plainly(value, fit):
            assert full == [], (schema, value)


def test_plain_schemas_take_the_fast_path() -> None:
    """The usual parameters are plain: the fast path is not dead code."""
    assert validate_args.plain_fit({"type": "string"}) == (frozenset({str}), None)
    fit = validate_args.plain_fit({"type": "string", "enum": ["fast", 2]})
    assert fit == (frozenset(), frozenset({"fast"}))
    assert validate_args.plain_fit({"anyOf": [{"type": "string"}]}) is None
    integer = (validate_args._PLAIN_TYPES["integer"], None)
    assert validate_args._fits_plainly(3, integer)
    assert not validate_args._fits_plainly(True, integer)  # the full check says why
    assert not validate_args._fits_plainly(2.0, integer)


# ------------------------------------------------------------------ whole validations

FAST_TOOLS = ToolRegistry(
    [
        ToolSpec(
            name="make",
            input_schema={
                "type": "object",
                "properties": {
                    "n": {"type": "integer"},
                    "x": {"type": "number"},
                    "flag": {"type": "boolean"},
                    "label": {"type": "string"},
                    "mode": {"type": "string", "enum": ["fast", "careful"]},
                    "any": {},
                    "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
                    "items": {"type": "array", "items": {"type": "integer"}},
                    "ref": {"$ref": "#/$defs/n"},
                },
                "required": ["n"],
                "$defs": {"n": {"type": "integer"}},
            },
            output_schema=OUT,
            side_effects="none",
        ),
        ToolSpec(name="open", input_schema={"type": "object"}, side_effects="keyed"),
        ToolSpec(name="ask", side_effects="none", requires_approval=True),
    ]
)


_LIST = ["${s.n}", "${s.t}", "${s.n} x", "$${s.n}", "${s.n}"]
"""A list of references under an ``array`` of integers: right, wrong, text, an escape."""


def _nasty_plan() -> dict[str, Any]:
    """Every kind of literal and reference the fast paths see, right and wrong."""
    steps: list[dict[str, Any]] = [{"id": "s", "tool": "make", "args": {"n": 1}}]
    for i, value in enumerate(VALUES):
        for param in ("n", "x", "flag", "label", "mode", "any", "either", "items", "ref"):
            steps.append(
                {
                    "id": f"p{i}_{param}",
                    "tool": "make",
                    "args": {"n": 1, param: value} if param != "n" else {"n": value},
                    "depends_on": ["s"],
                }
            )
    S = ["s"]
    steps += [
        {"id": "fan", "tool": "make", "args": {"n": "${item}"}, "for_each": "${s.t}"},
        {"id": "fan2", "tool": "make", "args": {"n": "${fan.0.n}"}, "depends_on": ["fan"]},
        {"id": "d1", "tool": "make", "args": {"n": 1, "flag": True}},
        {"id": "d2", "tool": "make", "args": {"flag": True, "n": 1}},
        {"id": "d3", "tool": "make", "args": {"n": True, "flag": True}},
        {"id": "d4", "tool": "make", "args": {"n": 1.0, "flag": True}},
        {"id": "u", "tool": "make", "args": {"n": 1, "nope": "${s.zzz}", "q": "${ghost.n}"}},
        {
            "id": "f",
            "tool": "make",
            "args": {"n": {"$first": ["${s.n}", 2]}},
            "join": "any_succeeded",
            "depends_on": ["s"],
        },
        {"id": "e1", "tool": "open", "args": {"k": "${s.n}"}, "depends_on": ["s"]},
        {"id": "e2", "tool": "ask", "args": {}, "requires_approval": False},
        {"id": "e3", "tool": "open", "args": {}, "fallback": {"tool": "ask", "args": {}}},
        {"id": "e4", "action": "llm_call", "prompt": "${s.t} and $${x} and ${s[0]} ${s.__x__}"},
        {"id": "e5", "tool": "missing", "args": {"a": "${e4}"}, "depends_on": ["e4"]},
        {"id": "bad", "tool": "make", "args": {"n": "${s.n"}, "depends_on": ["s"]},
        {"id": "deep", "tool": "make", "args": {"n": 1, "items": ["${s.n}", {"k": "${s.q}"}]}},
        {"id": "l1", "tool": "make", "args": {"n": 1, "items": _LIST, "x": 0.5}, "depends_on": S},
        {"id": "l2", "tool": "make", "args": {"x": 0.5, "items": _LIST, "n": 1}, "depends_on": S},
        {"id": "l3", "tool": "make", "args": {"n": 1, "items": _LIST[::-1]}, "depends_on": S},
        {"id": "l4", "tool": "make", "args": {"items": ["${ghost}", "TBD", "${s.n", "<i>"]}},
        {"id": "alias", "tool_name": "make", "params": {"n": "${s.n}"}, "deps": ["s"]},
    ]
    return {"goal": "fast paths", "steps": steps, "output": {"a": "${s.n}", "b": "${fan}"}}


def _generated(n: int) -> dict[str, Any]:
    """A valid plan like ``bench.validation``'s: whole, field and embedded references."""
    steps: list[dict[str, Any]] = [{"id": "s0", "tool": "make", "args": {"n": 1, "mode": "fast"}}]
    for i in range(1, n):
        near, far = f"s{max(0, i - 1 - i % 7)}", f"s{i // 2}"
        if i % 10 == 0:
            prompt = f"Summarise ${{{near}.t}} for ${{{far}}}."
            steps.append(
                {
                    "id": f"s{i}",
                    "action": "llm_call",
                    "prompt": prompt,
                    "output_schema": OUT,
                    "depends_on": [near, far],
                }
            )
            continue
        args = {
            "n": f"${{{far}.n}}",
            "label": f"from ${{{near}.t}} and ${{{far}}}",
            "x": i,
            "mode": "careful",
        }
        steps.append(
            {"id": f"s{i}", "tool": "make", "args": args, "depends_on": sorted({near, far})}
        )
    return {"goal": "generated", "steps": steps, "output": "${s0.t}"}


def _plans() -> Iterator[tuple[str, Any, ToolRegistry]]:
    yield "nasty", _nasty_plan(), FAST_TOOLS
    yield "generated", _generated(300), FAST_TOOLS
    catalog = ToolRegistry(load_catalog(PLANS / "tools.catalog.json"))
    for path in sorted(PLANS.glob("*.json")) + sorted(PLANS.glob("*.yaml")):
        if path.name != "tools.catalog.json":
            yield path.name, path, catalog


def _report(report: ValidationReport) -> tuple[Any, ...]:
    compiled = report.compiled
    steps = (
        None
        if compiled is None
        else {sid: (c.references, c.effect) for sid, c in compiled.steps.items()}
    )
    return report.to_dict(), steps


def _full_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every fast path replaced by what it stands in for."""
    monkeypatch.setattr(Parser, "__call__", lambda self, text: parse_template(text))
    monkeypatch.setattr(validate_args, "plain_fit", lambda schema: None)
    monkeypatch.setattr(validate_args, "_reference_problems", lambda *args: None)
    monkeypatch.setattr(
        validate_args,
        "_literal_problems",
        lambda ctx, value, schema, root, types_of: list(
            js.check_literal(value, schema, root, types_of)
        ),
    )
    monkeypatch.setattr(
        StepEffects, "__call__", lambda self, step: step_effect(step, self.registry)
    )
    monkeypatch.setattr(duplicates, "_call_key", _old_call_key)
    monkeypatch.setattr(duplicates, "_rough_key", lambda tool, args: ())  # every call exact
    monkeypatch.setattr(validate_policies, "has_first", _walked_has_first)
    monkeypatch.setattr(validate_refs, "_dollar_strings", _walked_strings)
    monkeypatch.setattr(validate_shape, "plain_step", lambda raw: None)


def _old_call_key(tool: str, args: dict[str, Any]) -> tuple[str, Any] | None:
    """The key before the flat one was a set."""
    if all(type(v) in (str, int, bool, type(None)) for v in args.values()):
        return tool, tuple(sorted((k, type(v).__name__, v) for k, v in args.items()))
    try:
        return tool, json.dumps(args, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        return None


def _walked_strings(step: Step, *_memos: Any) -> list[tuple[Any, str]]:
    """The strings that may hold references, by the one walk, field by field."""
    return [x for field, value in step_fields(step) for x in iter_strings_with_dollar(value, field)]


def _walked_has_first(value: Any) -> bool:
    """has_first without its shortcut for flat arguments."""
    stack = [value]
    while stack:
        v = stack.pop()
        if type(v) is dict:
            if first.FIRST in v:
                return True
            stack.extend(v.values())
        elif type(v) is list:
            stack.extend(v)
    return False


_FIELDS_STEPS = [
    {"id": "a", "tool": "t", "args": {"x": "${b.c}", "n": 1, "y": "no"}},
    {"id": "a", "tool": "t", "args": {"x": ["${b.c}", {"k": "${d}"}], "z": "${e}"}},
    {"id": "a", "tool": "t", "args": {"x": ["${b}", "no", "${c.d}"], "n": 0.5, "z": "${e}"}},
    {"id": "a", "tool": "t", "args": {"x": ["${b}"], "y": ["${c}", 1], "z": "${e}"}},
    {"id": "a", "tool": "t", "args": {"x": [], "y": ["${c}"]}, "prompt": "${d}"},
    {"id": "a", "action": "llm_call", "prompt": "see ${b.c}", "args": {"x": "${d}"}},
    {"id": "a", "action": "condition_check", "condition": {"==": ["${b}", 1]}},
    {"id": "a", "tool": "t", "when": {"==": ["${b}", "${c.d}"]}},
    {"id": "a", "tool": "t", "args": {"i": "${item}"}, "for_each": "${b.list}"},
    {"id": "a", "tool": "t", "fallback": {"tool": "u", "args": {"x": "${b}"}}},
    {"id": "a", "tool": "t", "fallback": {"value": {"v": "${b.c}"}}},
    {"id": "a", "tool": "t", "repeat": {"until": {"==": ["${self.n}", 3]}, "max_iterations": 2}},
]


@pytest.mark.parametrize("raw", _FIELDS_STEPS)
def test_the_strings_read_without_the_walk_are_the_walks(raw: dict[str, Any]) -> None:
    """In order, with equal paths given as one object."""
    step = Step.model_validate(raw)
    paths: dict[Any, Any] = {}
    arg_paths: dict[str, Any] = {}
    got = validate_refs._dollar_strings(step, paths, arg_paths)
    assert got == _walked_strings(step)
    again = validate_refs._dollar_strings(step, paths, arg_paths)
    assert all(a[0] is b[0] for a, b in zip(got, again, strict=True))


@pytest.mark.parametrize("name", [name for name, _, _ in _plans()])
def test_fast_and_full_paths_report_the_same(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Errors, warnings (codes, paths, messages, order), references and effects alike."""
    _, source, tools = next(p for p in _plans() if p[0] == name)
    fast = _report(validate(copy.deepcopy(source), tools))
    with monkeypatch.context() as m:
        _full_paths(m)
        full = _report(validate(copy.deepcopy(source), tools))
    assert fast == full


def test_the_nasty_plan_reports_what_the_fast_paths_skip() -> None:
    """The comparison above is not between two empty reports."""
    report = validate(_nasty_plan(), FAST_TOOLS)
    found = {i.code for i in report.errors} | {i.code for i in report.warnings}
    assert validate(_generated(300), FAST_TOOLS).valid
    assert {
        "type_mismatch",
        "unknown_argument",
        "unknown_output_field",
        "unknown_step_reference",
        "invalid_reference",
        "unknown_tool",
        "duplicate_call",
    } <= found
    dup = [i.step for i in report.warnings if i.code == "duplicate_call"]
    # keys in another order are the same call; True is not 1, 1.0 is not 1
    assert "d2" in dup
    assert "d3" not in dup
    assert "d4" not in dup
    assert "l2" in dup  # lists and floats: the rough key, then the exact one
    assert "l3" not in dup
    l1 = [i for i in report.errors if i.code == "type_mismatch" and i.step == "l1"]
    mismatched = {i.path.split(".", 2)[2] for i in l1}
    assert mismatched == {"args.items[1]", "args.items[2]", "args.items[3]"}  # not 0 nor 4


# ------------------------------------------------------------------ steps built directly


class _Id(str):
    pass


_TEXT = st.sampled_from(["a", "${a.b}", "", "tool_call"])
_OBJECT = st.dictionaries(
    st.sampled_from(["k", "type", "${x}"]),
    st.one_of(st.none(), st.text(max_size=3), st.lists(st.integers(), max_size=2)),
    max_size=3,
)
_PLAIN_FIELDS = {
    "action": st.sampled_from(["tool_call", "llm_call", "condition_check"]),
    "tool": st.one_of(_TEXT, st.none()),
    "args": _OBJECT,
    "depends_on": st.one_of(
        st.lists(st.sampled_from(["a", "b"]), max_size=3),
        st.lists(st.sampled_from(["a", "b"]), max_size=3).map(tuple),
    ),
    "description": st.one_of(_TEXT, st.none()),
    "prompt": st.one_of(_TEXT, st.none()),
    "output_schema": st.one_of(_OBJECT, st.none()),
    "model": st.one_of(_TEXT, st.none()),
}
_WRONG = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(0, 2),
    st.floats(allow_nan=False, width=16),
    st.builds(_Id, st.sampled_from(["a", "tool_call"])),
    st.sampled_from(["call_tool", "{}", "3"]),
    st.lists(st.sampled_from(["a", _Id("c"), 1, None]), min_size=1, max_size=2),
    st.frozensets(st.sampled_from(["a", "b"]), max_size=2),
    st.dictionaries(st.one_of(st.just(_Id("j")), st.integers(0, 1)), st.integers(), max_size=2),
    _OBJECT,
)
_RAW_STEPS = st.tuples(
    st.fixed_dictionaries({"id": st.just("s")}, optional=_PLAIN_FIELDS),
    st.lists(
        st.tuples(st.sampled_from([*_PLAIN_FIELDS, "id", "when", "timeout", "join", "x"]), _WRONG),
        max_size=1,
    ),
).map(lambda pair: {**pair[0], **dict(pair[1])})


def _built(build: Any, raw: dict[str, Any]) -> Any:
    try:
        step = build(raw)
    except pydantic.ValidationError as exc:
        return "error", str(exc)
    if step is None:
        return None
    values = {k: (type(v), v) for k, v in step.__dict__.items()}
    return values, step.model_fields_set, step.__pydantic_extra__, step.__pydantic_private__


@settings(max_examples=600, deadline=None)
@given(_RAW_STEPS, st.sampled_from([True, True, True, False]))
@example({"id": "a", "args": {"k": [1]}, "depends_on": ["b"], "output_schema": None}, True)
@example({"id": "a", "action": "llm_call", "prompt": "p", "output_schema": {"type": "x"}}, True)
@example({"id": _Id("a")}, True)
@example({"id": "a", "tool": None, "depends_on": ("b",)}, True)
@example({"id": "a", "args": {_Id("k"): 1}}, True)
@example({"tool": "t"}, False)
def test_a_step_built_directly_is_the_one_pydantic_builds(
    raw: dict[str, Any], with_id: bool
) -> None:
    """Field for field (values and their types), fields set and extras alike; whatever it does
    not build, pydantic builds or refuses — and a built step shares no dict with ``raw``."""
    if not with_id:
        raw.pop("id", None)
    fast = _built(plain_step, raw)
    if fast is None:
        return
    assert fast == _built(Step.model_validate, raw)
    step = plain_step(raw)
    assert step is not None
    assert step == Step.model_validate(raw)
    assert step.model_dump() == Step.model_validate(raw).model_dump()
    assert repr(step) == repr(Step.model_validate(raw))
    for name in ("args", "output_schema"):
        if raw.get(name) is not None:
            assert getattr(step, name) is not raw[name]


def test_the_usual_steps_are_built_directly() -> None:
    """The comparison above is not between two refusals."""
    assert plain_step({"id": "a", "tool": "t", "args": {"x": "${b.c}"}, "depends_on": ["b"]})
    assert plain_step({"id": "a", "action": "llm_call", "prompt": "p", "output_schema": {}})
    assert plain_step({"id": "a", "tool": "t", "timeout": 3}) is None
    assert plain_step({"id": "a", "action": "call_tool"}) is None


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(alphabet="aZ_09é\n -", max_size=66), st.integers(), st.none()))
@example("a" * 64)
@example("a" * 65)
@example("a\n")
@example("_")
@example("9a")
def test_an_id_passed_without_the_pattern_matches_it(sid: Any) -> None:
    if validate_shape._plain_id(sid):
        assert validate_shape._ID_RE.match(sid)


def _graph_plans() -> Iterator[Any]:
    for _, source, _ in _plans():
        yield source
    steps: list[dict[str, Any]] = [
        {"id": "a", "tool": "make", "args": {"n": "${c.n}"}, "depends_on": ["c"]},  # later
        {"id": "b", "tool": "make", "args": {"n": 1}, "depends_on": ["b", "zz", "a", "a"]},
        {"id": "c", "tool": "make", "args": {"n": "${b.n}"}},  # undeclared
        {"id": "c", "tool": "make", "args": {"n": "${a.n}"}, "depends_on": ["a"]},  # repeated
        {"id": "d", "tool": "make", "args": {"n": "${d.n}", "x": "${item}"}},
    ]
    yield {"steps": steps}
    yield {"steps": steps[1:]}
    yield {"steps": [{**steps[1], "depends_on": ["a"]}, steps[0]]}


@pytest.mark.parametrize("source", list(_graph_plans()), ids=repr)
def test_the_edges_and_the_plan_order_read_at_c_speed_are_the_walks(source: Any) -> None:
    """The edges (each step's depends_on read whole when it names known other steps) are the
    filtered depends_on and the references, and in_plan_order says what they say."""
    from planrail.plan.validate import _PASSES
    from planrail.plan.validate_context import Context
    from planrail.plan.validate_shape import load_pass

    ctx = Context(FAST_TOOLS, PlanLimits())
    load_pass(ctx, copy.deepcopy(source))
    if ctx.raw is None:
        return  # not loaded: no graph
    for pass_ in _PASSES[: _PASSES.index(validate_refs.references_pass) + 1]:
        pass_(ctx)
    edges = ctx.edges()
    known = ctx.known
    assert list(edges) == list(known)
    for sid, step in ctx.first.items():
        refs = [r.step for _, r in ctx.refs.get(sid, []) if r.step != sid]
        assert edges[sid] == [d for d in step.depends_on if d in known and d != sid] + refs
    assert ctx.in_plan_order() == all(known[d] < known[s] for s, ds in edges.items() for d in ds)


@settings(max_examples=400, deadline=None)
@given(
    st.one_of(
        st.text(alphabet="${}<>#Ea b_TBDtodo", max_size=24),
        st.sampled_from(["TBD", " your_x", "YOUR_name", "your x", "${a}", "x ${a} $${b}", "fast"]),
    )
)
def test_placeholder_candidates_of_flat_arguments_are_the_walks(text: str) -> None:
    """A string argument read in the flat loop is a candidate exactly when the walk (through
    ``_literal``) makes it one, with the same literal text."""
    from planrail.plan import placeholders
    from planrail.plan.validate_context import Context

    ctx = Context(FAST_TOOLS, PlanLimits())
    with contextlib.suppress(ReferenceSyntaxError):
        ctx.template(text)
    flat = placeholders._candidates(ctx, {"k": text}, frozenset())
    walked = placeholders._candidates(ctx, [text], frozenset())
    assert flat == [(("k",), t) for _, t in walked]


_PLACEHOLDER_TEXT = st.one_of(
    st.text(alphabet="${}<>#Ea b_TBDtodo", max_size=12),
    st.sampled_from(["TBD", "your_x", "${a}", "x ${a} <b>", "fast", "{{a.id}}"]),
)
_NESTED = st.recursive(
    st.one_of(_PLACEHOLDER_TEXT, st.integers(-1, 2), st.none(), st.booleans()),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(["a", "b", "c", "template"]), inner, max_size=3),
    ),
    max_leaves=12,
)


@settings(max_examples=400, deadline=None)
@given(_NESTED, st.sampled_from([frozenset(), frozenset({"template"})]))
def test_placeholder_candidates_are_the_generic_walks_in_its_order(
    value: Any, skip: frozenset[str]
) -> None:
    """Lists of strings are read without pushing each item: the same candidates, paths and
    order (the order issues are reported in) as the walk that pushes every value."""
    from planrail.plan import placeholders
    from planrail.plan.validate_context import Context

    ctx = Context(FAST_TOOLS, PlanLimits())
    for text in _strings_in(value):
        with contextlib.suppress(ReferenceSyntaxError):
            ctx.template(text)
    assert placeholders._candidates(ctx, value, skip) == _pushed_candidates(ctx, value, skip)


def _strings_in(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
    return [s for v in items for s in _strings_in(v)]


def _pushed_candidates(ctx: Any, value: Any, skip: frozenset[str]) -> list[Any]:
    """placeholders._candidates as it was: every value of a container pushed, then popped."""
    from planrail.plan import placeholders

    out: list[Any] = []
    stack: list[Any] = []
    if type(value) is dict:
        for k, v in value.items():
            if type(v) is str:
                text = placeholders._literal(ctx, v)
                if text is not None and k not in skip:
                    out.append(((k,), text))
            elif type(v) in (int, float, bool, type(None)):
                continue
            elif k not in skip:
                stack.append(((k,), v))
    else:
        stack.append(((), value))
    while stack:
        segs, v = stack.pop()
        if type(v) is str:
            text = placeholders._literal(ctx, v)
            if text is not None:
                out.append((segs, text))
        elif type(v) is dict:
            stack.extend(((*segs, k), x) for k, x in v.items())
        elif type(v) is list:
            stack.extend(((*segs, i), x) for i, x in enumerate(v))
    return out


_FLAT_ARGS = st.dictionaries(
    st.sampled_from(["a", "b", "c"]),
    st.one_of(st.sampled_from([0, 1, True, False, None, "1", "", "a"]), st.integers(-1, 2)),
    max_size=3,
)


@settings(max_examples=400, deadline=None)
@given(_FLAT_ARGS, _FLAT_ARGS)
@example({"a": 1}, {"a": True})
@example({"a": 0, "b": False}, {"a": False, "b": 0})
@example({"a": 1, "b": "x"}, {"b": "x", "a": 1})
def test_the_flat_duplicate_key_tells_calls_apart_as_the_sorted_one(
    a: dict[str, Any], b: dict[str, Any]
) -> None:
    assert (duplicates._call_key("t", a) == duplicates._call_key("t", b)) == (
        _old_call_key("t", a) == _old_call_key("t", b)
    )


# ------------------------------------------------------------------ effects, $first


def test_step_effects_agree_with_step_effect_for_every_kind_of_step() -> None:
    effects = StepEffects(FAST_TOOLS)
    for tool in ("make", "open", "ask", "missing", None):
        for fallback in (None, "make", "open", "ask", "missing"):
            for approval in (None, True, False):
                for action in ("tool_call", "llm_call"):
                    data: dict[str, Any] = {"id": "a", "action": action, "tool": tool}
                    if action == "llm_call":
                        data["prompt"] = "p"
                    if fallback is not None:
                        data["fallback"] = Fallback(tool=fallback)
                    if approval is not None:
                        data["requires_approval"] = approval
                    step = Step(**data)
                    assert effects(step) == step_effect(step, FAST_TOOLS)
                    assert effects(step) == step_effect(step, FAST_TOOLS)  # remembered


@pytest.mark.parametrize(
    "value",
    [
        {},
        {"a": 1},
        {"$first": []},
        {"a": {"$first": [1]}},
        {"a": [{"$first": [1]}]},
        [],
        "x",
        {"a": ["x", "${b}", 2, None], "c": 1.5},
        {"a": ["x", {"$first": ["${b}"]}]},
        {"a": [["x"], "y"]},
        {"a": [[{"$first": []}]]},
        {"a": ["x"], "b": {"$first": []}},
    ],
)
def test_has_first_on_flat_arguments_agrees_with_the_walk(value: Any) -> None:
    assert first.has_first(value) == _walked_has_first(value)


# ------------------------------------------------------------------ the bounds


class _Text(str):
    pass


_CHARS = st.sampled_from(["a", "\x80", "\u00e9", "\ud800", "\udfff", "\U0001f600"])
_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6),
    st.text(_CHARS, max_size=3),  # lone surrogates among other text
    st.builds(_Text, st.text(max_size=3)),
    st.just(()),
)
_DATA = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.one_of(st.text(max_size=3), st.text(_CHARS, max_size=2), st.integers(0, 2)),
            inner,
            max_size=4,
        ),
    ),
    max_leaves=30,
)


def _bounded(check: Any, data: Any, limits: PlanLimits) -> tuple[str, str] | None:
    try:
        check(data, limits)
    except PlanLoadError as exc:
        return type(exc).__name__, exc.message
    return None


@settings(max_examples=400, deadline=None)
@given(_DATA, st.integers(1, 40), st.integers(1, 5), st.integers(0, 6))
@example([float("nan")], 40, 5, 6)
@example({"a": [1, {"b": float("inf")}]}, 40, 5, 6)
@example({"a": "x" * 7}, 40, 5, 6)
@example([[[[[[1]]]]]], 40, 5, 6)
@example({1: 2}, 40, 5, 6)
@example({"a": _Text("x")}, 40, 5, 6)
@example([(), 1], 40, 5, 6)
@example([1, [2, 3], {"a": 4}], 5, 5, 6)
@example([1, [2, 3], {"a": 4}], 6, 5, 6)
@example(float("nan"), 1, 1, 1)
def test_check_bounds_agrees_with_the_full_walk(
    data: Any, max_nodes: int, max_depth: int, max_len: int
) -> None:
    """The same problem (type and message) or none, whatever the data and the limits."""
    limits = PlanLimits(max_nodes=max_nodes, max_depth=max_depth, max_string_length=max_len)
    assert _bounded(check_bounds, data, limits) == _bounded(loader._check_bounds, data, limits)


class _Text(str):
    pass


_ANY_ARGS = st.dictionaries(
    st.sampled_from(["a", "b", "c"]),
    st.one_of(
        st.sampled_from([0, 1, True, False, None, "1", "", "a", 1.0, 0.5, float("nan")]),
        st.sampled_from([_Text("a"), _Text("1")]),
        st.lists(st.sampled_from([0, "a", None, 1.0]), max_size=2),
        st.dictionaries(st.sampled_from(["x", "y"]), st.sampled_from([0, "a", True]), max_size=2),
    ),
    max_size=3,
)


@settings(max_examples=600, deadline=None)
@given(_ANY_ARGS, _ANY_ARGS)
@example({"a": [1], "b": "x"}, {"b": _Text("x"), "a": [1]})
@example({"a": [0], "b": 1}, {"a": [0], "b": True})
def test_two_same_calls_have_the_same_rough_key(a: dict[str, Any], b: dict[str, Any]) -> None:
    """The rough key only sorts steps before the exact one is built: two calls with one exact
    key must never have two rough keys (then a duplicate would go unseen)."""
    if duplicates._call_key("t", a) == duplicates._call_key("t", b):
        assert duplicates._rough_key("t", a) == duplicates._rough_key("t", b)
    # the same call written in another key order: the two keys agree every time
    reordered = dict(reversed(list(a.items())))
    assert duplicates._call_key("t", reordered) == duplicates._call_key("t", a)
    assert duplicates._rough_key("t", reordered) == duplicates._rough_key("t", a)
