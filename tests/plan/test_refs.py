"""The reference grammar, its bounds, and the JSON-only resolver."""

from __future__ import annotations

import contextlib
from typing import Any, NoReturn

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planrail.errors import ReferenceResolutionError, ReferenceSyntaxError
from planrail.plan.refs import (
    MAX_REFERENCE_LENGTH,
    MAX_SEGMENTS,
    Reference,
    Template,
    iter_references,
    iter_strings_with_dollar,
    json_path,
    parse_reference,
    parse_template,
    resolve_path,
)
from planrail.plan.resolve import copy_json, resolve_value
from planrail.plan.validate import validate

OUTPUTS: dict[str, Any] = {
    "fetch": {
        "headers": {"content-type": "text/html", 'say "hi"': 1, "back\\slash": 2},
        "items": [{"id": 7, "tags": ["a", "b"]}, {"id": 8, "tags": []}],
        "count": 2,
        "ok": True,
        "none": None,
        "ratio": 0.5,
    },
    "hotels": {"Le Marais Boutique": {"rating": 4.5}},
    "text": "plain",
}

# ---------------------------------------------------------------- grammar


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("${fetch}", Reference("fetch")),
        ("${fetch.count}", Reference("fetch", ("count",))),
        ("${fetch.items.0.id}", Reference("fetch", ("items", 0, "id"))),
        ("${fetch.items[1].tags[0]}", Reference("fetch", ("items", 1, "tags", 0))),
        ('${fetch.headers["content-type"]}', Reference("fetch", ("headers", "content-type"))),
        ("${fetch.headers['content-type']}", Reference("fetch", ("headers", "content-type"))),
        ('${hotels["Le Marais Boutique"].rating}',
         Reference("hotels", ("Le Marais Boutique", "rating"))),
        (r'${fetch.headers["say \"hi\""]}', Reference("fetch", ("headers", 'say "hi"'))),
        (r'${fetch.headers["back\\slash"]}', Reference("fetch", ("headers", "back\\slash"))),
        (r"${x['it\'s']}", Reference("x", ("it's",))),
        ('${x["__class__"]}', Reference("x", ("__class__",))),
        ('${x["a}b"]}', Reference("x", ("a}b",))),
        ("${_private.x_1}", Reference("_private", ("x_1",))),
        ("${s.123456789}", Reference("s", (123456789,))),
    ],
)  # fmt: skip
def test_reference_grammar_accepts(text: str, expected: Reference) -> None:
    """Identifiers, dotted/bracketed indexes, quoted keys with \\\\ and \\" escapes all parse."""
    assert parse_reference(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "${}",
        "${1abc}",
        "${a.}",
        "${a..b}",
        "${a b}",
        "${ a}",
        "${a",
        "${a.b",
        "${a[0}",
        "${a[]}",
        "${a[x]}",
        "${a[-1]}",
        "${a.01}",
        "${a[01]}",
        "${a.1234567890}",
        '${a["unterminated]}',
        r'${a["bad \n escape"]}',
        "${a.__class__}",
        "${a.__init__.x}",
        "${s1.__class__.__init__}",
        "${a}b",
        "fetch",
        "$fetch",
    ],
)
def test_reference_grammar_rejects(text: str) -> None:
    """Malformed references (dunder names included) raise ReferenceSyntaxError, nothing else."""
    with pytest.raises(ReferenceSyntaxError):
        parse_reference(text)


def test_syntax_error_carries_the_offset() -> None:
    """The error names the offset of the problem, and the message quotes the reference."""
    with pytest.raises(ReferenceSyntaxError) as info:
        parse_reference("${fetch.items..x}")
    assert info.value.position == 14
    assert "offset 14" in info.value.message
    assert "${fetch.items..x}" in info.value.message


def test_dunder_names_are_rejected_with_a_hint() -> None:
    """``${s1.__class__}`` is refused; the message says how to write such a key if it is real."""
    with pytest.raises(ReferenceSyntaxError, match=r'\["__class__"\]'):
        parse_reference("${s1.__class__}")


