"""``@planrail.tool``: how a Python function becomes a :class:`~planrail.plan.tools.Tool`.

Its input schema comes from its signature and its output schema from its return annotation,
both through Pydantic; a parameter annotated :class:`~planrail.plan.tools.StepContext` receives
the step's context and is not part of the input schema. What a tool declares about itself (side
effects, retry, timeout, resource, compute, ...) is checked here, where it is given.
"""

from __future__ import annotations

import inspect
import math
import sys
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any, overload

import pydantic
import typing_extensions

from planrail.errors import ToolDefinitionError
from planrail.plan.secrets import is_secret_type
from planrail.plan.tools import Isolation, Sensitivity, SideEffects, StepContext, Tool, ToolSpec

__all__ = ["COMPUTE_KEYS", "check_compute", "tool"]


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    side_effects: SideEffects = "unsafe",
    retry: Mapping[str, Any] | None = None,
    timeout: float | None = None,
    resource: str | None = None,
    requires_approval: bool | None = None,
    secret_params: Iterable[str] = (),
    estimated_duration: float | None = None,
    sensitivity: Sensitivity = "public",
    compute: Mapping[str, float] | None = None,
    trusted: bool = False,
    isolation: Isolation = "thread",
    overlapping_retries: bool = False,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    side_effects: SideEffects = "unsafe",
    retry: Mapping[str, Any] | None = None,
    timeout: float | None = None,
    resource: str | None = None,
    requires_approval: bool | None = None,
    secret_params: Iterable[str] = (),
    estimated_duration: float | None = None,
    sensitivity: Sensitivity = "public",
    compute: Mapping[str, float] | None = None,
    trusted: bool = False,
    isolation: Isolation = "thread",
    overlapping_retries: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a sync or async function a planrail tool.

    Use it bare (``@tool``) or with options (``@tool(side_effects="none")``).
    ``isolation="process"`` runs each call of a sync tool in a worker process that the local
    runner kills on timeout or cancellation (``docs/execution.md``); the function must be
    importable at module level (or defined in a ``--tools`` file).
    ``overlapping_retries=True`` (keyed or idempotent tools only) lets a retry start while a
    timed-out call of the tool still runs in its thread; by default no retry overlaps it.
    """
    if isolation not in typing.get_args(Isolation):
        raise ToolDefinitionError(
            f"isolation must be one of {typing.get_args(Isolation)}, got {isolation!r}"
        )

    def wrap(f: Callable[..., Any]) -> Tool:
        if isolation == "process" and inspect.iscoroutinefunction(f):
            raise ToolDefinitionError(
                f"isolation='process' is for sync functions; {f.__name__} is async (cancelling"
                " an async tool already stops it)"
            )
        built = _build_tool(
            f,
            name=name,
            description=description,
            side_effects=side_effects,
            retry=retry,
            timeout=timeout,
            resource=resource,
            requires_approval=requires_approval,
            secret_params=frozenset(secret_params),
            estimated_duration=estimated_duration,
            sensitivity=sensitivity,
            compute=compute,
            trusted=trusted,
            overlapping_retries=overlapping_retries,
        )
        built.isolation = isolation
        return built

    return wrap(fn) if fn is not None else wrap


def _build_tool(
    f: Callable[..., Any],
    *,
    name: str | None,
    description: str | None,
    side_effects: SideEffects,
    retry: Mapping[str, Any] | None,
    timeout: float | None,
    resource: str | None,
    requires_approval: bool | None,
    secret_params: frozenset[str],
    estimated_duration: float | None,
    sensitivity: Sensitivity = "public",
    compute: Mapping[str, float] | None = None,
    trusted: bool = False,
    overlapping_retries: bool = False,
) -> Tool:
    if not callable(f):
        raise ToolDefinitionError(f"@tool needs a function, got {f!r}")
    if side_effects not in typing.get_args(SideEffects):
        raise ToolDefinitionError(
            f"side_effects must be one of {typing.get_args(SideEffects)}, got {side_effects!r}"
        )
    if timeout is not None and not _number(timeout) > 0:
        raise ToolDefinitionError(f"timeout must be > 0 seconds, got {timeout!r}")
    if estimated_duration is not None and not _number(estimated_duration) >= 0:
        raise ToolDefinitionError(
            f"estimated_duration must be >= 0 seconds, got {estimated_duration!r}"
        )
    if inspect.isasyncgenfunction(f):
        raise ToolDefinitionError(
            f"@tool needs a function that returns its output; {f!r} is an async generator"
        )
    if overlapping_retries and side_effects == "unsafe":
        raise ToolDefinitionError(
            "overlapping_retries is for tools that honour idempotency keys (keyed, idempotent"
            " or none): two calls of an unsafe tool at once may both take effect"
        )
    if sensitivity not in typing.get_args(Sensitivity):
        raise ToolDefinitionError(
            f"sensitivity must be one of {typing.get_args(Sensitivity)}, got {sensitivity!r}"
        )
    tool_name = name or getattr(f, "__name__", None)
    if not tool_name:
        raise ToolDefinitionError(f"cannot name tool {f!r}; pass name=...")
    try:
        compute = check_compute(compute)
    except ValueError as exc:
        raise ToolDefinitionError(f"tool {tool_name!r}: {exc}") from exc
    try:
        hints = {
            k: _compatible(v) for k, v in typing.get_type_hints(f, include_extras=True).items()
        }
    except Exception as exc:  # unresolvable forward references
        raise ToolDefinitionError(
            f"tool {tool_name!r}: cannot read its annotations: {exc}"
        ) from exc
    sig = inspect.signature(f)
    fields: dict[str, Any] = {}
    context_param: str | None = None
    for pname, param in sig.parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolDefinitionError(
                f"tool {tool_name!r}: *args/**kwargs cannot be described; name each parameter"
            )
        if param.kind is param.POSITIONAL_ONLY:
            raise ToolDefinitionError(f"tool {tool_name!r}: positional-only parameter {pname!r}")
        annotation = hints.get(pname, Any)
        if _is_context_annotation(annotation, tool_name, pname):
            if context_param is not None:
                raise ToolDefinitionError(
                    f"tool {tool_name!r}: two StepContext parameters ({context_param!r} and"
                    f" {pname!r}); declare at most one"
                )
            context_param = pname
            continue
        default = ... if param.default is param.empty else param.default
        fields[pname] = (annotation, default)
    # a parameter annotated planrail.Secret / pydantic.SecretStr is a secret without saying so
    secret_params = secret_params | {p for p, (ann, _) in fields.items() if is_secret_type(ann)}
    unknown_secrets = secret_params - set(fields)
    if unknown_secrets:
        raise ToolDefinitionError(
            f"tool {tool_name!r}: secret_params names unknown parameters {sorted(unknown_secrets)}"
        )
    try:
        model = pydantic.create_model(
            f"{_camel(tool_name)}Input",
            __config__=pydantic.ConfigDict(extra="forbid", arbitrary_types_allowed=False),
            **fields,
        )
        input_schema = model.model_json_schema()
    except (pydantic.PydanticUserError, pydantic.PydanticSchemaGenerationError, TypeError) as exc:
        raise ToolDefinitionError(
            f"tool {tool_name!r}: cannot build its input schema: {exc}"
        ) from exc
    input_schema.pop("title", None)
    output_schema: dict[str, Any] | None = None
    adapter: pydantic.TypeAdapter[Any] | None = None
    if "return" in hints:
        try:
            adapter = pydantic.TypeAdapter(hints["return"])
            output_schema = adapter.json_schema(mode="serialization")
        except (pydantic.PydanticUserError, pydantic.PydanticSchemaGenerationError) as exc:
            raise ToolDefinitionError(
                f"tool {tool_name!r}: cannot build an output schema from its return type: {exc}"
            ) from exc
    doc = description if description is not None else inspect.getdoc(f) or ""
    spec = ToolSpec(
        name=tool_name,
        description=doc.strip().split("\n\n")[0].strip(),
        input_schema=input_schema,
        output_schema=output_schema,
        side_effects=side_effects,
        retry=dict(retry) if retry is not None else None,
        timeout=timeout,
        resource=resource,
        requires_approval=requires_approval,
        secret_params=secret_params,
        estimated_duration=estimated_duration,
        sensitivity=sensitivity,
        compute=compute,
        trusted=bool(trusted),
        overlapping_retries=bool(overlapping_retries),
    )
    ret = hints.get("return")
    scalar = ret if ret in (str, int, bool) else None
    return Tool(f, spec, context_param, model, adapter, scalar)


def _is_context_annotation(annotation: Any, tool_name: str, pname: str) -> bool:
    """Whether ``annotation`` declares the step-context parameter: ``StepContext``, optionally
    wrapped in ``Annotated[...]`` and/or ``Optional[...]`` (``StepContext | None``).

    ``StepContext`` anywhere else in the annotation (in a union with another type, inside
    ``list[...]``) is refused: it would make the context, or part of it, a plan argument
    that a plan could forge (its idempotency key).
    """
    if not _mentions_context(annotation):
        return False
    core = annotation
    while True:
        origin = typing.get_origin(core)
        if origin is typing.Annotated:
            core = typing.get_args(core)[0]
        elif origin is typing.Union or origin is types.UnionType:
            members = [a for a in typing.get_args(core) if a is not type(None)]
            if len(members) != 1:
                break
            core = members[0]
        else:
            break
    if core is StepContext:
        return True
    raise ToolDefinitionError(
        f"tool {tool_name!r}: parameter {pname!r} mixes StepContext with other types"
        f" ({annotation!r}); annotate the context parameter StepContext or"
        " StepContext | None"
    )


def _mentions_context(annotation: Any) -> bool:
    if annotation is StepContext:
        return True
    return any(_mentions_context(a) for a in typing.get_args(annotation))


COMPUTE_KEYS = ("num_cpus", "num_gpus", "memory")
"""What a tool or a step may declare in ``compute``."""


def _number(value: Any) -> float:
    """``value`` when it is an int or float (not a bool), else NaN: a comparison with the
    result holds only for a number in range (NaN is in no range)."""
    return value if type(value) in (int, float) else math.nan


def check_compute(compute: Mapping[str, Any] | None) -> dict[str, float] | None:
    """``compute`` as a plain dict of non-negative numbers; ``ValueError`` saying what is wrong."""
    if compute is None:
        return None
    out: dict[str, float] = {}
    for key, value in compute.items():
        if key not in COMPUTE_KEYS:
            raise ValueError(f"compute: unknown key {key!r} (known: {', '.join(COMPUTE_KEYS)})")
        if not _number(value) >= 0:
            raise ValueError(f"compute: {key} must be a number >= 0, got {value!r}")
        out[key] = value
    return out


def _compatible(tp: Any) -> Any:
    """``tp`` with every ``typing.TypedDict`` replaced by an equal ``typing_extensions`` one.

    Before Python 3.12 Pydantic only accepts ``typing_extensions.TypedDict``; users write
    ``typing.TypedDict``, so the conversion happens here (recursively, through generics).
    """
    if sys.version_info >= (3, 12):
        return tp
    if typing.is_typeddict(tp) and not _is_te_typeddict(tp):
        fields = {
            k: _compatible(v) for k, v in typing.get_type_hints(tp, include_extras=True).items()
        }
        required = getattr(tp, "__required_keys__", frozenset(fields))
        annotated = {
            k: v if k in required else typing_extensions.NotRequired[v] for k, v in fields.items()
        }
        return typing_extensions.TypedDict(tp.__name__, annotated)  # type: ignore[operator]
    args = typing.get_args(tp)
    origin = typing.get_origin(tp)
    if args and origin is not None and origin is not typing.Literal:
        new = tuple(_compatible(a) for a in args)
        if new != args:
            if origin is typing.Annotated:
                return typing.Annotated[new]
            try:
                return tp.copy_with(new)
            except AttributeError:  # PEP 585 generics such as list[...]
                return origin[new] if len(new) > 1 else origin[new[0]]
    return tp


_TE_TYPEDDICT_META = type(typing_extensions.TypedDict("_Probe", {}))  # type: ignore[operator]


_TE_TYPEDDICT_META = type(typing_extensions.TypedDict("_Probe", {}))  # type: ignore[operator]


def _is_te_typeddict(tp: Any) -> bool:
    return type(tp) is _TE_TYPEDDICT_META


def _camel(name: str) -> str:
    parts = [p for p in "".join(c if c.isalnum() else " " for c in name).split() if p]
    return "".join(p[:1].upper() + p[1:] for p in parts) or "Tool"
