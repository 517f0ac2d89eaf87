"""The plan document: a goal, steps that declare what they depend on, and an output mapping.

The models are frozen: once a plan is validated (and approved), nothing can change it in place.
Shapes of the per-step policies live here as plain data; their behaviour is in
``planrail.policies`` and ``planrail.engine``.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cached_property
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from planrail._json import canonical_data, digest
from planrail.plan.refs import STR_ONLY

__all__ = [
    "ACTIONS",
    "JOIN_RULES",
    "STEP_ID_PATTERN",
    "Action",
    "Fallback",
    "JoinRule",
    "Plan",
    "Repeat",
    "RetrySpec",
    "Stage",
    "Step",
    "plain_step",
    "step_tools",
]

STEP_ID_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"

Action = Literal["tool_call", "llm_call", "condition_check"]
ACTIONS: tuple[str, ...] = ("tool_call", "llm_call", "condition_check")

ComputeKey = Literal["num_cpus", "num_gpus", "memory"]

JoinRule = Literal["all_succeeded", "all_finished", "any_succeeded"]
JOIN_RULES: tuple[str, ...] = ("all_succeeded", "all_finished", "any_succeeded")

_FROZEN = ConfigDict(extra="forbid", frozen=True)


class RetrySpec(BaseModel):
    """How a step retries (see ``docs/policies.md``)."""

    model_config = _FROZEN

    max_attempts: int = Field(default=1, ge=1, le=100)
    """Attempts in all, the first included (1 = no retry)."""
    initial_delay: float = Field(default=1.0, ge=0)
    """Seconds before the first retry."""
    backoff: float = Field(default=2.0, ge=1)
    """Each delay is the previous one times this."""
    max_delay: float = Field(default=60.0, ge=0)
    """No delay is longer than this (before jitter)."""
    jitter: float = Field(default=0.1, ge=0, le=1)
    """Each delay is multiplied by a random factor in ``[1 - jitter, 1 + jitter]``."""
    retry_on: tuple[str, ...] = ()
    """Extra exception type names to retry, besides the ones classified retryable."""


class Fallback(BaseModel):
    """What a step does when it fails for good: call another tool, or produce a static value."""

    model_config = _FROZEN

    tool: str | None = None
    args: dict[str, Any] = Field(default_factory=dict)
    value: Any = None

    @model_validator(mode="after")
    def _one_kind(self) -> Fallback:
        if self.tool is None and "value" not in self.model_fields_set:
            raise ValueError("a fallback needs either 'tool' (with 'args') or 'value'")
        if self.tool is not None and "value" in self.model_fields_set:
            raise ValueError("a fallback has 'tool' or 'value', not both")
        return self


class Repeat(BaseModel):
    """Run a step again until a predicate over its own output holds."""

    model_config = _FROZEN

    until: Any
    """A predicate (see ``docs/policies.md``); ``${self...}`` is the latest iteration's output."""
    max_iterations: int = Field(ge=1)
    """Required: a loop always ends. Capped by the run's limit."""


class Step(BaseModel):
    """One node of the plan."""

    model_config = _FROZEN

    id: str
    """Unique in the plan; ``^[A-Za-z_][A-Za-z0-9_]{0,63}$``."""
    action: Action = "tool_call"
    tool: str | None = None
    """The tool a ``tool_call`` step calls."""
    args: dict[str, Any] = Field(default_factory=dict)
    """The tool's arguments: JSON values, possibly holding ``${step.field}`` references."""
    depends_on: tuple[str, ...] = ()
    """Every step whose output this step references, plus pure ordering edges."""
    description: str | None = None
    prompt: str | None = None
    """For ``llm_call``: the prompt text, with references."""
    output_schema: dict[str, Any] | None = None
    """For ``llm_call``: JSON Schema of the answer; its fields become referenceable."""
    model: str | None = None
    """For ``llm_call``: the model, when not the run's default."""
    condition: Any = None
    """For ``condition_check``: the predicate to evaluate."""
    when: Any = None
    """A guard predicate: when false, the step is skipped with reason ``condition false``."""
    join: JoinRule = "all_succeeded"
    """How the step's dependencies must have finished for it to run."""
    retry: RetrySpec | None = None
    timeout: float | None = Field(default=None, gt=0)
    """Seconds per attempt."""
    total_timeout: float | None = Field(default=None, gt=0)
    """Seconds for all attempts together, backoff included."""
    fallback: Fallback | None = None
    for_each: str | None = None
    """A reference to a list: the step runs once per item (``${item}`` in args)."""
    max_parallel: int | None = Field(default=None, ge=1)
    """Most items of a ``for_each`` running at once."""
    repeat: Repeat | None = None
    resource: str | None = None
    """The upstream this step uses (overrides the tool's), for concurrency and rate limits."""
    requires_approval: bool | None = None
    estimated_duration: float | None = Field(default=None, ge=0)
    """Typical seconds, used to start the longest remaining path first."""
    compute: dict[ComputeKey, Annotated[float, Field(ge=0)]] | None = None
    """What one call of the step's tool needs where it runs (``num_cpus``, ``num_gpus``,
    ``memory`` in bytes), key by key over the tool's own ``compute``; used by runners that
    place calls on a cluster (Ray), ignored by the local runner."""
    remote_output: bool = False
    """Leave the output where it was produced (Ray's object store): the run records a handle
    (digest, size, preview) instead of the data. Ignored by runners that cannot (local)."""

    def model_post_init(self, context: Any, /) -> None:
        """Keep the step compactly: a plan may hold 100,000 of them (:func:`_compact`)."""
        _compact(self)

    @property
    def model_fields_set(self) -> set[str]:
        """The fields set explicitly when the step was built (a new set each time: steps with
        the same fields share one, which no caller can change)."""
        return set(self.__pydantic_fields_set__)