def test_dunder_like_names_that_are_not_dunders_are_fine() -> None:
    """``__x``, ``x__`` and ``____`` are ordinary identifiers (only ``__name__`` is refused)."""
    assert parse_reference("${s.__x.x__.____}").path == ("__x", "x__", "____")


def test_sixteen_segments_is_the_limit() -> None:
    """At most MAX_SEGMENTS (16) path segments after the step id."""
    assert MAX_SEGMENTS == 16
    ok = "${s" + ".a" * 16 + "}"
    assert len(parse_reference(ok).path) == 16
    with pytest.raises(ReferenceSyntaxError, match="more than 16 path segments"):
        parse_reference("${s" + ".a" * 17 + "}")
    with pytest.raises(ReferenceSyntaxError, match="more than 16 path segments"):
        parse_reference("${s" + "[0]" * 17 + "}")


def test_reference_length_is_bounded() -> None:
    """A reference may be MAX_REFERENCE_LENGTH characters (braces included), not one more."""
    assert MAX_REFERENCE_LENGTH == 1024
    step = "s" * (MAX_REFERENCE_LENGTH - 3)
    assert parse_reference("${" + step + "}").step == step
    with pytest.raises(ReferenceSyntaxError, match="longer than 1024"):
        parse_reference("${" + step + "s}")


def test_a_one_megabyte_reference_is_refused_after_reading_at_most_the_bound() -> None:
    """A 1 MB ``${...`` string fails with a clipped message, not a 1 MB one."""
    text = "${s." + "a" * 1_000_000 + "}"
    with pytest.raises(ReferenceSyntaxError) as info:
        parse_template(text)
    assert len(info.value.message) < 200


# ---------------------------------------------------------------- templates


def test_template_splits_text_and_references() -> None:
    """Embedded references split a string into literal parts and references, in order."""
    t = parse_template("Welcome, ${account.name}! Your id: ${account.user_id}.")
    assert t.parts == (
        "Welcome, ",
        Reference("account", ("name",)),
        "! Your id: ",
        Reference("account", ("user_id",)),
        ".",
    )
    assert t.single is None
    assert t.references == (Reference("account", ("name",)), Reference("account", ("user_id",)))


def test_double_dollar_escapes_a_literal_reference() -> None:
    """``$${`` is a literal ``${``: ``$${x}`` is the text ``${x}``, not a reference."""
    t = parse_template("cost: $${price} and ${a.b}")
    assert t.parts == ("cost: ${price} and ", Reference("a", ("b",)))
    assert parse_template("$${x}").parts == ("${x}",)
    assert parse_template("$${x}").references == ()


def test_lone_dollars_are_literal() -> None:
    """A ``$`` not followed by ``{`` is ordinary text."""
    assert parse_template("$5 and $$ and $").parts == ("$5 and $$ and $",)


@pytest.mark.parametrize("text", ["{0.__class__}", "{{ x }}", "{x}", "%(x)s", "{0!r:>{1}}"])
def test_format_and_template_syntax_is_inert_text(text: str) -> None:
    """``str.format`` / Jinja syntax is plain text: no reference, rendered unchanged."""
    t = parse_template(text)
    assert t.references == ()
    assert t.render(OUTPUTS) == text
    assert resolve_value({"x": text}, OUTPUTS) == {"x": text}


