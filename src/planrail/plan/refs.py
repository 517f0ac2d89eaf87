"""References: the ``${step.a.b.0}`` grammar, its linear-time parser and the JSON-only lookup of
one reference (:func:`resolve_path`; a whole value is filled by :mod:`planrail.plan.resolve`).

Grammar (whitespace is not allowed inside ``${...}``)::

    reference  := "${" step segment* "}"
    step       := identifier
    segment    := "." identifier | "." index | "[" quoted "]" | "[" index "]"
    identifier := [A-Za-z_][A-Za-z0-9_]*          (not a ``__dunder__``)
    index      := "0" | [1-9][0-9]*
    quoted     := '"' (char | '\\"' | '\\\\')* '"'   (single quotes work the same way)

``$${`` is a literal ``${``. A string that is exactly one reference keeps the referenced value's
type; references inside longer text are interpolated as text (strings as they are, everything
else as compact JSON). Resolution indexes dicts and lists only: no attribute access, no
``str.format``, no templates, no ``eval`` — so ``${s1.__class__}`` can never reach Python
internals, and text such as ``{0.__class__}`` or ``{{ x }}`` is inert.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from planrail._json import encoder
from planrail.errors import ReferenceResolutionError, ReferenceSyntaxError

__all__ = [
    "MAX_REFERENCE_LENGTH",
    "MAX_SEGMENTS",
    "NON_TEXT_SCALARS",
    "STR_ONLY",
    "Parse",
    "Parser",
    "Reference",
    "Template",
    "iter_references",
    "iter_strings_with_dollar",
    "json_path",
    "parse_reference",
    "parse_template",
    "resolve_path",
]

MAX_SEGMENTS = 16
"""Most path segments after the step id in one reference."""

MAX_REFERENCE_LENGTH = 1024
"""Most characters in one ``${...}``, braces included."""

Segment = str | int

_ID_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
_ID_CHARS = _ID_START | frozenset("0123456789")
_DIGITS = frozenset("0123456789")


@dataclass(frozen=True, slots=True)
class Reference:
    """One ``${step.path}``: the producing step and the path into its output."""

    step: str
    path: tuple[Segment, ...] = ()

    def __str__(self) -> str:
        out = [self.step]
        for seg in self.path:
            if isinstance(seg, int) or (_is_identifier(seg) and not _is_dunder(seg)):
                out.append(f".{seg}")
            else:
                # only \\ and \" are escapes in the grammar (json.dumps would write \n, \uXXXX)
                quoted = seg.replace("\\", "\\\\").replace('"', '\\"')
                out.append(f'["{quoted}"]')
        return "${" + "".join(out) + "}"


_new = object.__new__
_set_step = vars(Reference)["step"].__set__  # the slot
_set_path = vars(Reference)["path"].__set__  # the slot


def _reference(step: str, path: tuple[Segment, ...] = ()) -> Reference:
    """``Reference(step, path)``, its two slots set directly: the frozen dataclass's
    ``__init__`` (``object.__setattr__`` per field, behind a call from C) cost twice as much, and
    a validation makes one per distinct ``${...}`` text."""
    ref: Reference = _new(Reference)
    _set_step(ref, step)
    _set_path(ref, path)
    return ref


class Template:
    """A string split into literal text and references (immutable by convention; compared by
    ``parts``).

    ``single`` is set when the whole string is exactly one reference (the value keeps its type);
    ``references`` are the references among ``parts``, in order.
    """

    __slots__ = ("parts", "references", "single")

    def __init__(
        self, parts: tuple[str | Reference, ...], references: tuple[Reference, ...] | None = None
    ) -> None:
        # A plain slotted class: a frozen dataclass's __post_init__ cost more than the parse.
        if references is None:
            references = tuple(p for p in parts if type(p) is Reference)
        self.parts = parts
        self.references = references
        self.single: Reference | None = references[0] if len(parts) == 1 and references else None

    @classmethod
    def _of(cls, parts: tuple[str | Reference, ...], references: tuple[Reference, ...]) -> Template:
        """``Template(parts, references)`` for a parser that knows ``references``, its slots set
        here (no ``__init__`` behind a call from C)."""
        t: Template = _new(cls)
        t.parts = parts
        t.references = references
        t.single = references[0] if len(parts) == 1 and references else None
        return t

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Template) and other.parts == self.parts

    def __hash__(self) -> int:
        return hash(self.parts)

    def __repr__(self) -> str:
        return f"Template(parts={self.parts!r})"

    def render(self, outputs: Mapping[str, Any]) -> Any:
        """Fill the references from ``outputs`` (step id → plain JSON output)."""
        single = self.single
        if single is not None:
            return resolve_path(outputs, single)
        pieces: list[str] = []
        for part in self.parts:
            if isinstance(part, str):
                pieces.append(part)
            else:
                pieces.append(_as_text(resolve_path(outputs, part), part))
        return "".join(pieces)


def _is_identifier(s: str) -> bool:
    return bool(s) and s[0] in _ID_START and all(c in _ID_CHARS for c in s)


def _dotted_path(dotted: str) -> tuple[Segment, ...] | None:
    """The path of a matched dotted reference (``items.0.id``: the text after the step id's
    ``.``), or ``None`` past the limits — too many segments, a ``__dunder__`` — which the full
    parser then reports."""
    segs = dotted.split(".")
    if len(segs) > MAX_SEGMENTS or ("__" in dotted and any(map(_is_dunder, segs))):
        return None
    return tuple(int(x) if x[0] in _DIGITS else x for x in segs)


def _is_dunder(s: str) -> bool:
    return len(s) > 4 and s.startswith("__") and s.endswith("__")


def _as_text(value: Any, ref: Reference) -> str:
    if type(value) is str:
        return value
    try:
        return _TEXT(value)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ReferenceResolutionError(
            f"{ref}: the output cannot be written as JSON text: {exc}"
        ) from None


def _not_json(value: Any) -> Any:
    # json's own default reads ``value.__class__``; type() does not touch the object.
    raise TypeError(f"a {type(value).__name__} is not JSON data")


_TEXT = encoder(ensure_ascii=False, default=_not_json)
"""An output written into text: its compact JSON (text as it is)."""


def parse_template(text: str) -> Template:
    """Split ``text`` into literal pieces and references (a one-scan regex for text whose
    references are all dotted, the full left-to-right parser for the rest).

    Raises :class:`ReferenceSyntaxError` (with the offset) for a malformed ``${...}``. Every
    call parses afresh: a plan's strings are parsed once, by its validation (with a
    :class:`Parser`), into its :class:`~planrail.plan.compiled.CompiledPlan`, whose ``template``
    the run reads (a :data:`Parse`).
    """
    return _parse_template(text)


Parse = Callable[[str], "Template"]
"""Where a reader gets the parsed form of a string: :func:`parse_template`, or a compiled
plan's ``template`` (parsed once, at validation)."""


