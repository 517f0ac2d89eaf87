"""Reading plan documents (JSON or YAML) safely, and normalising what LLMs commonly get wrong.

Hostile input gets a :class:`~planrail.errors.PlanLoadError` with a one-line reason — never a
traceback and never a hang: the size is checked before parsing, YAML is read with
``safe_load``, nesting depth and node count are bounded (YAML aliases cannot blow up a walk).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from planrail.errors import PlanLoadError
from planrail.plan.strict_json import (
    loads_noting_repeats,
    lone_surrogate,
    path_of,
    surrogate_problem,
)

__all__ = [
    "DuplicateKeyError",
    "PlanLimits",
    "load_document",
    "normalize",
    "read_bounded",
    "read_plan_file",
]

try:  # the C loader is ~10× faster; both are "safe"
    _YamlLoader: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - depends on how PyYAML was built
    _YamlLoader = yaml.SafeLoader


@dataclass(frozen=True, slots=True)
class PlanLimits:
    """Bounds on a plan, checked before anything runs. Raise them deliberately for big plans."""

    max_plan_bytes: int = 4 * 1024 * 1024
    """Largest plan document, in bytes."""
    max_steps: int = 10_000
    """Most steps in one plan."""
    max_depth: int = 64
    """Deepest nesting of objects and lists anywhere in the document."""
    max_nodes: int = 2_000_000
    """Most JSON values in the document (YAML aliases count each time they are used)."""
    max_string_length: int = 256 * 1024
    """Longest single string (prompts included), in characters."""
    max_dependencies: int = 1_000
    """Most entries in one step's ``depends_on``."""


class LimitExceeded(PlanLoadError):
    code = "limit_exceeded"


def read_plan_file(path: str | Path, limits: PlanLimits = PlanLimits()) -> str:
    """The text of a plan file, refusing one larger than ``limits.max_plan_bytes``."""
    return read_bounded(path, limits.max_plan_bytes, "the plan", "PlanLimits.max_plan_bytes")


def read_bounded(path: str | Path, limit: int, what: str, setting: str) -> str:
    """The UTF-8 text of the file at ``path``, :class:`LimitExceeded` past ``limit`` bytes.

    At most ``limit + 1`` bytes are read, whatever the file: a device or a pipe that never
    ends (``/dev/zero``) is refused once it passes the limit, not read until memory runs out.
    """
    p = Path(path)
    try:
        size = p.stat().st_size  # a regular file's: refused before reading any of it
        if size > limit:
            raise LimitExceeded(
                f"{path}: {what} is {size:,} bytes; the limit is {limit:,} ({setting})"
            )
        with p.open("rb") as f:
            data = f.read(limit + 1)
    except OSError as exc:
        raise PlanLoadError(f"{path}: cannot read it ({exc.strerror or exc})") from exc
    if len(data) > limit:
        raise LimitExceeded(f"{path}: {what} is more than {limit:,} bytes ({setting})")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PlanLoadError(f"{path}: not UTF-8 text (byte {exc.start})") from exc


class DuplicateKeyError(PlanLoadError):
    """An object holds the same key twice (JSON and YAML would silently keep the last)."""

    code = "duplicate_key"


Duplicates = list[tuple[str, str]]
"""``(JSONPath of the repeated key, message)`` for each key an object holds twice."""