def test_inert_text_in_a_plan_is_accepted_unchanged() -> None:
    """A plan whose args contain ``{0.__class__}`` and ``{{ x }}`` is valid; the text is data."""
    plan = {"steps": [{"id": "s1", "tool": "t", "args": {"a": "{0.__class__}", "b": "{{ x }}"}}]}
    report = validate(plan)
    assert report.valid
    assert report.plan is not None
    assert report.plan.steps[0].args == {"a": "{0.__class__}", "b": "{{ x }}"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("${fetch.count}", 2),
        ("${fetch.ok}", True),
        ("${fetch.none}", None),
        ("${fetch.ratio}", 0.5),
        ("${fetch.items.0}", {"id": 7, "tags": ["a", "b"]}),
        ("${fetch.items[0].tags}", ["a", "b"]),
        ("${text}", "plain"),
        ('${hotels["Le Marais Boutique"].rating}', 4.5),
    ],
)
def test_a_whole_string_reference_keeps_the_value_type(text: str, expected: Any) -> None:
    """A string that is exactly one reference renders to the referenced value, type preserved."""
    value = parse_template(text).render(OUTPUTS)
    assert value == expected
    assert type(value) is type(expected)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("n=${fetch.count}", "n=2"),
        ("${fetch.ok}!", "true!"),
        ("[${fetch.none}]", "[null]"),
        ("tags: ${fetch.items.0.tags}", 'tags: ["a","b"]'),
        ("${text} ${text}", "plain plain"),
        ("${fetch.count}${fetch.count}", "22"),
    ],
)
def test_embedded_references_interpolate_as_text(text: str, expected: str) -> None:
    """Inside longer text, strings go in as they are and everything else as compact JSON."""
    assert parse_template(text).render(OUTPUTS) == expected


def test_resolve_value_fills_nested_args_and_copies() -> None:
    """resolve_value fills references anywhere in args and shares no containers with outputs."""
    args = {"items": ["${fetch.items}", {"n": "${fetch.count}"}], "s": "x ${text}", "k": 3}
    out = resolve_value(args, OUTPUTS)
    assert out == {"items": [OUTPUTS["fetch"]["items"], {"n": 2}], "s": "x plain", "k": 3}
    out["items"][0][0]["id"] = 99
    assert OUTPUTS["fetch"]["items"][0]["id"] == 7


def _containers(value: Any) -> list[Any]:
    found, stack = [], [value]
    while stack:
        v = stack.pop()
        if type(v) in (dict, list):
            found.append(v)
            stack.extend(v.values() if type(v) is dict else v)
    return found


@pytest.mark.parametrize("depth", [1, 31, 32, 33, 400])
def test_copy_json_shares_no_container_at_any_depth(depth: int) -> None:
    """copy_json recurses for shallow data and goes on iteratively past that: either way the
    copy is equal and shares no dict or list with the original."""
    value: Any = {"leaf": [1, "s", None, 2.5, True]}
    for i in range(depth):
        value = [{"k": value, "i": i}] if i % 2 else {"d": value, "t": "x"}
    copied = copy_json(value)
    assert copied == value
    originals = {id(c) for c in _containers(value)}
    assert not originals & {id(c) for c in _containers(copied)}


def test_copy_json_of_very_deep_data_does_not_exhaust_the_stack() -> None:
    """A tool may return data nested 100,000 deep: the copy is made, level for level."""
    value: Any = []
    bottom = value
    for _ in range(100_000):
        bottom.append([])
        bottom = bottom[0]
    bottom.append({"end": True})
    copied, original, depth = copy_json(value), value, 0
    while original and type(original[0]) is list:
        assert copied is not original
        copied, original, depth = copied[0], original[0], depth + 1
    assert depth == 100_000
    assert copied == [{"end": True}]
    assert copied[0] is not original[0]


def test_resolve_value_hands_first_objects_to_its_hook() -> None:
    """With on_first, a {"$first": ...} object is replaced by what the hook returns (anywhere);
    without it, the object is filled like any other mapping."""
    args = {"a": {"$first": ["${x}", 1]}, "b": [{"$first": ["${y}"]}], "c": "${text}"}
    seen: list[Any] = []

    def hook(obj: dict[str, Any], outputs: Any) -> Any:
        seen.append(obj)
        return "chosen"

    assert resolve_value(args, OUTPUTS, hook) == {"a": "chosen", "b": ["chosen"], "c": "plain"}
    assert seen == [args["a"], args["b"][0]]
    assert resolve_value({"$first": [1, 2]}, OUTPUTS) == {"$first": [1, 2]}