def _parse_template(text: str) -> Template:
    if "$" not in text:
        return Template((text,))
    fast = _parse_simple(text)
    if fast is not None:
        return fast
    parts: list[str | Reference] = []
    literal: list[str] = []
    i, n = 0, len(text)
    while i < n:
        j = text.find("$", i)
        if j < 0:
            literal.append(text[i:])
            break
        literal.append(text[i:j])
        if text.startswith("$${", j):
            literal.append("${")
            i = j + 3
        elif text.startswith("${", j):
            ref, i = _parse_at(text, j)
            if literal:
                joined = "".join(literal)
                if joined:
                    parts.append(joined)
                literal = []
            parts.append(ref)
        else:
            literal.append("$")
            i = j + 1
    tail = "".join(literal)
    if tail or not parts:
        parts.append(tail)
    return Template(tuple(parts))


_SEGMENT = r"(?:[A-Za-z_][A-Za-z0-9_]*|0|[1-9][0-9]{0,8})"
"""A dotted path's segment: an identifier or an index without leading zeros."""
_DOTTED = rf"\$\{{([A-Za-z_][A-Za-z0-9_]*)((?:\.{_SEGMENT})*)\}}"
"""``${step.a.0.b}``: the step id, then its dotted path (the common case)."""
_SIMPLE_OR_ESCAPE = re.compile(rf"\$\$\{{|{_DOTTED}")