def _shared_keys_dict(names: Iterable[str]) -> dict[str, Any]:
    """A dict of ``names`` (all ``None``) whose copies share one table of keys.

    CPython keeps the attributes of a plain object in a "split" dict: the keys live once per
    class, each object holds only its values. ``dict.copy()`` of such a dict is split as well,
    so a step's fields cost 8 bytes each instead of a whole hash table per step (296 bytes
    against 832 for a step's 24 fields on CPython 3.11). Elsewhere it is an ordinary dict.
    """
    holder = type("_Fields", (), {})()
    for name in names:
        setattr(holder, name, None)
    values: dict[str, Any] = holder.__dict__
    return values


_STEP_FIELDS = _shared_keys_dict(Step.model_fields)
"""The template of every step's ``__dict__``."""

_FIELDS_SETS: dict[frozenset[str], set[str]] = {}
"""One ``__pydantic_fields_set__`` per distinct set of fields given (a plan's steps mostly
give the same few); bounded, so hostile plans cannot grow it without end."""
_MAX_FIELDS_SETS = 4096


def _compact(step: Step) -> None:
    """Give ``step`` the same fields in less memory: its ``__dict__`` a copy of the shared-keys
    template (same keys, same order, same values) and its fields set the one shared by every
    step that gave the same fields. Validation, ``model_dump``, equality and the hash read the
    same values as before."""
    values = _STEP_FIELDS.copy()
    values.update(step.__dict__)
    _setattr(step, "__dict__", values)
    shared = _shared_fields_set(step.__pydantic_fields_set__)
    if shared is not None:
        _setattr(step, "__pydantic_fields_set__", shared)


def _shared_fields_set(given: Iterable[str]) -> set[str] | None:
    """The one fields set of every step that gave the fields ``given`` (``None`` past the
    bound: the step keeps its own)."""
    key = frozenset(given)
    shared = _FIELDS_SETS.get(key)
    if shared is None:
        if len(_FIELDS_SETS) >= _MAX_FIELDS_SETS:
            return None
        shared = _FIELDS_SETS[key] = set(key)
    return shared


_setattr = object.__setattr__

_STEP_DEFAULTS = _STEP_FIELDS.copy()
_STEP_DEFAULTS.update(
    (name, info.default)
    for name, info in Step.model_fields.items()
    if not info.is_required() and info.default_factory is None
)
"""A step's ``__dict__`` before its given fields are set: the shared-keys template with every
field at its default (``args``, the one default made by a factory, is set per step)."""

_PLAIN_STEP_FIELDS = frozenset(
    {
        "id",
        "action",
        "tool",
        "args",
        "depends_on",
        "description",
        "prompt",
        "output_schema",
        "model",
    }
)
_OPTIONAL_TEXT = frozenset(("tool", "description", "prompt", "model"))
_ACTIONS = frozenset(ACTIONS)


def step_tools(step: Step) -> list[str]:
    """The tools ``step`` may call: its own (``""`` when a tool call names none), then its
    fallback's. What its effect (:mod:`planrail.plan.effects`) and its secrets are read from."""
    names = []
    if step.action == "tool_call":
        names.append(step.tool or "")
    if step.fallback is not None and step.fallback.tool is not None:
        names.append(step.fallback.tool)
    return names


