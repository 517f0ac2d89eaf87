"""Reading JSON out of model answers, whole and while it streams."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from planrail.llm.errors import LLMAnswerError
from planrail.llm.jsontext import extract_json, plain_escapes, strip_trailing_commas
from planrail.planner.stream import StepStream


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ('```json\n{"a": [1, 2,],}\n```', {"a": [1, 2]}),
        ('Sure! Here it is:\n{"a": "}"}\nAnything else?', {"a": "}"}),
        ("```\n[1, 2]\n```", [1, 2]),
        ('{"s": "a, ]"}', {"s": "a, ]"}),
    ],
    ids=["bare", "fence-trailing-commas", "prose", "plain-fence", "comma-in-string"],
)
def test_extract_json_tolerates_what_models_write(text: str, expected: object) -> None:
    """Fences, prose around the JSON and trailing commas are tolerated."""
    assert extract_json(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("no json here", "no JSON"),
        ('{"a": 1', "not valid JSON"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),  # was a RecursionError
    ],
)
def test_extract_json_says_why_it_fails(text: str, message: str) -> None:
    """Unreadable answers raise LLMAnswerError with the reason."""
    with pytest.raises(LLMAnswerError, match=message):
        extract_json(text)


def test_strip_trailing_commas_leaves_strings_alone() -> None:
    """Only commas before a closing bracket, outside strings, are removed."""
    assert strip_trailing_commas('{"a": ",}", "b": [1,],}') == '{"a": ",}", "b": [1]}'


def test_step_stream_emits_each_step_when_complete() -> None:
    """Each step is returned by the feed that completes it; nested objects do not confuse it."""
    plan = {
        "goal": "g",
        "steps": [
            {"id": "a", "args": {"x": {"y": "}]"}}},
            {"id": "b", "args": {"list": [{"z": 1}]}, "depends_on": ["a"]},
        ],
        "output": {"steps": [{"id": "not-a-step"}]},
    }
    text = "```json\n" + json.dumps(plan) + "\n```"
    cut = text.index('{"id": "b"')
    scanner = StepStream()
    assert scanner.feed(text[:cut]) == [plan["steps"][0]]
    assert scanner.feed(text[cut:]) == [plan["steps"][1]]
    assert scanner.count == 2


def test_a_step_nested_too_deeply_is_not_emitted_and_raises_nothing() -> None:
    """A streamed step nested past what can be parsed is no startable step (the whole answer
    is then refused by ``extract_json``, with its reason); the stream does not raise."""
    deep = '{"steps": [{"id": "a", "args": {"x": ' + "[" * 100_000 + "]" * 100_000 + "}}, "
    scanner = StepStream()
    assert scanner.feed(deep + '{"id": "b"}]}') == [{"id": "b"}]


@given(st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=30))
def test_step_stream_is_independent_of_chunking(cuts: list[int]) -> None:
    """However the text is split, the same steps come out, in order."""
    plan = {"steps": [{"id": f"s{i}", "args": {"v": "x{" * i}} for i in range(5)]}
    text = json.dumps(plan)
    scanner = StepStream()
    found: list[object] = []
    pos = 0
    for size in cuts:
        found.extend(scanner.feed(text[pos : pos + size]))
        pos += size
    found.extend(scanner.feed(text[pos:]))
    assert found == plan["steps"]


def test_raw_newlines_inside_strings_are_read() -> None:
    """A raw newline inside a string (a grammar-constrained small model wrote one) is read as
    a newline, not refused."""
    assert extract_json('{"city": "New York\n NY"}') == {"city": "New York\n NY"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r'{"text": "it\'s fine"}', {"text": "it's fine"}),
        (r'{"tool": "get\_weather"}', {"tool": "get_weather"}),
        (r'{"a": "x\"y\\z\/\n\u00e9"}', {"a": 'x"y\\z/\né'}),
        (r'{"a": "\\_"}', {"a": "\\_"}),
    ],
    ids=["quote", "markdown-underscore", "valid-escapes-kept", "escaped-backslash"],
)
def test_escapes_json_does_not_have_read_as_the_character(text: str, expected: object) -> None:
    """A backslash before a character JSON does not escape is dropped (JavaScript's reading);
    valid escapes, and an escaped backslash before any character, keep their meaning."""
    assert extract_json(text) == expected


def test_a_backslash_dollar_stays_an_error() -> None:
    r"""``\$`` has two readings (a literal ``${`` or a reference): it is not read as either."""
    with pytest.raises(LLMAnswerError, match="not valid JSON"):
        extract_json(r'{"a": "\${s.x}"}')


@given(st.recursive(st.text() | st.integers() | st.booleans(), lambda c: st.lists(c, max_size=3)))
def test_plain_escapes_leaves_valid_json_alone(value: object) -> None:
    """On JSON that parses, the escape fix changes nothing (it never alters a valid reading)."""
    for ascii_only in (True, False):
        text = json.dumps({"v": value}, ensure_ascii=ascii_only)
        assert plain_escapes(text) == text
