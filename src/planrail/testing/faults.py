"""Fault-injecting tools: fail ``k`` times, fail with a given error, hang, run slowly — and record
every call (time, arguments, attempt, item, idempotency key) and the most calls seen at once.

Each is a real :class:`planrail.Tool` (async, accepting any arguments), so it goes through the
same validation, retries, timeouts and resource limits as production tools::

    flaky = fail_times("search", 2, RetryableError("busy", retry_after=3), value={"hits": 1})
    slowpoke = slow("fetch", seconds=5.0)
    stuck = hang("stuck")

A tool's behaviour is a *script*: one entry per call, the last one repeated. An entry is a value
to return, an exception (instance or class) to raise, :class:`Hang`, :class:`Slow`, or
:data:`ECHO` (return the arguments).
"""

from __future__ import annotations

import asyncio
import copy
import itertools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pydantic

from planrail.clock import SYSTEM_CLOCK
from planrail.errors import RetryableError
from planrail.plan.tools import SideEffects, StepContext, Tool, ToolSpec
from planrail.types import Clock

__all__ = [
    "ECHO",
    "CallRecord",
    "FaultTool",
    "Hang",
    "Slow",
    "always_fail",
    "fail_times",
    "hang",
    "http_error",
    "probe",
    "slow",
]

ECHO: Any = object()
"""Script entry: return the call's arguments (a dict)."""


@dataclass(frozen=True, slots=True)
class Hang:
    """Script entry: never return (until cancelled — by a timeout, say)."""


@dataclass(frozen=True, slots=True)
class Slow:
    """Script entry: take ``seconds`` of clock time, then return ``value`` (or raise it)."""

    seconds: float
    value: Any = ECHO


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One call of a fault tool."""

    started_at: float
    """``clock.monotonic()`` when the call began."""
    args: dict[str, Any]
    attempt: int | None
    item: int | None
    idempotency_key: str | None
    history: tuple[Mapping[str, Any], ...] = ()


class _AnyArgs(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")


_CTX = "planrail_ctx"


class FaultTool(Tool):
    """An async tool that follows a script and records its calls."""

    def __init__(
        self,
        name: str,
        script: Iterable[Any] = (ECHO,),
        *,
        clock: Clock = SYSTEM_CLOCK,
        output_schema: dict[str, Any] | None = None,
        side_effects: SideEffects = "none",
        resource: str | None = None,
        timeout: float | None = None,
        retry: Mapping[str, Any] | None = None,
        estimated_duration: float | None = None,
    ) -> None:
        self.script = list(script)
        if not self.script:
            raise ValueError("a fault tool needs at least one script entry")
        self.clock = clock
        self.calls: list[CallRecord] = []
        self.active = 0
        """Calls in progress right now."""
        self.max_active = 0
        """The most calls that were ever in progress at once."""
        self.finished: list[float] = []
        """``clock.monotonic()`` at the end of each call that returned or raised."""
        spec = ToolSpec(
            name=name,
            description=f"fault-injecting test tool {name!r}",
            output_schema=output_schema,
            side_effects=side_effects,
            resource=resource,
            timeout=timeout,
            retry=dict(retry) if retry is not None else None,
            estimated_duration=estimated_duration,
        )
        super().__init__(self._invoke, spec, _CTX, _AnyArgs, None)
        self.is_async = True

    @property
    def call_count(self) -> int:
        return len(self.calls)

    @property
    def call_times(self) -> list[float]:
        """When each call started (``clock.monotonic()``)."""
        return [c.started_at for c in self.calls]

    def gaps(self) -> list[float]:
        """Seconds between the starts of consecutive calls."""
        times = self.call_times
        return [b - a for a, b in itertools.pairwise(times)]

    def validate_args(self, args: Mapping[str, Any]) -> dict[str, Any]:
        if not isinstance(args, Mapping):
            raise TypeError(f"arguments must be an object, got {type(args).__name__}")
        return dict(args)

    async def _invoke(self, **kwargs: Any) -> Any:
        ctx: StepContext | None = kwargs.pop(_CTX, None)
        entry = self.script[min(len(self.calls), len(self.script) - 1)]
        self.calls.append(
            CallRecord(
                self.clock.monotonic(),
                kwargs,
                ctx.attempt if ctx else None,
                ctx.item if ctx else None,
                ctx.idempotency_key if ctx else None,
                ctx.history if ctx else (),
            )
        )
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            if isinstance(entry, Hang):
                await asyncio.Event().wait()
            if isinstance(entry, Slow):
                await self.clock.sleep(entry.seconds)
                entry = entry.value
            return _perform(entry, kwargs)
        finally:
            self.active -= 1
            self.finished.append(self.clock.monotonic())


def _perform(entry: Any, args: dict[str, Any]) -> Any:
    if isinstance(entry, type) and issubclass(entry, BaseException):
        raise entry()
    if isinstance(entry, BaseException):
        raise copy.copy(entry)
    if entry is ECHO:
        return dict(args)
    if callable(entry):
        return entry(args)
    return copy.deepcopy(entry)


def fail_times(
    name: str, k: int, error: Any = None, *, value: Any = ECHO, **options: Any
) -> FaultTool:
    """Fails the first ``k`` calls with ``error`` (default: a ``RetryableError``), then returns
    ``value``."""
    err = error if error is not None else RetryableError("injected transient failure")
    return FaultTool(name, [*([err] * k), value], **options)


def always_fail(name: str, error: Any, **options: Any) -> FaultTool:
    """Fails every call with ``error``."""
    return FaultTool(name, [error], **options)


def hang(name: str, **options: Any) -> FaultTool:
    """Never returns; only a timeout (or cancellation) ends a call."""
    return FaultTool(name, [Hang()], **options)


def slow(name: str, seconds: float, value: Any = ECHO, **options: Any) -> FaultTool:
    """Takes ``seconds`` of clock time per call, then returns ``value``."""
    return FaultTool(name, [Slow(seconds, value)], **options)


def probe(name: str, seconds: float = 1.0, value: Any = ECHO, **options: Any) -> FaultTool:
    """A slow tool for measuring: check ``max_active`` (concurrency) and ``call_times`` (rate)."""
    return slow(name, seconds, value, **options)


def http_error(
    status: int, retry_after: float | str | None = None, *, name: str = "HTTPStatusError"
) -> Exception:
    """An exception shaped like ``httpx.HTTPStatusError`` (``.response.status_code`` and
    ``.response.headers``), for testing error classification without httpx."""
    headers = {} if retry_after is None else {"retry-after": str(retry_after)}
    response = _Response(status, headers)
    cls: Callable[[str], Exception] = type(name, (Exception,), {})
    exc = cls(f"HTTP {status}")
    exc.response = response  # type: ignore[attr-defined]
    return exc


@dataclass(frozen=True, slots=True)
class _Response:
    status_code: int
    headers: dict[str, str]
