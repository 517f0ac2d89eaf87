"""Tools: what a tool declares about itself, the tool seam and the registry
(``@planrail.tool``, which makes a :class:`Tool` of a Python function, is
:mod:`planrail.plan.define`).

Two seams meet here (``docs/architecture.md``):

- the **tool protocol** (:class:`ToolProtocol`): anything with a :class:`ToolSpec` and an async
  ``invoke(args, ctx)`` is a tool. Decorated Python functions (:class:`Tool`) are one
  implementation; MCP tools (``planrail.integrations.mcp``) another; a bare :class:`ToolSpec`
  serves validation only.
- the **tool runner** (:class:`ToolRunner`): *where* a Python tool's function runs. The
  executor is given one (default: the event loop for async tools, a thread pool for sync ones,
  :class:`planrail.engine.runners.LocalRunner`); Ray is another
  (``planrail.backends.ray.RayRunner``). Every call of a :class:`Tool` goes through it.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import functools
import inspect
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

import pydantic
import pydantic_core

from planrail.errors import ArgumentError, OutputError, UnknownToolError
from planrail.plan.strict_json import odd_value

__all__ = [
    "Sensitivity",
    "SideEffects",
    "StepContext",
    "Tool",
    "ToolProtocol",
    "ToolRegistry",
    "ToolRunner",
    "ToolSpec",
]

SideEffects = Literal["none", "idempotent", "keyed", "unsafe"]
"""What calling a tool does to the world.

- ``none``: read-only; safe to run again and before approval.
- ``idempotent``: changes the world, but running it twice with the same arguments is the same
  as running it once.
- ``keyed``: changes the world and honours the idempotency key it is given (``StepContext``).
- ``unsafe``: changes the world and may do so twice (the conservative default).
"""

Isolation = Literal["thread", "process"]
"""Where the local runner runs a sync tool's calls (see :func:`tool`)."""

Sensitivity = Literal["public", "private", "secret"]
"""How sensitive a tool's *output* is (see ``docs/security.md``).

- ``public``: nothing special (the default).
- ``private``: personal or confidential data; security rules can match it as ``private``.
- ``secret``: credentials; the whole output is redacted wherever planrail writes it.
"""


def step_key(run_id: str, step_id: str) -> str:
    """A step's idempotency key, ``RUN_ID:STEP``: the one place it is made (the executor's calls,
    the checkpoint's records, traces and spans all read it from here). An item's
    (``RUN_ID:STEP:i``) and a fallback call's (``…:fallback``) build on it."""
    return f"{run_id}:{step_id}"


@dataclass(frozen=True, slots=True)
class StepContext:
    """What a running step knows about itself; declare a parameter of this type to receive it."""

    run_id: str
    """The run this step belongs to."""
    step_id: str
    """The step's id in the plan."""
    attempt: int
    """1 for the first attempt, 2 for the first retry, and so on."""
    idempotency_key: str
    """``run_id:step_id`` (:func:`step_key`; plus ``:item`` inside a fan-out); the same across
    retries and resumes."""
    item: int | None = None
    """The item's index when the step runs once per item (``for_each``)."""
    history: tuple[Mapping[str, Any], ...] = ()
    """Earlier iterations of a ``repeat`` step: their inputs, outputs and errors."""


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """What planrail knows about a tool without running it (all a catalog entry can give)."""

    name: str
    description: str = ""
    input_schema: dict[str, Any] = field(default_factory=lambda: {"type": "object"})
    output_schema: dict[str, Any] | None = None
    """``None`` when the output's shape is unknown: field references into it are not checked."""
    side_effects: SideEffects = "unsafe"
    retry: Mapping[str, Any] | None = None
    """Default retry policy for steps calling this tool (the step may override it)."""
    timeout: float | None = None
    """Default per-attempt timeout in seconds."""
    resource: str | None = None
    """The upstream this tool uses, for per-resource concurrency and rate limits."""
    requires_approval: bool | None = None
    """Force (True) or waive (False) approval; ``None`` decides from ``side_effects``."""
    secret_params: frozenset[str] = frozenset()
    """Parameters whose values are never written in clear to stores, traces or logs."""
    estimated_duration: float | None = None
    """Typical seconds per call, used to put the longest remaining path first."""
    sensitivity: Sensitivity = "public"
    """How sensitive the tool's output is, for security policies and redaction."""
    trusted: bool = False
    """The tool's output is trustworthy (the user's own contacts, the clock, the account's own
    IBAN): security policies treat values read from it like the user's (declared once, here or
    as ``x-planrail.trusted`` in a catalog; one field: ``x-planrail-trusted`` in the output
    schema)."""
    compute: Mapping[str, float] | None = None
    """What one call needs where it runs (``num_cpus``, ``num_gpus``, ``memory`` in bytes), for
    runners that place calls on a cluster (Ray); a step's ``compute`` overrides it."""
    overlapping_retries: bool = False
    """A retry may start while an earlier attempt's call still runs (a timed-out sync call that
    could not be stopped): the tool promises that two calls with one idempotency key at once
    are safe. Ignored for ``unsafe`` tools (:mod:`planrail.plan.effects` decides)."""

    def to_catalog_entry(self) -> dict[str, Any]:
        """This tool in MCP catalog form (``name``, ``description``, ``inputSchema``, ...)."""
        entry: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "inputSchema": self.input_schema,
        }
        if self.output_schema is not None:
            entry["outputSchema"] = self.output_schema
        entry["x-planrail"] = {"side_effects": self.side_effects}
        if self.trusted:
            entry["x-planrail"]["trusted"] = True
        return entry


