"""planrail._json: the encoders made once write exactly what json.dumps writes, and raise what it
raises, for every value and every option set they serve."""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planrail._json import canonical, canonical_data, digest, encoder

OPTIONS: list[dict[str, Any]] = [
    {},
    {"sort_keys": True},
    {"ensure_ascii": False, "allow_nan": False},
    {"ensure_ascii": False, "sort_keys": True, "default": str},
    {"ensure_ascii": False, "sort_keys": True},
]
"""What planrail uses: duplicate-call keys, store fields, canonical JSON of arguments and of
plain data (and the defaults)."""

_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
_keys = st.text(max_size=6) | st.integers() | st.booleans() | st.none() | st.floats()
values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(_keys, inner, max_size=4)
    ),
    max_leaves=12,
)


def _dumps(value: Any, options: dict[str, Any]) -> str:
    return json.dumps(value, separators=(",", ":"), **options)


def _outcome(call: Any) -> tuple[str, str]:
    try:
        return "ok", call()
    except Exception as exc:  # the kind and message are what must match
        return type(exc).__name__, str(exc)


@settings(max_examples=300, deadline=None)
@given(value=values | st.sets(st.integers(), max_size=3) | st.binary(max_size=3))
@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(o) or "defaults")
def test_the_text_and_the_error_are_json_dumps_own(options: dict[str, Any], value: Any) -> None:
    ours = _outcome(lambda: encoder(**options)(value))
    assert ours == _outcome(lambda: _dumps(value, options))


def test_canonical_is_sorted_compact_unescaped_and_str_for_the_rest() -> None:
    value = {"b": [1, 1.0, True, None], "a": "é ${x}", "c": {1, 2}}
    assert canonical(value) == _dumps(
        value, {"sort_keys": True, "ensure_ascii": False, "default": str}
    )
    assert canonical({"b": 1, "a": 2}) == canonical({"a": 2, "b": 1}) == '{"a":2,"b":1}'


def test_a_reference_cycle_is_json_dumps_error_not_a_recursion_error() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference detected"):
        encoder()(loop)


def test_nan_is_refused_where_it_is_not_allowed_and_written_where_it_is() -> None:
    with pytest.raises(ValueError, match="not JSON compliant"):
        encoder(allow_nan=False)({"x": math.nan})
    assert encoder()({"x": math.nan}) == '{"x":NaN}'


def test_a_default_that_raises_its_own_error_passes_it_through() -> None:
    class Refused(Exception):
        pass

    def refuse(value: Any) -> Any:
        raise Refused(type(value).__name__)

    with pytest.raises(Refused, match="object"):
        encoder(default=refuse)([object()])


def test_canonical_data_refuses_what_is_not_json_and_digest_is_its_sha256() -> None:
    assert canonical_data({"b": 1, "a": "é"}) == '{"a":"é","b":1}'
    with pytest.raises(TypeError, match="not JSON serializable"):
        canonical_data({"x": {1, 2}})
    assert digest("é") == "sha256:" + hashlib.sha256("é".encode()).hexdigest()
