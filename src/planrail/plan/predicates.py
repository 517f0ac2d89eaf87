"""Predicates: JSON conditions over referenced values — checked statically, evaluated without eval.

Used by ``condition_check`` steps (``condition``), ``when`` guards and ``repeat.until``. A
predicate is one of::

    true | false                          a constant
    "${step.path}"                        the referenced value, which must be a boolean
    {"eq": [a, b]}   {"ne": [a, b]}       JSON equality (1 == 1.0; true is not 1)
    {"lt": [a, b]}   {"le": ...}  {"gt": ...}  {"ge": ...}
                                          ordering: two numbers or two strings
    {"in": [x, c]}                        x is an element of list c, a substring of string c,
                                          or a key of object c  ({"contains": [c, x]} likewise);
                                          a list x: every element is in c; a number x in a
                                          string c: written there as a number
    {"exists": "${step.path}"}            the reference resolves: its step succeeded and the
                                          path exists in its output
    {"all": [p, ...]}  {"any": [p, ...]}  conjunction / disjunction, left to right, short-circuit
    {"not": p}                            negation

``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=``, ``equals`` and ``not_equals`` are accepted for the
comparison names. An operand is
any JSON value; strings in it may hold references (a string that is exactly one reference keeps
the referenced value's type, as in ``args``) and ``{"$first": [...]}`` takes the first available.

Evaluating a reference that does not resolve raises
:class:`~planrail.errors.ReferenceResolutionError` (never ``null``): guard it with ``exists``,
which ``all`` evaluates first when it comes first. A type error (``lt`` on a string and a number,
a non-boolean ``"${ref}"``) raises :class:`PredicateError`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from planrail.errors import PlanError, PlanrailError, ReferenceResolutionError, ReferenceSyntaxError
from planrail.plan.first import compile_args
from planrail.plan.refs import Parse, Reference, parse_reference, parse_template, resolve_path
from planrail.plan.schema import json_kind, json_type

__all__ = [
    "MAX_PREDICATE_DEPTH",
    "OPERATORS",
    "Predicate",
    "PredicateError",
    "PredicateSyntaxError",
    "check_predicate",
    "compile_predicate",
    "predicate_type_problems",
]

MAX_PREDICATE_DEPTH = 32
"""Deepest nesting of ``all``/``any``/``not``."""

_COMPARE = {
    "eq": "eq",
    "ne": "ne",
    "lt": "lt",
    "le": "le",
    "gt": "gt",
    "ge": "ge",
    "==": "eq",
    "!=": "ne",
    "<": "lt",
    "<=": "le",
    ">": "gt",
    ">=": "ge",
    "equals": "eq",
    "not_equals": "ne",
}
_BINARY = {**_COMPARE, "in": "in", "contains": "contains"}
OPERATORS: tuple[str, ...] = (*_BINARY, "exists", "all", "any", "not")
"""Every operator name a predicate object may use."""

Outputs = Mapping[str, Any]
_Eval = Callable[[Outputs], bool]


class PredicateSyntaxError(PlanError):
    """A predicate that does not follow the grammar; ``problems`` lists ``(path, message)``."""

    code = "invalid_predicate"

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{p or '(predicate)'}: {m}" for p, m in problems[:3]))


class PredicateError(PlanrailError):
    """A predicate could not be evaluated on the real values (a type error)."""

    code = "predicate_error"


@dataclass(frozen=True, slots=True)
class Predicate:
    """A checked predicate; :meth:`evaluate` it on the outputs of finished steps."""

    source: Any
    _fn: _Eval

    def evaluate(self, outputs: Outputs) -> bool:
        """True or False; raises ``ReferenceResolutionError`` or :class:`PredicateError`."""
        return self._fn(outputs)


def check_predicate(value: Any, parse: Parse = parse_template) -> list[tuple[str, str]]:
    """Every problem in ``value`` as ``(path, message)``; ``path`` is relative (``.all[1].eq``)."""
    problems: list[tuple[str, str]] = []
    _build(value, "", 0, problems, parse)
    return problems


def compile_predicate(value: Any, parse: Parse = parse_template) -> Predicate:
    """Check ``value`` and return it ready to evaluate; :class:`PredicateSyntaxError` if not.
    ``parse`` gives the parsed form of its strings (a compiled plan's ``template``)."""
    problems: list[tuple[str, str]] = []
    fn = _build(value, "", 0, problems, parse)
    if problems or fn is None:
        raise PredicateSyntaxError(problems or [("", "not a predicate")])
    return Predicate(value, fn)


# ---------------------------------------------------------------- building


def _build(
    value: Any,
    path: str,
    depth: int,
    problems: list[tuple[str, str]],
    parse: Parse = parse_template,
) -> _Eval | None:
    if depth > MAX_PREDICATE_DEPTH:
        problems.append((path, f"nested deeper than {MAX_PREDICATE_DEPTH} levels"))
        return None
    if type(value) is bool:
        const: bool = value
        return lambda _o: const
    if isinstance(value, str):
        ref = _single_reference(value, path, problems, parse)
        if ref is None:
            return None
        found: Reference = ref
        return lambda o: _as_bool(resolve_path(o, found), found)
    if not isinstance(value, dict) or len(value) != 1:
        problems.append(
            (
                path,
                'a predicate is true, false, "${step.field}" or an object with'
                f" one operator ({', '.join(OPERATORS)})",
            )
        )
        return None
    ((op, arg),) = value.items()
    at = f"{path}.{op}"
    if op in _BINARY:
        if not isinstance(arg, list) or len(arg) != 2:
            problems.append((at, f"'{op}' takes a list of two operands"))
            return None
        left, right = (_operand(a, f"{at}[{i}]", problems, parse) for i, a in enumerate(arg))
        if left is None or right is None:
            return None
        name = _BINARY[op]
        return lambda o: _apply(name, left(o), right(o))
    if op == "exists":
        if not isinstance(arg, str):
            problems.append((at, "'exists' takes one reference, such as \"${step.field}\""))
            return None
        ref = _single_reference(arg, at, problems, parse)
        if ref is None:
            return None
        return lambda o: _exists(o, ref)
    if op in ("all", "any"):
        if not isinstance(arg, list) or not arg:
            problems.append((at, f"'{op}' takes a non-empty list of predicates"))
            return None
        parts = [_build(p, f"{at}[{i}]", depth + 1, problems, parse) for i, p in enumerate(arg)]
        if any(p is None for p in parts):
            return None
        fns = [p for p in parts if p is not None]
        if op == "all":
            return lambda o: all(f(o) for f in fns)
        return lambda o: any(f(o) for f in fns)
    if op == "not":
        inner = _build(arg, at, depth + 1, problems, parse)
        if inner is None:
            return None
        return lambda o: not inner(o)
    problems.append((path, f"unknown operator '{op}'; use one of {', '.join(OPERATORS)}"))
    return None


def _single_reference(
    s: str, path: str, problems: list[tuple[str, str]], parse: Parse
) -> Reference | None:
    try:
        single = parse(s).single
    except ReferenceSyntaxError:
        single = None
    if single is not None and s.startswith("${"):
        return single
    try:
        return parse_reference(s)  # for its message
    except ReferenceSyntaxError as exc:
        problems.append(
            (path, f'expected exactly one reference such as "${{step.field}}": {exc.message}')
        )
        return None


def _operand(
    value: Any, path: str, problems: list[tuple[str, str]], parse: Parse
) -> Callable[[Outputs], Any] | None:
    try:
        _check_templates(value, parse)
        return compile_args(value, parse)
    except ReferenceSyntaxError as exc:
        problems.append((path, exc.message))
    except ValueError as exc:
        problems.append((path, str(exc)))
    return None


def _check_templates(value: Any, parse: Parse) -> None:
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            if "$" in v:
                parse(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)


# ---------------------------------------------------------------- static types

TypesOf = Callable[[str], Any]
"""For a string operand: ``True`` (plain text), the JSON types its reference produces
(a frozenset, ``None`` for any) or ``False`` when unknown."""

_NUMBERS = frozenset({"integer", "number"})


def predicate_type_problems(value: Any, types_of: TypesOf) -> list[tuple[str, str]]:
    """``(path, message)`` where the declared types of a well-formed predicate's operands can
    never work: a ``"${ref}"`` predicate that is not a boolean, an ordering between a string
    and a number, ``in`` on something that is not a list, string or object. Operands of
    unknown type are given the benefit of the doubt; malformed parts are skipped (they are
    ``invalid_predicate`` already)."""
    problems: list[tuple[str, str]] = []
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        v, path = stack.pop()
        if isinstance(v, str):
            types = types_of(v)
            if isinstance(types, frozenset) and types and "boolean" not in types:
                problems.append(
                    (path, f"{v} is {_names(types)} according to its producer's output schema,"
                     " not a boolean; compare it with 'eq' or another operator")
                )  # fmt: skip
            continue
        if not isinstance(v, dict) or len(v) != 1:
            continue
        ((op, arg),) = v.items()
        at = f"{path}.{op}"
        if op in ("all", "any") and isinstance(arg, list):
            stack.extend((p, f"{at}[{i}]") for i, p in enumerate(arg))
        elif op == "not":
            stack.append((arg, at))
        elif op in _BINARY and isinstance(arg, list) and len(arg) == 2:
            a, b = (_operand_types(x, types_of) for x in arg)
            name = _BINARY[op]
            problem = _binary_problem(name, a, b) if name != "contains" else None
            if name == "contains":
                problem = _binary_problem("in", b, a)
            if problem:
                problems.append((at, problem))
    return problems


def _operand_types(value: Any, types_of: TypesOf) -> frozenset[str] | None:
    if isinstance(value, str):
        found = types_of(value)
        if found is True:
            return frozenset({"string"})
        return found if isinstance(found, frozenset) and found else None
    if isinstance(value, dict) and "$first" in value:
        return None
    kind = json_type(value)
    return _NUMBERS if kind in _NUMBERS else frozenset({kind})


def _binary_problem(op: str, a: frozenset[str] | None, b: frozenset[str] | None) -> str | None:
    if a is None or b is None:
        return None
    if op in ("lt", "le", "gt", "ge"):
        if (a & _NUMBERS and b & _NUMBERS) or ("string" in a and "string" in b):
            return None
        return (
            f"'{op}' compares two numbers or two strings, but its operands are {_names(a)}"
            f" and {_names(b)} by their declared types; compare like with like"
        )
    if op == "in":
        if not b & {"array", "string", "object"}:
            return f"'in' needs a list, a string or an object, not {_names(b)}"
        if "array" not in b and "string" not in a:
            return f"'in' looks for a string in {_names(b)}, not {_names(a)}"
    return None


def _names(types: frozenset[str]) -> str:
    return "/".join(sorted(types))


# ---------------------------------------------------------------- evaluating


def _as_bool(value: Any, ref: Reference) -> bool:
    if type(value) is not bool:
        raise PredicateError(f"{ref} is {json_kind(value)}, not a boolean; compare it with 'eq'")
    return value


def _exists(outputs: Outputs, ref: Reference) -> bool:
    try:
        resolve_path(outputs, ref)
    except ReferenceResolutionError:
        return False
    return True


def _apply(op: str, a: Any, b: Any) -> bool:
    if op == "eq":
        return json_equal(a, b)
    if op == "ne":
        return not json_equal(a, b)
    if op == "in":
        return _member(a, b)
    if op == "contains":
        return _member(b, a)
    if (_is_number(a) and _is_number(b)) or (type(a) is str and type(b) is str):
        if op == "lt":
            return bool(a < b)
        if op == "le":
            return bool(a <= b)
        if op == "gt":
            return bool(a > b)
        return bool(a >= b)
    raise PredicateError(
        f"'{op}' compares two numbers or two strings, not {json_kind(a)} and {json_kind(b)}"
    )


def _member(x: Any, container: Any) -> bool:
    """``x`` in ``container``. A list ``x`` is in it when every element is (a list of
    recipients all in the allowed list, or all in the goal's text); a number is in a string
    when it is written there as a number (``42``, ``42.5``, ``42.50``)."""
    kind = type(container)
    if kind is list:
        if any(json_equal(x, e) for e in container):
            return True
        return type(x) is list and bool(x) and all(_member(e, container) for e in x)
    if kind is str or kind is dict:
        if type(x) is list and x:
            return all(_member(e, container) for e in x)
        if kind is str and _is_number(x):
            return _number_in_text(x, container)
        if type(x) is not str:
            raise PredicateError(
                f"'in' looks for a string in {json_kind(container)}, not {json_kind(x)}"
            )
        return x in container
    raise PredicateError(f"'in' needs a list, a string or an object, not {json_kind(container)}")


def _number_in_text(n: float, text: str) -> bool:
    forms = {repr(n), f"{n:.2f}"}
    if float(n).is_integer():
        forms.add(str(int(n)))
    return any(re.search(rf"(?<![\d.]){re.escape(f)}(?!\d)", text) for f in forms)


def _is_number(v: Any) -> bool:
    return type(v) is int or type(v) is float


def json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values: numbers by value, booleans only equal booleans."""
    if _is_number(a) and _is_number(b):
        return bool(a == b)
    ta, tb = type(a), type(b)
    if ta is not tb:
        return False
    if ta is list:
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if ta is dict:
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return bool(a == b)