@runtime_checkable
class ToolProtocol(Protocol):
    """The tool seam: what the executor needs of a tool it calls.

    ``invoke`` performs *one attempt* and returns plain JSON data; it raises
    :class:`~planrail.ArgumentError` for arguments that do not fit ``spec.input_schema``,
    :class:`~planrail.OutputError` for an output that does not fit ``spec.output_schema``,
    :class:`~planrail.RetryableError` for a transient failure, anything else for a permanent
    one. Retries, timeouts (by cancelling the awaitable), limits and checkpoints are the
    executor's, never the tool's.
    """

    @property
    def name(self) -> str: ...

    @property
    def spec(self) -> ToolSpec: ...

    def invoke(self, args: Mapping[str, Any], ctx: StepContext) -> Awaitable[Any]: ...


class ToolRunner(Protocol):
    """The tool-runner seam: where the function of a Python :class:`Tool` runs.

    ``call`` starts ``tool.fn(**kwargs)`` (arguments already validated, the step context
    already among them) and returns an awaitable of its *raw* return value; cancelling the
    awaitable must stop or abandon the call. ``prepare`` is awaited once per run before the
    first step with the Python tools the plan uses (a runner refuses tools it cannot run there,
    with :class:`~planrail.errors.ToolError`); ``aclose`` when the run is over.
    """

    async def prepare(self, tools: Sequence[Tool]) -> None: ...

    def call(self, tool: Tool, kwargs: dict[str, Any]) -> Awaitable[Any]: ...

    async def aclose(self) -> None: ...