def test_iter_references_finds_every_string_with_paths() -> None:
    """iter_references yields the path of every reference-holding string in nested data."""
    value = {"a": ["x", "${s.x}"], "b": {"c": "y ${t}"}, "d": 3}
    found = {path: t.references for path, t in iter_references(value)}
    assert found == {("a", 1): (Reference("s", ("x",)),), ("b", "c"): (Reference("t"),)}


def test_strings_with_a_dollar_come_in_document_order_with_their_json_paths() -> None:
    """The one walk every reference consumer shares: strings holding a ``$`` (even a malformed
    or escaped one), in document order, with paths that ``json_path`` writes as JSONPath."""
    value = {"z": "${a}", "m": [1, {"k": "$${lit}"}, "${b"], "a": "plain", "e": []}
    found = [(json_path("$.args", p), text) for p, text in iter_strings_with_dollar(value)]
    assert found == [("$.args.z", "${a}"), ("$.args.m[1].k", "$${lit}"), ("$.args.m[2]", "${b")]
    assert list(iter_strings_with_dollar("${x}", ("root",))) == [(("root",), "${x}")]
    assert list(iter_strings_with_dollar(7)) == []


# ---------------------------------------------------------------- resolver


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("${nope}", "has no recorded output"),
        ("${fetch.missing}", "has no key 'missing'"),
        ("${fetch.items.5}", "out of range"),
        ("${fetch.items.x}", "indexes a list"),
        ("${fetch.count.x}", "cannot index a number"),
        ("${text.0}", "cannot index a string"),
        ("${fetch.none.x}", "cannot index a null"),
    ],
)
def test_unresolvable_references_raise_and_never_become_none(text: str, fragment: str) -> None:
    """A reference that points at nothing raises ReferenceResolutionError naming the problem."""
    with pytest.raises(ReferenceResolutionError, match=fragment):
        parse_template(text).render(OUTPUTS)


def test_a_number_segment_indexes_a_dict_by_its_string_key() -> None:
    """``.0`` on a dict looks up the key ``"0"`` (JSON object keys are strings)."""
    assert resolve_path({"s": {"0": "zero"}}, Reference("s", (0,))) == "zero"


class _Booby:
    """An object that fails the test if anything looks up any attribute on it."""

    def __getattribute__(self, name: str) -> NoReturn:
        pytest.fail(f"the resolver looked up {name!r} on a non-JSON object")

    def __getattr__(self, name: str) -> NoReturn:
        pytest.fail(f"the resolver looked up {name!r} on a non-JSON object")


@pytest.mark.parametrize(
    ("outputs", "text"),
    [
        ({"s1": _Booby()}, "${s1}"),
        ({"s1": _Booby()}, "${s1.__dict__}".replace(".__dict__", '["__dict__"]')),
        ({"s1": _Booby()}, "${s1.x}"),
        ({"s1": _Booby()}, "${s1.0}"),
        ({"s1": {"a": _Booby()}}, "${s1.a}"),
        ({"s1": {"a": _Booby()}}, "${s1.a.b}"),
        ({"s1": [_Booby()]}, "text ${s1.0}"),
        ({"s1": {"a": [_Booby()]}}, "text ${s1.a}"),
    ],
)
def test_resolver_refuses_non_json_values_without_touching_them(
    outputs: dict[str, Any], text: str
) -> None:
    """A foreign object in outputs is refused with ReferenceResolutionError; no getattr happens."""
    with pytest.raises(ReferenceResolutionError):
        parse_template(text).render(outputs)


def test_resolver_never_uses_attribute_access_on_real_objects() -> None:
    """A reference to ``["__class__"]`` on a dict looks up the key, never the attribute."""
    with pytest.raises(ReferenceResolutionError, match="no key '__class__'"):
        resolve_path({"s": {}}, Reference("s", ("__class__",)))
    assert resolve_path({"s": {"__class__": 1}}, Reference("s", ("__class__",))) == 1


# ---------------------------------------------------------------- properties

