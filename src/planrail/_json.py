"""Compact JSON text, without the per-call cost of ``json.dumps``.

``json.dumps`` (and ``JSONEncoder.encode``) builds a new C encoder for every value it encodes;
for the small values planrail writes once or twice per step — a step's arguments and output in
its store record, an event's data, an intent's arguments hash — building it cost more than the
encoding itself (2.8–4.4 µs against 1.4–1.7 µs per value). :func:`encoder` builds it once per
set of options.

What an encoder returns is exactly what ``json.dumps`` returns with the same options, and what
it raises is what ``json.dumps`` raises: a value the fast path refuses (a type JSON cannot hold,
``NaN`` where it is not allowed, a reference cycle, which the fast path does not look for) is
encoded again by the standard encoder, which raises its own error or encodes it.

:func:`encodable` makes JSON data that UTF-8 can encode, for what is sent whatever a record
holds (the dashboard's answers, the MCP server's); :func:`escape_surrogates` is the one way
planrail writes a lone surrogate as text (``\\udcff``): in those answers, in an error's message
(:mod:`planrail.errors`, the layer just above this module), in a model's prompt, in a store's
text columns.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from json.encoder import c_encode_basestring as _c_text  # type: ignore[attr-defined]
from json.encoder import c_encode_basestring_ascii as _c_ascii  # type: ignore[attr-defined]
from json.encoder import c_make_encoder as _c_make_encoder  # type: ignore[attr-defined]
from typing import Any

__all__ = [
    "canonical",
    "canonical_data",
    "digest",
    "encodable",
    "encoder",
    "escape_surrogates",
    "lone_surrogate",
]


def encoder(
    *,
    ensure_ascii: bool = True,
    sort_keys: bool = False,
    allow_nan: bool = True,
    default: Callable[[Any], Any] | None = None,
) -> Callable[[Any], str]:
    """``json.dumps(value, separators=(",", ":"), ...)`` with these options, as a function of
    ``value`` alone."""
    full = json.JSONEncoder(
        ensure_ascii=ensure_ascii,
        sort_keys=sort_keys,
        allow_nan=allow_nan,
        separators=(",", ":"),
        default=default,
    )
    text: Callable[[str], str] | None = _c_ascii if ensure_ascii else _c_text
    if _c_make_encoder is None or text is None:  # an interpreter without json's C accelerator
        return full.encode
    fast = _c_make_encoder(None, full.default, text, None, ":", ",", sort_keys, False, allow_nan)

    def dumps(value: Any) -> str:
        if type(value) is str:
            return text(value)
        try:
            return "".join(fast(value, 0))
        except (TypeError, ValueError, RecursionError):
            return full.encode(value)  # raises json.dumps's own error, with its message

    return dumps


canonical = encoder(ensure_ascii=False, sort_keys=True, default=str)
"""Canonical JSON text: sorted keys, no spaces, text as it is, ``str()`` of what JSON cannot hold
(``json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)``). What
an intent's arguments hash, an approval's arguments digest and the repeated-call guard's key are
computed from: equal for arguments whose JSON is equal (key order does not matter; ``1``,
``1.0`` and ``true`` differ; a tuple is the list it holds)."""

canonical_data = encoder(ensure_ascii=False, sort_keys=True)
""":data:`canonical` for plain JSON data, where anything else is an error (a ``TypeError``):
what a plan's hash, a pinned tool schema's and a remote output's digest are computed from."""


def digest(text: str) -> str:
    """``sha256:`` + the hex digest of ``text`` (UTF-8): how planrail writes a content hash.

    Any text has one: a lone surrogate (not Unicode, which UTF-8 refuses) is encoded as
    ``surrogatepass`` spells it, bytes no Unicode text encodes to, so two texts still have the
    same digest only when they are the same."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


_SURROGATE = re.compile("[\ud800-\udfff]")


def lone_surrogate(text: str) -> str | None:
    """The first lone surrogate in ``text``, or None when it is Unicode text. JSON's
    ``"\\ud800"`` escape makes one; no UTF-8 file, store, terminal or tool can take it."""
    if text.isascii():
        return None
    found = _SURROGATE.search(text)
    return None if found is None else found.group()


def escape_surrogates(text: str) -> str:
    """``text`` with each lone surrogate spelled as its JSON escape (``\\ud800``): text that
    can be encoded, for what must be sent or shown whatever it holds (a model's answer quoted
    back to it, an error's message, a stored record's strings)."""
    if lone_surrogate(text) is None:
        return text
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def encodable(value: Any) -> Any:
    """JSON data ``value`` as UTF-8 can encode it: each lone surrogate in its strings and keys
    (``"\\udcff"``: not Unicode, so no UTF-8 encoder takes it, and a whole JSON answer holding
    one fails) written as its escape — a backslash, ``u`` and four hex digits, as
    :func:`planrail.errors.error_message` writes it in an error. What is sent whatever a stored
    record holds: the dashboard's JSON and the MCP server's answers. ``value`` itself when it
    holds no such text (the usual case: nothing is copied); a container is copied only when
    something in it changed (a tuple then becomes a list, as JSON has it)."""
    if isinstance(value, str):
        return escape_surrogates(value)
    if isinstance(value, dict):
        pairs = [(encodable(k), encodable(v)) for k, v in value.items()]
        olds = value.items()
        same = all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(pairs, olds, strict=True))
        return value if same else dict(pairs)
    if isinstance(value, list | tuple):
        items = [encodable(v) for v in value]
        return value if all(v is v0 for v, v0 in zip(items, value, strict=True)) else items
    return value
