"""Secrets: which values are secret, and how they are kept out of stores, traces, logs and errors.

A value is secret when it is

- passed in a parameter typed :data:`Secret` (``pydantic.SecretStr``) or listed in
  ``@tool(secret_params=...)``, or a catalog parameter whose schema says ``"format": "password"``
  or ``"writeOnly": true``;
- part of the output of a tool declared ``sensitivity="secret"``;
- the part of another step's output that a plan passes into a secret parameter
  (``"token": "${vault.token}"`` makes ``vault``'s ``token`` field secret before ``vault`` runs).

A :class:`Redactor` (one per run) knows those places statically and learns the secret *values*
as they appear; it replaces secret parameters by :data:`REDACTED` and scrubs every known value
out of any text or JSON it is given. The executor applies it to what it records (step arguments,
outputs, errors, reasons, events, the stored plan) and to log records of the ``planrail`` logger.

Values shorter than :data:`MIN_SCRUB_LENGTH` characters are still redacted where they sit in a
secret parameter, but are not searched for inside other text (scrubbing every ``"a"`` would
destroy the record without protecting anything).
"""

from __future__ import annotations

import logging
import re
import threading
import typing
import weakref
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Annotated, Any, Protocol

import pydantic

from planrail.errors import ReferenceSyntaxError
from planrail.plan.model import step_tools
from planrail.plan.refs import Parse, Reference, iter_strings_with_dollar, parse_template
from planrail.plan.resolve import copy_json

if TYPE_CHECKING:
    from planrail.plan.compiled import CompiledPlan
    from planrail.plan.model import Plan, Step
    from planrail.plan.tools import ToolRegistry, ToolSpec

__all__ = [
    "MIN_SCRUB_LENGTH",
    "REDACTED",
    "SECRET",
    "Redactor",
    "Secret",
    "SecretLogFilter",
    "is_secret_type",
    "secret_params_of",
]

REDACTED = "***"
"""What a secret is replaced by (the same marker ``planrail.observe`` uses)."""

MIN_SCRUB_LENGTH = 4
"""Known secret values shorter than this are not searched for inside other text."""

Secret = pydantic.SecretStr
"""Annotate a tool parameter with this to make it secret: the tool receives a
``pydantic.SecretStr`` (call ``.get_secret_value()``), so even the tool's own ``repr`` of its
arguments does not show it, and planrail never records it in clear."""


class _SecretMarker:
    """Marks a parameter secret while the tool keeps receiving a plain value:
    ``token: Annotated[str, planrail.plan.secrets.SECRET]``."""

    def __repr__(self) -> str:
        return "SECRET"


SECRET = _SecretMarker()
"""Put in ``Annotated[...]`` metadata to make a parameter secret without changing its type."""


def is_secret_type(annotation: Any) -> bool:
    """Whether a parameter annotation declares a secret (``SecretStr``, ``SecretBytes``,
    ``Annotated[..., SECRET]``, or an optional of one of these)."""
    if annotation in (pydantic.SecretStr, pydantic.SecretBytes):
        return True
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        args = typing.get_args(annotation)
        return any(m is SECRET for m in args[1:]) or is_secret_type(args[0])
    if origin is typing.Union or str(origin) == "<class 'types.UnionType'>":
        return any(is_secret_type(a) for a in typing.get_args(annotation))
    return False


def secret_params_of(spec: ToolSpec | None) -> frozenset[str]:
    """The secret parameters of a tool: declared ones, plus those its input schema marks as
    passwords or write-only (catalog tools)."""
    if spec is None:
        return frozenset()
    found = set(spec.secret_params)
    props = spec.input_schema.get("properties") if isinstance(spec.input_schema, dict) else None
    if isinstance(props, dict):
        for name, schema in props.items():
            if isinstance(schema, dict) and (
                schema.get("format") == "password"
                or schema.get("writeOnly") is True
                or (
                    isinstance(schema.get("x-planrail"), dict)
                    and schema["x-planrail"].get("secret")
                )
            ):
                found.add(name)
    return frozenset(found)


_Path = tuple[str | int, ...]


class _StepRan(Protocol):
    @property
    def output(self) -> Any: ...