_ident = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True).filter(
    lambda s: not (len(s) > 4 and s.startswith("__") and s.endswith("__"))
)
_segment = st.one_of(
    _ident,
    st.integers(min_value=0, max_value=999_999_999),
    st.text(max_size=20),
)
references = st.builds(
    Reference, _ident, st.lists(_segment, max_size=MAX_SEGMENTS).map(tuple)
).filter(lambda r: len(str(r)) <= MAX_REFERENCE_LENGTH)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(references)
def test_str_of_a_reference_parses_back_to_it(ref: Reference) -> None:
    """``parse_reference(str(ref)) == ref`` for every reference (any key text, any index)."""
    assert parse_reference(str(ref)) == ref


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(references, st.text(max_size=15)), max_size=6))
def test_templates_round_trip_through_text(parts: list[Reference | str]) -> None:
    """Literal text (``${`` escaped as ``$${``) and references, joined then parsed, come back."""
    text = ""
    for part in parts:
        if isinstance(part, Reference):
            text += str(part)
        else:
            # A literal ending in '$' before a reference would read as '$${'; avoid that one
            # ambiguity of the grammar by not ending a literal with '$'.
            text += part.replace("${", "$${").rstrip("$")
    template = parse_template(text)
    assert [p for p in template.parts if isinstance(p, Reference)] == [
        p for p in parts if isinstance(p, Reference)
    ]


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=st.sampled_from("${}[].\"'\\ab0_1 -"), max_size=60))
def test_random_text_never_raises_anything_but_syntax_errors(text: str) -> None:
    """The parser either parses a string or raises ReferenceSyntaxError — nothing else."""
    try:
        t = parse_template(text)
    except ReferenceSyntaxError:
        return
    assert isinstance(t, Template)
    with contextlib.suppress(ReferenceSyntaxError):
        parse_reference(text)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=80))
def test_arbitrary_unicode_never_raises_anything_but_syntax_errors(text: str) -> None:
    """Arbitrary text (any code points) parses or raises ReferenceSyntaxError only."""
    with contextlib.suppress(ReferenceSyntaxError):
        parse_template("${" + text)
    with contextlib.suppress(ReferenceSyntaxError):
        parse_template(text)


def _full_parse(text: str) -> Template | str:
    """The full parser alone (the one-scan fast path switched off), or its error."""
    from planrail.plan import refs

    fast = refs._parse_simple
    refs._parse_simple = lambda _t: None  # type: ignore[assignment]
    try:
        return refs._parse_template(text)
    except ReferenceSyntaxError as exc:
        return str(exc)
    finally:
        refs._parse_simple = fast  # type: ignore[assignment]


def _parse_or_error(text: str) -> Template | str:
    try:
        return parse_template(text)
    except ReferenceSyntaxError as exc:
        return str(exc)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.sampled_from(["$", "{", "}", ".", "a", "_", "0", "1", "[", "]", '"', "__", "${", "$${"]),
        max_size=14,
    ).map("".join)
)
def test_the_one_scan_fast_path_parses_exactly_as_the_full_parser(text: str) -> None:
    """The regex fast path (every ``${`` a dotted reference or an escape) gives the full
    parser's template or error for every text."""
    assert _parse_or_error(text) == _full_parse(text)


@pytest.mark.parametrize(
    "text",
    [
        "${a.__x__}",
        "${a." + ".".join(["b"] * MAX_SEGMENTS) + "}",
        "${a." + ".".join(["b"] * (MAX_SEGMENTS + 1)) + "}",
        "${a.01}",
        "${a.1234567890}",
        "${a.123456789}",
        "${" + "a" * (MAX_REFERENCE_LENGTH + 6) + "}",
        "${" + "a" * (MAX_REFERENCE_LENGTH - 3) + "}",
        "x${a}y$${b}z${c.d.0}",
        "$$${a}",
        '${a["b"]} and ${c.d}',
    ],
)
def test_the_fast_path_keeps_every_limit_of_the_grammar(text: str) -> None:
    assert _parse_or_error(text) == _full_parse(text)