def _parse_simple(text: str) -> Template | None:
    """The common case in one regex scan: every ``${`` in ``text`` is a ``$${`` escape or a
    dotted reference within the limits. ``None`` sends the text to the full parser (brackets,
    errors, limits), which gives the same result for everything this accepts."""
    matches = list(_SIMPLE_OR_ESCAPE.finditer(text))
    if len(matches) != text.count("${"):
        return None
    parts: list[str | Reference] = []
    found: list[Reference] = []
    literal = ""
    at = 0
    for m in matches:
        start, end = m.span()
        literal += text[at:start]
        at = end
        name = m.group(1)
        if name is None:  # $${
            literal += "${"
            continue
        if end - start > MAX_REFERENCE_LENGTH:
            return None
        dotted = m.group(2)
        if dotted:
            path = _dotted_path(dotted[1:])
            if path is None:
                return None
            ref = Reference(name, path)
        else:
            ref = Reference(name)
        if literal:
            parts.append(literal)
            literal = ""
        parts.append(ref)
        found.append(ref)
    literal += text[at:]
    if literal or not parts:
        parts.append(literal)
    whole = tuple(parts)
    if len(found) == len(whole):  # references only: one tuple serves as both
        return Template(whole, whole)  # type: ignore[arg-type]
    return Template(whole, tuple(found))


_SIMPLE_PATH = re.compile(rf"{_SEGMENT}(?:\.{_SEGMENT})*")
"""What ``_SIMPLE`` matches after the step id's ``.``: dotted identifiers and indexes."""


class Parser:
    """:func:`parse_template` for one validation: the same results, with what a plan's strings
    share parsed once — the :class:`Reference` of each ``${...}`` text (``${fetch.body}`` in a
    thousand prompts is one object) and each dotted path.

    A string whose every ``${`` opens a dotted reference within the limits (and holds no
    ``$${`` escape) is split here; anything else — brackets, escapes, errors, limits — goes to
    :func:`parse_template`, which gives the same result for everything this accepts. The memo
    lives as long as the parser (one validation's context): there is no process-wide cache.
    """

    __slots__ = ("_paths", "_refs")

    def __init__(self) -> None:
        self._refs: dict[str, Reference] = {}
        self._paths: dict[str, tuple[Segment, ...]] = {}

    def __call__(self, text: str) -> Template:
        if "${" not in text or "$${" in text:
            return _parse_template(text)
        pieces = text.split("${")
        head = pieces[0]
        parts: list[str | Reference] = [head] if head else []
        found: list[Reference] = []
        refs = self._refs
        for piece in pieces[1:]:
            close = piece.find("}")
            if close < 0:
                return _parse_template(text)
            inner = piece[:close]
            ref = refs.get(inner)
            if ref is None:
                ref = self._reference(inner)
                if ref is None:
                    return _parse_template(text)
            parts.append(ref)
            found.append(ref)
            if close + 1 < len(piece):
                parts.append(piece[close + 1 :])
        whole = tuple(parts)
        if len(found) == len(whole):  # references only: one tuple serves as both
            return Template._of(whole, whole)  # type: ignore[arg-type]
        return Template._of(whole, tuple(found))

    def clear(self) -> None:
        """Forget what was parsed (the templates made keep their references)."""
        self._refs.clear()
        self._paths.clear()

    def _reference(self, inner: str) -> Reference | None:
        """The reference ``${inner}`` when it is a simple one (``None``: the full parser's)."""
        if len(inner) + 3 > MAX_REFERENCE_LENGTH:
            return None
        step, dot, dotted = inner.partition(".")
        # an ASCII identifier is exactly [A-Za-z_][A-Za-z0-9_]* (str methods, no regex)
        if not (step.isidentifier() and step.isascii()):
            return None
        if not dot:
            ref = _reference(step)
        else:
            path = self._paths.get(dotted)
            if path is None:
                if _SIMPLE_PATH.fullmatch(dotted) is None:
                    return None
                path = _dotted_path(dotted)
                if path is None:
                    return None
                self._paths[dotted] = path
            ref = _reference(step, path)
        self._refs[inner] = ref
        return ref


def parse_reference(text: str) -> Reference:
    """Parse a string that must be exactly one reference, such as ``"${fetch.items.0}"``."""
    if not text.startswith("${"):
        raise ReferenceSyntaxError(f"expected a reference starting with '${{', got {_clip(text)}")
    ref, end = _parse_at(text, 0)
    if end != len(text):
        raise ReferenceSyntaxError(
            f"unexpected text after the reference at offset {end}: {_clip(text[end:])}",
            position=end,
        )
    return ref