class _Ran(Protocol):
    """A finished run as :meth:`Redactor.learn_outputs` reads it (a ``RunResult``)."""

    @property
    def steps(self) -> Mapping[str, _StepRan]: ...


class Redactor:
    """One run's knowledge of its secrets; redacts and scrubs what the run records.

    Build it with :meth:`for_plan`, which returns ``None`` when nothing in the plan can be
    secret (then there is nothing to pay for).
    """

    def __init__(
        self,
        steps: Mapping[str, Step],
        registry: ToolRegistry,
        compiled: CompiledPlan | None = None,
    ) -> None:
        self._steps: dict[str, Step] = dict(steps)
        self._registry = registry
        self._plan = compiled
        """The compiled plan the steps belong to: the secret paths are read off its
        references, its parsed strings give the literals (nothing is parsed again)."""
        self._parse: Parse = compiled.template if compiled is not None else parse_template
        self._lock = threading.Lock()
        self._known: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        self._secret_paths: dict[str, list[_Path]] = {}
        """Per producing step: output paths that flow into a secret parameter (``()``: all)."""
        for step in list(steps.values()):
            self._scan(step)
        _LIVE.add(self)
        _install_log_filter()

    @classmethod
    def for_plan(cls, plan: Plan, registry: ToolRegistry) -> Redactor | None:
        """A redactor for ``plan``, or ``None`` if no step calls a tool with secrets (only then
        is the plan compiled: its references are read, as a run's redactor reads them)."""
        from planrail.plan.compiled import CompiledPlan  # (compiled → tools → this module)

        if not _has_secrets(plan.steps, registry):
            return None
        return cls._of(CompiledPlan.of(plan, registry))

    @classmethod
    def for_compiled(cls, compiled: CompiledPlan, *, always: bool = False) -> Redactor | None:
        """A redactor for a compiled plan (an open one grows: :meth:`add_steps`), or ``None``
        if no step calls a tool with secrets and not ``always``."""
        if always or _has_secrets((c.step for c in compiled.steps.values()), compiled.registry):
            return cls._of(compiled)
        return None

    @classmethod
    def _of(cls, compiled: CompiledPlan) -> Redactor:
        return cls({sid: c.step for sid, c in compiled.steps.items()}, compiled.registry, compiled)

    # ------------------------------------------------------------------ static knowledge

    def _scan(self, step: Step) -> None:
        """Learn what ``step`` makes secret: literal secret arguments and producers' paths."""
        if step.action == "tool_call" and step.tool:
            spec = self._registry.spec(step.tool)
            if spec is not None and spec.sensitivity == "secret":
                self._secret_paths.setdefault(step.id, []).append(())
        for field, tool_name, args in _calls_of(step):
            secrets = secret_params_of(self._registry.spec(tool_name))
            if not secrets or not isinstance(args, dict):
                continue
            for name in secrets & set(args):
                for ref in self._references(step, (*field, name), args[name]):
                    producer = ref.step
                    if producer == "item" and step.for_each is not None:
                        for fe in self._references(step, ("for_each",), step.for_each):
                            self._secret_paths.setdefault(fe.step, []).append(fe.path)
                        continue
                    self._secret_paths.setdefault(producer, []).append(ref.path)
                self.learn(_literals(args[name], self._parse))

    def _references(self, step: Step, where: tuple[str, ...], value: Any) -> list[Reference]:
        """The references in ``value``, the field at ``where`` in ``step``: read off the
        compiled plan when the step is its own."""
        compiled = self._plan.steps.get(step.id) if self._plan is not None else None
        if compiled is not None and compiled.step is step:
            return compiled.references_under(*where)
        return _references(value, self._parse)

    def add_steps(self, steps: Iterable[Step]) -> None:
        """Steps added to an open plan while it runs."""
        for step in steps:
            self._steps[step.id] = step
            self._scan(step)

    def secret_params(self, step_id: str) -> frozenset[str]:
        """Secret parameter names of the tool (and fallback tool) ``step_id`` calls."""
        step = self._steps.get(step_id)
        if step is None:
            return frozenset()
        names: set[str] = set()
        for tool_name in step_tools(step):
            names |= secret_params_of(self._registry.spec(tool_name))
        return frozenset(names)

    # ------------------------------------------------------------------ learning values

    def learn(self, value: Any) -> None:
        """Remember every string (and number) inside ``value`` as a secret value."""
        found = [s for s in _leaves(value) if s]
        if not found:
            return
        with self._lock:
            before = len(self._known)
            self._known.update(found)
            if len(self._known) != before:
                self._pattern = None

    def learn_outputs(self, plan: Plan, runs: Iterable[_Ran]) -> None:
        """Learn the secret values in the outputs of finished runs of ``plan`` (its steps
        only): what was printed or sent on after them is redacted then, even where the store
        that recorded them, or the redactor that did, was another."""
        for run in runs:
            for sid, ran in run.steps.items():
                if sid in plan.by_id:
                    self.output(sid, ran.output)

    @property
    def known(self) -> int:
        """How many secret values have been learned (for tests and diagnostics)."""
        return len(self._known)

    # ------------------------------------------------------------------ redacting

    def text(self, s: str) -> str:
        """``s`` with every known secret value replaced by :data:`REDACTED`."""
        pattern = self._compiled()
        if pattern is None or not s:
            return s
        return pattern.sub(REDACTED, s)

    def scrub(self, value: Any) -> Any:
        """A copy of JSON-like ``value`` with known secret values scrubbed from every string."""
        if self._compiled() is None:
            return value
        return copy_json(value, self.text)

    def learn_args(self, step_id: str, args: Any) -> None:
        """Remember the values of ``step_id``'s secret parameters in ``args`` (before a call)."""
        secrets = self.secret_params(step_id)
        if secrets and isinstance(args, dict):
            self.learn([args[k] for k in secrets if k in args])

    def args(self, step_id: str, args: Any) -> Any:
        """``args`` as recorded: secret parameters replaced, known values scrubbed.

        ``args`` is a step's resolved arguments, or a list of them for a ``for_each`` step.
        """
        if args is None:
            return None
        secrets = self.secret_params(step_id)
        step = self._steps.get(step_id)
        items = (
            args
            if (step is not None and step.for_each is not None and type(args) is list)
            else None
        )
        if secrets:
            for one in items if items is not None else [args]:
                if isinstance(one, dict):
                    self.learn([one[k] for k in secrets if k in one])
        if items is not None:
            return [self._one_args(secrets, a) for a in items]
        return self._one_args(secrets, args)

    def _one_args(self, secrets: frozenset[str], args: Any) -> Any:
        if isinstance(args, dict) and secrets:
            args = {k: (REDACTED if k in secrets else v) for k, v in args.items()}
        return self.scrub(args)

    def output(self, step_id: str, output: Any) -> Any:
        """A step's output as recorded: the parts that are secret replaced, the rest scrubbed."""
        paths = self._secret_paths.get(step_id)
        if paths:
            for path in paths:
                self.learn(_at(output, path))
            if () in paths:
                return REDACTED
            output = _replace_paths(output, paths)
        return self.scrub(output)

    def plan_data(self, data: Any) -> Any:
        """The plan document as stored: literal values of secret parameters replaced.

        A reference (``"${vault.key}"``) is not a secret and is kept, so that a run whose
        secrets come from a step's output can be resumed from its stored plan."""
        if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
            return self.scrub(data)
        steps = []
        for raw in data["steps"]:
            if isinstance(raw, dict) and isinstance(raw.get("args"), dict):
                secrets = self.secret_params(str(raw.get("id")))
                raw = {
                    **raw,
                    "args": {
                        k: REDACTED if k in secrets and not _is_template(v) else v
                        for k, v in raw["args"].items()
                    },
                }
            steps.append(raw)
        return self.scrub({**data, "steps": steps})

    def _compiled(self) -> re.Pattern[str] | None:
        pattern = self._pattern
        if pattern is not None or not self._known:
            return pattern
        with self._lock:
            long_enough = sorted(
                (k for k in self._known if len(k) >= MIN_SCRUB_LENGTH), key=len, reverse=True
            )
            if not long_enough:
                return None
            self._pattern = re.compile("|".join(map(re.escape, long_enough)))
            return self._pattern