def load_document(
    text: str | bytes,
    limits: PlanLimits = PlanLimits(),
    *,
    fmt: str | None = None,
    duplicates: Duplicates | None = None,
    what: str = "the plan",
) -> Any:
    """Parse JSON or YAML within ``limits``; ``fmt`` is ``"json"``, ``"yaml"`` or sniffed.

    A key repeated in one object is a :class:`DuplicateKeyError` — or, when a ``duplicates``
    list is given, appended to it (the last value is kept) so the caller can go on checking.
    ``what`` names the document in messages (``"the catalog"``, ``"the policy"``, …).
    """
    if isinstance(text, bytes):
        if len(text) > limits.max_plan_bytes:
            raise LimitExceeded(_too_big(what, len(text), limits))
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise PlanLoadError(f"{what} is not UTF-8 text (byte {exc.start})") from exc
    size = len(text.encode("utf-8")) if len(text) * 4 > limits.max_plan_bytes else len(text)
    if size > limits.max_plan_bytes:
        raise LimitExceeded(_too_big(what, size, limits))
    if not text.strip():
        raise PlanLoadError(f"{what} is empty")
    if fmt is None:
        fmt = "json" if text.lstrip()[:1] in "{[" else "yaml"
    found: Duplicates = []
    try:
        data = _parse_json(text, found) if fmt == "json" else _parse_yaml(text, found)
    except RecursionError:
        raise LimitExceeded(
            f"{what} nests too deeply to parse (limit {limits.max_depth} levels)"
        ) from None
    except json.JSONDecodeError as exc:
        raise PlanLoadError(
            f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        if "nesting depth" in problem:  # libyaml's own depth guard
            raise LimitExceeded(
                f"{what} nests too deeply to parse (limit {limits.max_depth} levels)"
            ) from None
        raise PlanLoadError(f"invalid YAML{where}: {problem}") from None
    except ValueError as exc:  # e.g. an integer of more than 4,300 digits (JSON and YAML)
        reason = str(exc).split(";")[0]
        raise PlanLoadError(f"{what} holds a value that cannot be read: {reason}") from None
    check_bounds(data, limits, what)
    if found:
        if duplicates is None:
            path, message = found[0]
            raise DuplicateKeyError(f"{path}: {message}")
        duplicates.extend(found)
    return data


def _parse_json(text: str, found: Duplicates) -> Any:
    data, repeated = loads_noting_repeats(text)
    found.extend((r.path, _duplicate_message(r.key)) for r in repeated)
    return data


def _duplicate_message(key: str, line: int | None = None) -> str:
    at = f" (again at line {line})" if line is not None else ""
    return (
        f"key '{key}' appears twice in this object{at}; only the last value would be kept —"
        " remove or rename one"
    )


class _StrictYamlLoader(_YamlLoader):  # type: ignore[misc]
    """The safe loader, recording mappings that repeat a key (PyYAML keeps the last)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.flagged: dict[int, list[tuple[str, int]]] = {}
        self.flattened: set[int] = set()
        self.root: Any = None

    def construct_document(self, node: Any) -> Any:
        self.root = node
        return super().construct_document(node)

    def flatten_mapping(self, node: Any) -> None:
        # merge keys (<<) bring in keys the mapping may override: that is not a repeat
        if id(node) not in self.flattened:
            self._check_keys(node)
            self.flattened.add(id(node))
        super().flatten_mapping(node)

    def _check_keys(self, node: Any) -> None:
        seen: set[tuple[str, str]] = set()
        for key, _ in node.value:
            if not isinstance(key, yaml.ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
                continue
            k = (key.tag, key.value)
            if k in seen:
                self.flagged.setdefault(id(node), []).append((key.value, key.start_mark.line + 1))
            seen.add(k)


def _parse_yaml(text: str, found: Duplicates) -> Any:
    loader = _StrictYamlLoader(text)
    try:
        data = loader.get_single_data()
    finally:
        loader.dispose()
    if loader.flagged:
        seen: set[int] = set()
        stack: list[tuple[str, Any]] = [("$", loader.root)]
        while stack:
            path, node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if isinstance(node, yaml.MappingNode):
                for key, line in loader.flagged.get(id(node), ()):
                    found.append((path_of(path, key), _duplicate_message(key, line)))
                pairs = [(k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode)]
                stack.extend((path_of(path, k.value), v) for k, v in pairs)
            elif isinstance(node, yaml.SequenceNode):
                stack.extend((f"{path}[{i}]", v) for i, v in enumerate(node.value))
        found.sort()
    return data


def _too_big(what: str, size: int, limits: PlanLimits) -> str:
    return (
        f"{what} is {size:,} bytes; the limit is {limits.max_plan_bytes:,}"
        " (PlanLimits.max_plan_bytes)"
    )


def _any(what: str) -> str:
    """``"a plan"`` for ``"the plan"``: what is said of every such document."""
    noun = what.removeprefix("the ")
    if noun == what:
        return what
    return f"{'an' if noun[:1] in 'aeiou' else 'a'} {noun}"


def _clip(where: str) -> str:
    return where if len(where) <= 60 else where[:60] + "…"


def check_bounds(data: Any, limits: PlanLimits, what: str = "the plan") -> None:
    """Walk ``data`` once, iteratively, enforcing depth, node count, string length and types
    (``what`` names the document in messages)."""
    if not within_bounds(data, limits):
        _check_bounds(data, limits, what)  # says what is wrong, the first problem the walk meets


_PLAIN_LEAVES = frozenset((int, bool, type(None)))


def within_bounds(data: Any, limits: PlanLimits) -> bool:
    """Whether ``data`` is plain JSON within ``limits``: what :func:`_check_bounds` checks, for
    the usual case, without the paths (a container's plain leaves are checked where they are,
    not pushed). ``False`` at anything unusual: the full walk then says what it is."""
    max_nodes, max_depth, max_len = limits.max_nodes, limits.max_depth, limits.max_string_length
    stack: list[tuple[Any, int]] = [(data, 0)]
    nodes = 1  # each value is counted by its container (the document by itself)
    while stack:
        value, depth = stack.pop()
        t = type(value)
        if t is dict:
            if depth >= max_depth:
                return False
            try:  # keys: strings (str.isascii refuses anything else) that are Unicode text
                if not all(map(str.isascii, value)) and any(map(lone_surrogate, value)):
                    return False
            except (TypeError, AttributeError):  # a key that is not a string: the full walk
                return False
            children: Any = value.values()
        elif t is list:
            if depth >= max_depth:
                return False
            children = value
        else:
            children = (value,)  # the document itself is a leaf
            nodes -= 1
        nodes += len(children)
        if nodes > max_nodes:
            return False
        for v in children:
            tv = type(v)
            if tv is str:
                if len(v) > max_len or not (v.isascii() or lone_surrogate(v) is None):
                    return False
            elif tv is float:
                if not math.isfinite(v):
                    return False
            elif tv is dict or tv is list:
                stack.append((v, depth + 1))
            elif tv not in _PLAIN_LEAVES:
                return False  # a subclass, a foreign object: the full walk says what
    return True


def _check_bounds(data: Any, limits: PlanLimits, what: str = "the plan") -> None:
    # A value's JSONPath is kept as (parent, key) and spelled out only for an error message:
    # building it for every value cost more than the checks themselves.
    stack: list[tuple[Any, int, Any]] = [(data, 0, None)]
    nodes = 0
    max_nodes, max_depth, max_len = limits.max_nodes, limits.max_depth, limits.max_string_length
    while stack:
        value, depth, at = stack.pop()
        nodes += 1
        if nodes > max_nodes:
            raise LimitExceeded(f"{what} holds more than {max_nodes:,} values")
        t = type(value)
        if t is str:
            _check_text(value, at, max_len)
        elif t is dict or (t is not list and isinstance(value, dict)):
            if depth >= max_depth:
                raise LimitExceeded(f"{_clip(_where(at))}: nested deeper than {max_depth} levels")
            for k, v in value.items():
                if type(k) is not str and not isinstance(k, str):
                    raise PlanLoadError(f"{_where(at)}: keys must be strings, got {k!r}")
                if (problem := surrogate_problem(k)) is not None:
                    raise PlanLoadError(f"{_where(at)}: the key {k!a} {problem}")
                stack.append((v, depth + 1, (at, k)))
        elif t is list or isinstance(value, list):
            if depth >= max_depth:
                raise LimitExceeded(f"{_clip(_where(at))}: nested deeper than {max_depth} levels")
            stack.extend((v, depth + 1, (at, i)) for i, v in enumerate(value))
        elif isinstance(value, str):  # a str subclass
            _check_text(value, at, max_len)
        elif value is None or isinstance(value, bool | int | float):
            if isinstance(value, float) and not math.isfinite(value):
                shown = "NaN" if value != value else "Infinity"
                raise PlanLoadError(f"{_where(at)}: {shown} is not JSON (numbers must be finite)")
        else:
            raise PlanLoadError(
                f"{_where(at)}: {type(value).__name__} values are not allowed in {_any(what)}"
                " (JSON only)"
            )


def _check_text(value: str, at: Any, max_len: int) -> None:
    if len(value) > max_len:
        raise LimitExceeded(
            f"{_where(at)}: a string of {len(value):,} characters; the limit is {max_len:,}"
        )
    if (problem := surrogate_problem(value)) is not None:
        raise PlanLoadError(f"{_where(at)}: the string {problem}")


def _where(at: Any) -> str:
    """The JSONPath of a ``(parent, key)`` chain; segments stop being added past 200 chars."""
    keys: list[str | int] = []
    while at is not None:
        at, key = at
        keys.append(key)
    where = "$"
    for key in reversed(keys):
        if len(where) < 200:
            where = f"{where}[{key}]" if isinstance(key, int) else f"{where}.{key}"
    return where


# What LLMs write for each action, and for each step field.
_ACTION_ALIASES: dict[str, str] = {
    **dict.fromkeys(
        [
            "call_tool",
            "use_tool",
            "execute_function",
            "function_call",
            "tool",
            "tool_use",
            "invoke_tool",
            "run_tool",
            "execute_tool",
            "function",
            "call_function",
            "toolcall",
            "tool-call",
            "tool call",
            "action",
        ],
        "tool_call",
    ),
    **dict.fromkeys(
        [
            "llm",
            "call_llm",
            "llm-call",
            "llm call",
            "ask_llm",
            "generate",
            "completion",
            "chat",
            "prompt",
            "think",
            "reason",
            "llm_generate",
        ],
        "llm_call",
    ),
    **dict.fromkeys(
        [
            "condition",
            "check",
            "check_condition",
            "if",
            "branch",
            "conditional",
            "condition-check",
            "evaluate_condition",
        ],
        "condition_check",
    ),
}
_FIELD_ALIASES: dict[str, str] = {
    "step_id": "id",
    "dependencies": "depends_on",
    "deps": "depends_on",
    "depends": "depends_on",
    "dependsOn": "depends_on",
    "requires": "depends_on",
    "arguments": "args",
    "params": "args",
    "parameters": "args",
    "inputs": "args",
    "tool_name": "tool",
    "function_name": "tool",
    "type": "action",
    "action_type": "action",
}


_ALIASES = frozenset(_FIELD_ALIASES)


def normalize(data: Any) -> tuple[Any, list[tuple[str | None, str, str]]]:
    """Rewrite common LLM spellings into the canonical plan form.

    Returns the new document and ``(step_id, path, message)`` notes, one per change; nothing
    is changed silently. Data that is not plan-shaped is returned unchanged for the validator.
    The input is never modified: a step that needs a change is copied first, and one that
    needs none is the input's own dict (copying every step of a 100,000-step plan cost 17 MiB
    while it was validated).
    """
    notes: list[tuple[str | None, str, str]] = []
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
        return data, notes
    steps = [
        _normalized_step(i, raw, notes) if _needs_normalizing(raw) else raw
        for i, raw in enumerate(data["steps"])
    ]
    return {**data, "steps": steps}, notes


_CANONICAL_ACTIONS = frozenset(("tool_call", "llm_call", "condition_check"))


def _needs_normalizing(raw: Any) -> bool:
    """Whether :func:`_normalized_step` would change ``raw`` (a cheap look at a few keys)."""
    if not isinstance(raw, dict):
        return False
    action = raw.get("action")
    if isinstance(action, str) and action not in _CANONICAL_ACTIONS:
        return True
    if "action" not in raw and "tool" not in raw and ("prompt" in raw or "condition" in raw):
        return True
    if not _ALIASES.isdisjoint(raw):
        return True
    deps = raw.get("depends_on", ())
    return isinstance(deps, str) or deps is None or ("args" in raw and raw["args"] is None)


def _normalized_step(
    i: int, raw: dict[str, Any], notes: list[tuple[str | None, str, str]]
) -> dict[str, Any]:
    """A copy of ``raw`` with the common LLM spellings rewritten, each with a note."""
    step = dict(raw)
    sid = step.get("id") if isinstance(step.get("id"), str) else None
    for alias, canonical in _FIELD_ALIASES.items():
        if alias in step and canonical not in step:
            value = step.pop(alias)
            if canonical == "action" and not isinstance(value, str):
                step[alias] = value
                continue
            step[canonical] = value
            if canonical == "id" and isinstance(value, str):
                sid = value
            notes.append((sid, f"$.steps[{i}].{alias}", f"'{alias}' read as '{canonical}'"))
    action = step.get("action")
    if isinstance(action, str) and action not in _CANONICAL_ACTIONS:
        key = action.strip().lower()
        canonical_action = _ACTION_ALIASES.get(key) or _ACTION_ALIASES.get(
            key.replace("-", "_").replace(" ", "_")
        )
        if canonical_action:
            step["action"] = canonical_action
            notes.append(
                (sid, f"$.steps[{i}].action", f"action '{action}' read as '{canonical_action}'")
            )
    if "action" not in step:
        if "tool" not in step and "prompt" in step:
            step["action"] = "llm_call"
        elif "tool" not in step and "condition" in step:
            step["action"] = "condition_check"
    if isinstance(step.get("depends_on"), str):
        step["depends_on"] = [step["depends_on"]]
        notes.append((sid, f"$.steps[{i}].depends_on", "a single dependency read as a list"))
    elif step.get("depends_on") is None and "depends_on" in step:
        step["depends_on"] = []
        notes.append((sid, f"$.steps[{i}].depends_on", "null depends_on read as []"))
    if step.get("args") is None and "args" in step:
        step["args"] = {}
        notes.append((sid, f"$.steps[{i}].args", "null args read as {}"))
    return step