def _clip(s: str, n: int = 40) -> str:
    return repr(s if len(s) <= n else s[:n] + "…")


_SIMPLE = re.compile(_DOTTED)
"""The common case (dotted identifiers and indexes), matched in one linear regex step; anything
else — brackets, errors, limits — goes through the full parser below."""


def _parse_at(text: str, start: int) -> tuple[Reference, int]:
    """Parse the reference whose ``${`` is at ``start``; return it and the offset after ``}``."""
    m = _SIMPLE.match(text, start)
    if m is not None and m.end() - start <= MAX_REFERENCE_LENGTH:
        dotted = m.group(2)
        if not dotted:
            return Reference(m.group(1)), m.end()
        path = _dotted_path(dotted[1:])
        if path is not None:
            return Reference(m.group(1), path), m.end()
    return _parse_full(text, start)


def _parse_full(text: str, start: int) -> tuple[Reference, int]:
    n = min(len(text), start + MAX_REFERENCE_LENGTH)
    i = start + 2

    def fail(msg: str, at: int) -> ReferenceSyntaxError:
        return ReferenceSyntaxError(
            f"{msg} at offset {at} in reference {_clip(text[start:])}", position=at
        )

    def ident(at: int) -> tuple[str, int]:
        if at >= n or text[at] not in _ID_START:
            raise fail("expected an identifier", at)
        k = at + 1
        while k < n and text[k] in _ID_CHARS:
            k += 1
        return text[at:k], k

    step, i = ident(i)
    path: list[Segment] = []
    while True:
        if i >= n:
            if n - start >= MAX_REFERENCE_LENGTH:
                raise fail(f"reference longer than {MAX_REFERENCE_LENGTH} characters", start)
            raise fail("missing closing '}'", i)
        c = text[i]
        if c == "}":
            return Reference(step, tuple(path)), i + 1
        if len(path) >= MAX_SEGMENTS:
            raise fail(f"more than {MAX_SEGMENTS} path segments", i)
        if c == ".":
            i += 1
            if i < n and text[i] in _DIGITS:
                seg_i, i = _index(text, i, n, fail)
                path.append(seg_i)
            else:
                name, i = ident(i)
                if _is_dunder(name):
                    raise fail(f"'{name}' is not allowed (write [\"{name}\"] for such a key)", i)
                path.append(name)
        elif c == "[":
            i += 1
            if i < n and text[i] in "\"'":
                key, i = _quoted(text, i, n, fail)
                path.append(key)
            elif i < n and text[i] in _DIGITS:
                seg_i, i = _index(text, i, n, fail)
                path.append(seg_i)
            else:
                raise fail("expected a quoted key or a non-negative index after '['", i)
            if i >= n or text[i] != "]":
                raise fail("expected ']'", i)
            i += 1
        else:
            raise fail(f"unexpected character {c!r}", i)


def _index(text: str, i: int, n: int, fail: Any) -> tuple[int, int]:
    k = i
    while k < n and text[k] in _DIGITS:
        k += 1
    digits = text[i:k]
    if len(digits) > 1 and digits[0] == "0":
        raise fail("an index may not have leading zeros", i)
    if len(digits) > 9:
        raise fail("index too large", i)
    return int(digits), k


def _quoted(text: str, i: int, n: int, fail: Any) -> tuple[str, int]:
    quote = text[i]
    k = i + 1
    out: list[str] = []
    while k < n:
        c = text[k]
        if c == "\\":
            if k + 1 < n and text[k + 1] in (quote, "\\"):
                out.append(text[k + 1])
                k += 2
                continue
            raise fail("only \\\\ and an escaped quote are allowed inside a quoted key", k)
        if c == quote:
            return "".join(out), k + 1
        out.append(c)
        k += 1
    raise fail("unterminated quoted key", i)