# ---------------------------------------------------------------- logging


_LIVE: weakref.WeakSet[Redactor] = weakref.WeakSet()
_FILTER_LOCK = threading.Lock()


class SecretLogFilter(logging.Filter):
    """Scrubs the secret values known to any live run from records of the ``planrail`` logger
    (message, arguments and exception text). Installed once, by the first :class:`Redactor`."""

    def filter(self, record: logging.LogRecord) -> bool:
        redactors = list(_LIVE)
        if not any(r._compiled() is not None for r in redactors):
            return True
        message = record.getMessage()
        for r in redactors:
            message = r.text(message)
        record.msg, record.args = message, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            for r in redactors:
                record.exc_text = r.text(record.exc_text)
            record.exc_info = None
        if record.stack_info:
            for r in redactors:
                record.stack_info = r.text(record.stack_info)
        return True


def _install_log_filter() -> None:
    with _FILTER_LOCK:
        logger = logging.getLogger("planrail")
        if not any(isinstance(f, SecretLogFilter) for f in logger.filters):
            logger.addFilter(SecretLogFilter())


# ---------------------------------------------------------------- helpers


def _has_secrets(steps: Iterable[Step], registry: ToolRegistry) -> bool:
    """Whether a step calls a tool with secret parameters or a secret output."""
    checked: set[str] = set()  # each tool once: thousands of steps call the same few
    for step in steps:
        for name in step_tools(step):
            if name in checked:
                continue
            checked.add(name)
            spec = registry.spec(name)
            if spec is not None and (secret_params_of(spec) or spec.sensitivity == "secret"):
                return True
    return False


