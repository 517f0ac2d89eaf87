r"""Reading JSON out of what models actually write.

Models wrap JSON in code fences, put prose before and after it, leave trailing commas, write
raw newlines and tabs inside strings (grammar-constrained small models do), and escape
characters JSON does not escape (``\'``, ``\_``: habits from other languages and Markdown).
:func:`extract_json` accepts all of that, each with one reading only — and nothing more
lenient: no single quotes, no comments, no guessing at truncated text. What it cannot read
raises :class:`~planrail.llm.errors.LLMAnswerError` saying why, so the planner can tell the model.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from planrail.llm.errors import LLMAnswerError

__all__ = ["balanced_end", "extract_json", "plain_escapes", "strip_trailing_commas"]

_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\r?\n(.*?)```", re.DOTALL)


def extract_json(text: str) -> Any:
    r"""The JSON value in ``text``: bare, inside a code fence, or surrounded by prose.

    Tolerated: trailing commas before ``}`` or ``]``; raw control characters (newlines, tabs)
    inside strings, read as themselves; a backslash before a character JSON does not escape
    (``\'``), read as that character, as JavaScript reads it — except ``\$``, which could
    mean a literal ``${`` (a shell's reading) or a reference, and stays an error. Raises
    :class:`LLMAnswerError` for an empty answer or one holding no readable JSON.
    """
    stripped = text.strip()
    if not stripped:
        raise LLMAnswerError("the model's answer is empty", text=text)
    candidates = [stripped]
    candidates.extend(m.group(1).strip() for m in _FENCE.finditer(text))
    start = _first_open(stripped)
    if start is not None:
        end = balanced_end(stripped, start)
        candidates.append(stripped[start : end + 1] if end is not None else stripped[start:])
    first_error: json.JSONDecodeError | None = None
    for candidate in candidates:
        for attempt in _variants(candidate):
            try:
                # strict=False: raw control characters (a newline) inside strings are read as
                # themselves; grammar-constrained small models write them.
                return json.loads(attempt, strict=False)
            except json.JSONDecodeError as exc:
                first_error = first_error or exc
            except ValueError as exc:  # e.g. an integer too long to convert
                raise LLMAnswerError(
                    f"the answer holds unreadable JSON: {exc}", text=text
                ) from None
            except RecursionError:  # no plan nests this deep (the loader's limit is 64)
                raise LLMAnswerError(
                    "the answer holds JSON nested too deeply to read", text=text
                ) from None
    if start is None:
        raise LLMAnswerError(
            f"the answer holds no JSON object: {_clip(stripped)!r}", text=text
        ) from None
    where = (
        f" (line {first_error.lineno}, column {first_error.colno}: {first_error.msg})"
        if first_error is not None
        else ""
    )
    raise LLMAnswerError(f"the answer is not valid JSON{where}", text=text) from None


def _variants(candidate: str) -> Iterator[str]:
    """``candidate`` as written, then with each mechanical fix (tried in this order; a fix is
    made only when the ones before did not parse)."""
    yield candidate
    no_commas = strip_trailing_commas(candidate)
    if no_commas != candidate:
        yield no_commas
    if "\\" in candidate:
        yield plain_escapes(no_commas)


_KEPT_ESCAPES = frozenset('"\\/bfnrtu$')


def plain_escapes(text: str) -> str:
    r"""``text`` with each backslash inside a string that escapes nothing JSON escapes
    (``\'``, ``\_``) removed, leaving the character it stood before. Valid escapes, ``\$``
    (two readings: a literal ``${`` or a reference) and everything outside strings are left
    alone."""
    out: list[str] = []
    in_string = False
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if not in_string:
            in_string = c == '"'
            out.append(c)
        elif c == "\\" and i + 1 < n:
            if text[i + 1] in _KEPT_ESCAPES:
                out.append(text[i : i + 2])
            else:
                out.append(text[i + 1])
            i += 2
            continue
        else:
            in_string = c != '"'
            out.append(c)
        i += 1
    return "".join(out)


def _first_open(text: str) -> int | None:
    positions = [p for p in (text.find("{"), text.find("[")) if p >= 0]
    return min(positions) if positions else None


def balanced_end(text: str, start: int) -> int | None:
    """Index of the bracket closing the one at ``start`` (strings respected), or ``None``."""
    depth = 0
    in_string = False
    escaped = False
    for i in range(start, len(text)):
        c = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth == 0:
                return i
    return None


def strip_trailing_commas(text: str) -> str:
    """``text`` without commas that directly precede ``}`` or ``]`` (outside strings)."""
    out: list[str] = []
    in_string = False
    escaped = False
    pending_comma: int | None = None  # index in ``out`` of a comma that may be trailing
    for c in text:
        if in_string:
            out.append(c)
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
            continue
        if c in "}]" and pending_comma is not None:
            del out[pending_comma]
            pending_comma = None
        elif c == ",":
            pending_comma = len(out)
        elif not c.isspace():
            pending_comma = None
        if c == '"':
            in_string = True
        out.append(c)
    return "".join(out)


def _clip(text: str, n: int = 120) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"