def iter_strings_with_dollar(
    value: Any, path: tuple[Segment, ...] = ()
) -> Iterator[tuple[tuple[Segment, ...], str]]:
    """Yield ``(path, text)`` for every string inside ``value`` that holds a ``$`` (the strings
    that may hold references), in document order.

    The one walk over plan values every reference consumer shares. Paths are built only for the
    strings yielded and the containers on the way to them: most strings of a big plan hold no
    ``$``. Iterative, so arbitrarily deep data cannot exhaust the stack.
    """
    stack: list[tuple[tuple[Segment, ...], Segment | None, Any]] = [(path, None, value)]
    while stack:
        parent, key, v = stack.pop()
        if isinstance(v, str):
            if "$" in v:
                yield (parent if key is None else (*parent, key)), v
        elif isinstance(v, dict):
            here = parent if key is None else (*parent, key)
            stack.extend((here, k, v[k]) for k in reversed(list(v)))
        elif isinstance(v, list):
            here = parent if key is None else (*parent, key)
            stack.extend((here, i, v[i]) for i in range(len(v) - 1, -1, -1))


def json_path(at: str, path: tuple[Segment, ...]) -> str:
    """``at`` followed by ``path`` in JSONPath form: ``$.steps[0].args.urls[2]``."""
    return at + "".join(f"[{seg}]" if type(seg) is int else f".{seg}" for seg in path)


def iter_references(
    value: Any, path: tuple[Segment, ...] = (), parse: Parse = parse_template
) -> Iterator[tuple[tuple[Segment, ...], Template]]:
    """Yield ``(path, template)`` for every string inside ``value`` that holds a reference.

    Raises :class:`ReferenceSyntaxError` for the first malformed one (use the validator to get
    them all). Iterative, so arbitrarily deep data cannot exhaust the stack.
    """
    for p, text in iter_strings_with_dollar(value, path):
        t = parse(text)
        if t.references:
            yield p, t


def resolve_path(outputs: Mapping[str, Any], ref: Reference) -> Any:
    """The value ``ref`` points at, indexing plain dicts and lists only.

    Raises :class:`ReferenceResolutionError` when the step has no output, the path does not
    exist, or the walk meets something that is not plain JSON data — a missing value never
    becomes ``None``. Types are tested with ``type()``, never ``isinstance``, so a foreign
    object is refused without any of its attributes being looked up.
    """
    try:
        value = outputs[ref.step]
    except KeyError:
        raise ReferenceResolutionError(f"{ref}: step '{ref.step}' has no recorded output") from None
    for depth, seg in enumerate(ref.path):
        kind = type(value)
        if kind is dict:
            key = seg if type(seg) is str else str(seg)
            if key not in value:
                where = Reference(ref.step, ref.path[:depth])
                raise ReferenceResolutionError(
                    f"{ref}: the output at {where} has no key {key!r} (keys: {_keys(value)})"
                )
            value = value[key]
        elif kind is list:
            if type(seg) is not int:
                raise ReferenceResolutionError(f"{ref}: {seg!r} indexes a list; use a number")
            if seg >= len(value):
                raise ReferenceResolutionError(
                    f"{ref}: index {seg} is out of range for a list of {len(value)}"
                )
            value = value[seg]
        else:
            _require_json(value, ref)
            raise ReferenceResolutionError(
                f"{ref}: cannot index a {_json_type(value)} with {seg!r}"
            )
    if type(value) not in _JSON_TYPES:
        _require_json(value, ref)
    return value


_JSON_SCALARS = (str, int, float, bool, type(None))
_JSON_TYPES = frozenset((dict, list, *_JSON_SCALARS))


def _require_json(value: Any, ref: Reference) -> None:
    kind = type(value)
    if kind is not dict and kind is not list and kind not in _JSON_SCALARS:
        raise ReferenceResolutionError(
            f"{ref}: the output holds a {kind.__name__}, which is not JSON data; tools must"
            " return plain JSON values"
        )


def _keys(d: dict[str, Any]) -> str:
    ks = list(d)[:8]
    return ", ".join(map(repr, ks)) + (", …" if len(d) > 8 else "") if ks else "none"


def _json_type(v: Any) -> str:
    kind = type(v)
    if v is None:
        return "null"
    if kind is bool:
        return "boolean"
    if kind is int or kind is float:
        return "number"
    if kind is str:
        return "string"
    return kind.__name__


NON_TEXT_SCALARS = frozenset((int, float, bool, type(None)))
"""The exact types of the JSON values with no text in them (numbers, booleans, null): what fills
and walks looking for references or placeholders pass by as they are."""
STR_ONLY = frozenset((str,))
"""``STR_ONLY.issuperset(map(type, items))``: whether every item is exactly a ``str`` (no
subclass), at C speed — a list of references, a dict's keys."""
