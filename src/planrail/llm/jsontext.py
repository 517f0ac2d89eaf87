r"""Reading JSON out of what models actually write.

Models wrap JSON in code fences, put prose before and after it, leave trailing commas, write
raw newlines and tabs inside strings (grammar-constrained small models do), and escape
characters JSON does not escape (``\'``, ``\_``: habits from other languages and Markdown).
:func:`extract_json` accepts all of that, each with one reading only — and nothing more
lenient: no single quotes, no comments, no guessing at truncated text. What it cannot read
raises :class:`~planrail.llm.errors.LLMAnswerError` saying why, so the planner can tell the model.
A key written twice in one object is read as JSON reads it (the last value), and reported to
a caller who asks (``duplicates``): the planner refuses such a plan rather than guess.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from planrail.llm.errors import LLMAnswerError
from planrail.plan.strict_json import RepeatedKey, loads_noting_repeats

__all__ = [
    "RepeatedKey",
    "answer_data",
    "balanced_end",
    "extract_json",
    "plain_escapes",
    "strip_trailing_commas",
]


def answer_data(text: str, data: Any, duplicates: list[RepeatedKey]) -> Any:
    """The JSON value of a model's answer: ``data`` when its client read it already, else
    what :func:`extract_json` reads in ``text``. The text is read either way, for the keys it
    repeats (appended to ``duplicates``; the client's reading kept the last value silently):
    with any, the text's own reading is returned, so their places name what is returned."""
    try:
        found = extract_json(text, duplicates=duplicates)
    except LLMAnswerError:
        if data is None:
            raise
        return data
    return found if data is None or duplicates else data


_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\r?\n(.*?)```", re.DOTALL)


def extract_json(text: str, *, duplicates: list[RepeatedKey] | None = None) -> Any:
    r"""The JSON value in ``text``: bare, inside a code fence, or surrounded by prose.

    Tolerated: trailing commas before ``}`` or ``]``; raw control characters (newlines, tabs)
    inside strings, read as themselves; a backslash before a character JSON does not escape
    (``\'``), read as that character, as JavaScript reads it — except ``\$``, which could
    mean a literal ``${`` (a shell's reading) or a reference, and stays an error. Raises
    :class:`LLMAnswerError` for an empty answer or one holding no readable JSON.

    A key repeated in one object keeps its last value; with a ``duplicates`` list, each such
    key of the value returned is appended to it, object by object in the order the objects open
    in the text (:func:`planrail.plan.strict_json.loads_noting_repeats`).
    """
    stripped = text.strip()
    if not stripped:
        raise LLMAnswerError("the model's answer is empty", text=text)
    candidates, unclosed = _candidates(text)
    furthest: tuple[int, json.JSONDecodeError] | None = None  # (place in text, error)
    for offset, candidate in candidates:
        for n, attempt in enumerate(_variants(candidate)):
            try:
                return _loads(attempt, duplicates)
            except json.JSONDecodeError as exc:
                if n == 0 and (furthest is None or offset + exc.pos > furthest[0]):
                    furthest = (offset + exc.pos, exc)
            except ValueError as exc:  # e.g. an integer too long to convert
                reason = str(exc).split(";")[0]  # not Python's advice on raising the limit
                raise LLMAnswerError(
                    f"the answer holds unreadable JSON: {reason}", text=text
                ) from None
            except RecursionError:  # no plan nests this deep (the loader's limit is 64)
                raise LLMAnswerError(
                    "the answer holds JSON nested too deeply to read", text=text
                ) from None
    if _first_open(stripped, 0) is None:
        raise LLMAnswerError(
            f"the answer holds no JSON object: {_clip(stripped)!r}", text=text
        ) from None
    where = ""
    if furthest is not None:
        at, error = furthest
        line, column = text.count("\n", 0, at) + 1, at - text.rfind("\n", 0, at)
        where = f" (line {line}, column {column}: {error.msg})"
    cut = "; the JSON in it never closes (was the answer cut off?)" if unclosed else ""
    raise LLMAnswerError(f"the answer is not valid JSON{where}{cut}", text=text) from None


_MAX_SEGMENTS = 16
"""Most bracketed pieces of an answer tried as its JSON (prose may hold brackets before it)."""


def _candidates(text: str) -> tuple[list[tuple[int, str]], bool]:
    """Where the JSON may be, as ``(offset in text, text)``: the whole answer, each code
    fence's content, then each bracketed piece in turn (its brackets balanced, strings
    respected; each piece starts after the one before, so the text is scanned once). And
    whether the last piece never closes."""
    lead = len(text) - len(text.lstrip())
    stripped = text.strip()
    candidates = [(lead, stripped)]
    for m in _FENCE.finditer(text):
        body = m.group(1)
        candidates.append((m.start(1) + len(body) - len(body.lstrip()), body.strip()))
    start = _first_open(stripped, 0)
    for _ in range(_MAX_SEGMENTS):
        if start is None:
            break
        end = balanced_end(stripped, start)
        piece = stripped[start:] if end is None else stripped[start : end + 1]
        if piece != stripped:
            candidates.append((lead + start, piece))
        if end is None:
            return candidates, True
        start = _first_open(stripped, end + 1)
    return candidates, False


def _loads(text: str, duplicates: list[RepeatedKey] | None) -> Any:
    # strict=False: raw control characters (a newline) inside strings are read as themselves;
    # grammar-constrained small models write them.
    if duplicates is None:
        return json.loads(text, strict=False)
    data, repeated = loads_noting_repeats(text, strict=False)
    duplicates.extend(repeated)
    return data


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


def _first_open(text: str, start: int) -> int | None:
    positions = [p for p in (text.find("{", start), text.find("[", start)) if p >= 0]
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