def plain_step(raw: dict[str, Any]) -> Step | None:
    """The :class:`Step` ``Step.model_validate(raw)`` builds, built directly when ``raw`` gives
    only plain fields (id, action, tool, args, depends_on, description, prompt, output_schema,
    model) of the exact types pydantic passes through unchanged — the usual step of a big plan.
    ``None`` for anything else (another field, a subclass, a value pydantic would convert or
    refuse): pydantic then builds it, or says what is wrong. The step is the same as pydantic's,
    compacted the same way (``tests/plan/test_fast_paths.py`` compares them). The id's pattern
    is not checked here: the caller checks it (the shape pass reports ``invalid_id`` first)."""
    if not _PLAIN_STEP_FIELDS.issuperset(raw):
        return None
    values = _STEP_DEFAULTS.copy()
    for name, value in raw.items():
        kind = type(value)
        if name == "args" or name == "output_schema":
            if kind is not dict:
                if value is None and name == "output_schema":
                    continue
                return None
            if not STR_ONLY.issuperset(map(type, value)):
                return None
            value = value.copy()  # pydantic's dict[str, Any]: a new dict, the same values
        elif name == "depends_on":
            if kind is not list and kind is not tuple:
                return None
            value = tuple(value)
            if not STR_ONLY.issuperset(map(type, value)):
                return None
        elif kind is not str:
            if value is not None or name not in _OPTIONAL_TEXT:
                return None
        elif name == "action" and value not in _ACTIONS:
            return None
        values[name] = value
    if type(raw.get("id")) is not str:
        return None
    if "args" not in raw:
        values["args"] = {}
    step: Step = _new(Step)
    _setattr(step, "__dict__", values)
    shared = _shared_fields_set(raw)
    _setattr(step, "__pydantic_fields_set__", set(raw) if shared is None else shared)
    _setattr(step, "__pydantic_extra__", None)
    _setattr(step, "__pydantic_private__", None)
    return step


_new = object.__new__


class Stage(BaseModel):
    """A named group of steps with the sub-goal they must reach (see ``docs/plan-format.md``)."""

    model_config = _FROZEN

    id: str = Field(pattern=STEP_ID_PATTERN)
    """Unique among the plan's stages."""
    goal: str = Field(min_length=1)
    """The stage's sub-goal: shown under the goal anchor to this stage's ``llm_call`` steps."""
    steps: tuple[str, ...] = ()
    """The ids of the steps the stage holds; a step is in at most one stage."""
    confirm: bool = False
    """Start the stage with a model's check that the finished stages reached their sub-goals."""


class Plan(BaseModel):
    """A validated plan. Build one with :func:`planrail.load_plan` or :func:`planrail.validate`."""

    model_config = _FROZEN

    goal: str = ""
    """The goal anchor, shown first to every LLM step."""
    steps: tuple[Step, ...]
    output: Any = None
    """What the run returns: JSON with references into the steps' outputs."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    stages: tuple[Stage, ...] = ()
    """Optional stages, in the order they are reached (``planrail.plan.stages``)."""

    @cached_property
    def by_id(self) -> dict[str, Step]:
        return {s.id: s for s in self.steps}

    def step(self, step_id: str) -> Step:
        return self.by_id[step_id]

    def to_json_data(self) -> dict[str, Any]:
        """The plan as plain JSON data, without fields left at their defaults."""
        return self.model_dump(mode="json", exclude_defaults=True)

    def canonical_json(self) -> str:
        """A byte-stable JSON text of the plan: sorted keys, no spaces, defaults omitted."""
        return canonical_data(self.to_json_data())

    @cached_property
    def hash(self) -> str:
        """``sha256:`` + the hex digest of :meth:`canonical_json`; what an approval is bound to.

        Computed once; :meth:`fresh_hash` recomputes it from the plan's content as it is now."""
        return self.fresh_hash()

    def fresh_hash(self) -> str:
        """The hash of the plan as it is now. Steps are frozen, but their ``args`` dicts are not:
        the gate compares this, not the cached :attr:`hash`, with the approval.

        The first hash computed is the one :attr:`hash` keeps (serialising a big plan costs tens
        of µs per step: an approval and the run's record share one)."""
        return self.dump()[0]

    def dump(self) -> tuple[str, dict[str, Any]]:
        """The plan as it is now: its hash (:meth:`fresh_hash`) and the JSON data it is the hash
        of (:meth:`to_json_data`), from one serialisation — what a run's stored record holds."""
        data = self.to_json_data()
        hashed = digest(canonical_data(data))
        self.__dict__.setdefault("hash", hashed)
        return hashed, data