class Tool:
    """A Python function planrail can call as a step; still callable as the plain function.

    One implementation of :class:`ToolProtocol`: :meth:`invoke` validates, calls the function
    through a :class:`ToolRunner` and converts the return value to plain JSON.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        spec: ToolSpec,
        context_param: str | None,
        input_model: type[pydantic.BaseModel],
        output_adapter: pydantic.TypeAdapter[Any] | None,
        scalar: type | None = None,
    ) -> None:
        self.fn = fn
        self.spec = spec
        self.name = spec.name
        self.is_async = inspect.iscoroutinefunction(fn)
        self.context_param = context_param
        self._input_model = input_model
        self._output_adapter = output_adapter
        self._scalar: type | None = scalar
        """A return type whose values are already plain JSON: no conversion needed."""
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn
        self.isolation: Isolation = "thread"
        """Where a sync call runs on the local runner: a thread, or a worker process it kills
        on timeout or cancel (``@tool(isolation="process")``)."""
        self.remote_output = False
        """Set on a step's copy (:meth:`placed`): the runner keeps the output, returns a handle."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<planrail.Tool {self.name!r}>"

    def placed(
        self, compute: Mapping[Any, float] | None = None, *, remote_output: bool = False
    ) -> Tool:
        """This tool as one step runs it: ``compute`` overriding, key by key, what the tool
        declares; with ``remote_output`` its output stays where it was produced (the runner
        checks it against the return type there and returns a handle, passed through as is)."""
        placed = copy.copy(self)
        if compute is not None:
            merged = {**(self.spec.compute or {}), **compute}
            placed.spec = dataclasses.replace(self.spec, compute=merged)
        if remote_output:
            placed.remote_output = True
            placed._output_adapter = placed._scalar = None
        return placed

    def validate_args(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Check ``args`` against the input schema; return the keyword arguments to call with.

        Raises ``pydantic.ValidationError`` when they do not fit.
        """
        model = self._input_model.__pydantic_validator__.validate_python(args)
        return dict(model.__dict__)

    def dump_output(self, value: Any) -> Any:
        """The tool's return value as plain JSON data, checked against the return annotation."""
        if self._scalar is not None and type(value) is self._scalar:
            return value
        if self._output_adapter is not None:
            value = self._output_adapter.validate_python(value)
            return self._output_adapter.dump_python(value, mode="json")
        return pydantic_core.to_jsonable_python(value)

    def call_kwargs(self, args: Mapping[str, Any], ctx: StepContext | None) -> dict[str, Any]:
        """The keyword arguments to call the function with; :class:`ArgumentError` if ``args``
        do not fit the input schema."""
        try:
            kwargs = self.validate_args(args)
        except pydantic.ValidationError as exc:
            raise ArgumentError(
                f"arguments for tool '{self.name}' do not fit its input schema: {_brief(exc)}"
            ) from exc
        if self.context_param is not None:
            kwargs[self.context_param] = ctx
        return kwargs

    def output(self, value: Any) -> Any:
        """The return value as plain JSON data; :class:`OutputError` if it does not fit, or if
        it holds what strict JSON cannot (NaN, bytes, a cycle, ...: :mod:`.strict_json`)."""
        scalar = self._scalar  # str (ASCII: no lone surrogate to look for), int or bool
        plain = scalar is not None and type(value) is scalar
        if plain and (not isinstance(value, str) or value.isascii()):
            return value
        odd = odd_value(value)
        if odd is not None:
            raise OutputError(f"tool '{self.name}' returned a value that is not strict JSON: {odd}")
        try:
            return self.dump_output(value)
        except (pydantic.ValidationError, pydantic_core.PydanticSerializationError) as exc:
            raise OutputError(
                f"tool '{self.name}' returned a value that does not fit its return type: "
                f"{_brief(exc)}"
            ) from exc

    async def invoke(
        self, args: Mapping[str, Any], ctx: StepContext, runner: ToolRunner | None = None
    ) -> Any:
        """One call (see :class:`ToolProtocol`): through ``runner``, or here (sync functions in
        a worker thread) when none is given."""
        kwargs = self.call_kwargs(args, ctx)
        if runner is not None:
            return self.output(await runner.call(self, kwargs))
        if self.is_async:
            return self.output(await self.fn(**kwargs))
        return self.output(await asyncio.to_thread(functools.partial(self.fn, **kwargs)))


AnyTool = Tool | ToolSpec | ToolProtocol
"""What a registry holds: callable tools (any :class:`ToolProtocol`) and catalog-only specs."""


class ToolRegistry:
    """Tools by name: callable tools (:class:`Tool` and any other :class:`ToolProtocol`) and
    catalog-only :class:`ToolSpec` s."""

    def __init__(self, tools: Iterable[AnyTool] = ()) -> None:
        self._specs: dict[str, ToolSpec] = {}
        self._tools: dict[str, ToolProtocol] = {}
        for t in tools:
            self.add(t)

    @classmethod
    def of(cls, tools: ToolRegistry | Iterable[AnyTool] | None) -> ToolRegistry:
        """A registry from a registry, an iterable of tools/specs, or nothing."""
        if isinstance(tools, ToolRegistry):
            return tools
        if tools is not None and not isinstance(tools, Iterable):
            if isinstance(tools, Tool | ToolSpec | ToolProtocol):
                raise TypeError(f"tools is a list of tools: pass [{tools.name}], not the tool")
            raise TypeError(
                "tools must be a ToolRegistry or an iterable of tools (functions decorated with"
                f" @planrail.tool, ToolSpecs), not {tools!r}"
            )
        return cls(tools or ())

    def add(self, t: AnyTool) -> None:
        """Register a tool; a second tool of the same name replaces the first."""
        if isinstance(t, ToolSpec):
            self._specs[t.name] = t
            self._tools.pop(t.name, None)
        elif isinstance(t, Tool | ToolProtocol):
            self._tools[t.name] = t
            self._specs[t.name] = t.spec
        else:
            raise TypeError(f"not a planrail tool: {t!r} (decorate it with @planrail.tool)")

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __iter__(self) -> Iterator[ToolSpec]:
        return iter(self._specs.values())

    def __len__(self) -> int:
        return len(self._specs)

    def spec(self, name: str) -> ToolSpec | None:
        return self._specs.get(name)

    def find(self, name: str) -> ToolProtocol | None:
        """The callable tool called ``name``, or None."""
        return self._tools.get(name)

    def python_tools(self) -> list[Tool]:
        """The decorated Python functions among the tools (what a :class:`ToolRunner` runs)."""
        return [t for t in self._tools.values() if isinstance(t, Tool)]

    def executable(self, name: str) -> ToolProtocol:
        """The callable tool called ``name``; :class:`UnknownToolError` if there is none."""
        try:
            return self._tools[name]
        except KeyError:
            hint = " (it is only in a catalog, with no code to run)" if name in self._specs else ""
            raise UnknownToolError(f"no executable tool named {name!r}{hint}") from None

    def names(self) -> list[str]:
        return sorted(self._specs)


def _brief(exc: Exception) -> str:
    if isinstance(exc, pydantic.ValidationError):
        parts = []
        for err in exc.errors(include_url=False)[:5]:
            loc = ".".join(str(p) for p in err["loc"]) or "(input)"
            parts.append(f"{loc}: {err['msg']}")
        return "; ".join(parts)
    return str(exc)