def _calls_of(step: Step) -> list[tuple[tuple[str, ...], str, Any]]:
    """``(where, tool, args)`` of the tool calls a step may make: its own, and its
    fallback's (``where``: the args' field in the step)."""
    calls: list[tuple[tuple[str, ...], str, Any]] = []
    if step.action == "tool_call" and step.tool:
        calls.append((("args",), step.tool, step.args))
    if step.fallback is not None and step.fallback.tool:
        calls.append((("fallback", "args"), step.fallback.tool, step.fallback.args))
    return calls


def _references(value: Any, parse: Parse) -> list[Reference]:
    refs: list[Reference] = []
    for _, text in iter_strings_with_dollar(value):
        try:
            refs.extend(parse(text).references)
        except ReferenceSyntaxError:
            continue
    return refs


def _literals(value: Any, parse: Parse) -> list[str]:
    """The literal text of a plan value (references left out)."""
    found: list[str] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            if "$" in v:
                try:
                    found.extend(p for p in parse(v).parts if isinstance(p, str))
                except ReferenceSyntaxError:
                    found.append(v)
            else:
                found.append(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
        elif type(v) is int or type(v) is float:
            found.append(str(v))
    return found


def _leaves(value: Any) -> list[str]:
    found: list[str] = []
    stack = [value]
    while stack:
        v = stack.pop()
        kind = type(v)
        if kind is str:
            found.append(v)
        elif kind is dict:
            stack.extend(v.values())
        elif kind is list or kind is tuple:
            stack.extend(v)
        elif kind is int or kind is float:
            found.append(str(v))
        elif isinstance(v, pydantic.SecretStr):
            found.append(v.get_secret_value())
    return found


def _at(value: Any, path: _Path) -> Any:
    for seg in path:
        if type(value) is dict:
            key = seg if type(seg) is str else str(seg)
            if key not in value:
                return None
            value = value[key]
        elif type(value) is list and type(seg) is int and seg < len(value):
            value = value[seg]
        else:
            return None
    return value


def _replace_paths(value: Any, paths: list[_Path]) -> Any:
    """A copy of ``value`` with the value at each path replaced by :data:`REDACTED`."""
    out = copy_json(value, lambda s: s)  # a copy, tuples made lists
    for path in paths:
        parent: Any = None
        cur = out
        key: Any = None
        for seg in path:
            parent, key = cur, seg
            if type(cur) is dict:
                k = seg if type(seg) is str else str(seg)
                if k not in cur:
                    parent = None
                    break
                key, cur = k, cur[k]
            elif type(cur) is list and type(seg) is int and seg < len(cur):
                cur = cur[seg]
            else:
                parent = None
                break
        if parent is not None:
            parent[key] = REDACTED
    return out


def _is_template(value: Any) -> bool:
    """Whether ``value`` is text holding a reference (its secret comes from another step)."""
    return isinstance(value, str) and "${" in value
