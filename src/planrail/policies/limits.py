"""Run-level limits and the errors a limit raises.

:class:`RunPolicy` is what a run is configured with (besides the plan): per-resource concurrency
and rate limits, a run deadline, a default retry policy, and caps on loops and fan-outs.
:class:`PolicyLimits` holds the static caps the validator enforces on any plan.

The errors extend the tree in :mod:`planrail.errors`::

    ExecutionError
    ├── AttemptTimeoutError     one attempt ran longer than ``timeout`` (retryable)
    ├── StepTimeoutError        all attempts together ran longer than ``total_timeout``
    ├── DeadlineExceededError   the run's deadline passed (stops the whole run)
    └── LoopExhaustedError      a ``repeat`` step reached ``max_iterations`` without ``until``
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from planrail.errors import ExecutionError
from planrail.policies.retry import RetryPolicy

__all__ = [
    "AttemptTimeoutError",
    "DeadlineExceededError",
    "LoopExhaustedError",
    "PolicyLimits",
    "ResourceLimit",
    "RunPolicy",
    "StepTimeoutError",
]


class AttemptTimeoutError(ExecutionError):
    """One attempt took longer than the step's ``timeout``; retried like any timeout."""

    code = "attempt_timeout"
    retryable = True


class StepTimeoutError(ExecutionError):
    """The step's attempts (and the waits between them) took longer than ``total_timeout``."""

    code = "step_timeout"


class DeadlineExceededError(ExecutionError):
    """The run's deadline passed: the whole run stops."""

    code = "deadline_exceeded"


class LoopExhaustedError(ExecutionError):
    """A ``repeat`` step ran ``max_iterations`` times and its ``until`` never held."""

    code = "loop_exhausted"


@dataclass(frozen=True, slots=True)
class PolicyLimits:
    """Static caps on policies, enforced by the validator (code ``invalid_policy``)."""

    max_iterations: int = 1000
    """Largest ``repeat.max_iterations`` a plan may declare."""
    max_parallel: int = 1000
    """Largest ``max_parallel`` a plan may declare."""


_PER = {
    "s": 1.0,
    "sec": 1.0,
    "second": 1.0,
    "m": 60.0,
    "min": 60.0,
    "minute": 60.0,
    "h": 3600.0,
    "hour": 3600.0,
}
_RATE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*/\s*([a-z]+)\s*$")


@dataclass(frozen=True, slots=True)
class ResourceLimit:
    """Limits on one upstream (a ``resource`` named by tools or steps).

    ``rate`` requests per ``per`` seconds are admitted through a token bucket holding at most
    ``burst`` tokens: with the default ``burst=1`` consecutive requests start at least
    ``per / rate`` seconds apart, so no window of time ever sees more than the configured rate.
    """

    max_concurrency: int | None = None
    """Most calls in flight at once (``None``: no limit)."""
    rate: float | None = None
    """Requests admitted per ``per`` seconds (``None``: no rate limit)."""
    per: float = 1.0
    """The rate's period in seconds (60 for "per minute")."""
    burst: int = 1
    """Requests that may start back to back after a quiet period."""

    def __post_init__(self) -> None:
        if self.max_concurrency is not None and (
            type(self.max_concurrency) is not int or self.max_concurrency < 1
        ):
            raise ValueError(
                f"max_concurrency must be an integer >= 1, got {self.max_concurrency!r}"
            )
        if self.rate is not None and (not math.isfinite(self.rate) or self.rate <= 0):
            raise ValueError(f"rate must be a number > 0, got {self.rate!r}")
        if not math.isfinite(self.per) or self.per <= 0:
            raise ValueError(f"per must be a number of seconds > 0, got {self.per!r}")
        if type(self.burst) is not int or self.burst < 1:
            raise ValueError(f"burst must be an integer >= 1, got {self.burst!r}")

    @property
    def interval(self) -> float | None:
        """Seconds between requests at the steady rate (``None`` without a rate)."""
        return None if self.rate is None else self.per / self.rate

    @classmethod
    def parse(cls, value: ResourceLimit | Mapping[str, Any]) -> ResourceLimit:
        """From a mapping: ``{"max_concurrency": 2, "rate": 10, "per": "minute", "burst": 1}``;
        ``rate`` may also be text such as ``"10/s"``, ``"600/min"`` or ``"1000/hour"``."""
        if isinstance(value, ResourceLimit):
            return value
        data = dict(value)
        unknown = set(data) - {"max_concurrency", "rate", "per", "burst"}
        if unknown:
            raise ValueError(f"unknown resource limit fields: {', '.join(sorted(unknown))}")
        per = data.get("per", 1.0)
        if isinstance(per, str):
            if per not in _PER:
                raise ValueError(f"per must be seconds or one of {', '.join(_PER)}, got {per!r}")
            per = _PER[per]
        rate = data.get("rate")
        if isinstance(rate, str):
            m = _RATE_RE.match(rate.lower())
            if m is None or m.group(2) not in _PER:
                raise ValueError(f"rate {rate!r} is not like '10/s', '600/min' or '100/hour'")
            rate, per = float(m.group(1)), _PER[m.group(2)]
        return cls(
            max_concurrency=data.get("max_concurrency"),
            rate=rate,
            per=float(per),
            burst=data.get("burst", 1),
        )


_DEFAULT_IDENTICAL_CALLS = 3


@dataclass(frozen=True, slots=True)
class RunPolicy:
    """Policies for a whole run (pass as ``Execution(..., policy=RunPolicy(...))``)."""

    resources: Mapping[str, ResourceLimit] = field(default_factory=dict)
    """Limits per resource name; a resource without an entry is not limited."""
    deadline: float | None = None
    """Seconds from the start of the run; when it passes, running steps are cut off and the
    run fails (nothing else starts)."""
    default_retry: RetryPolicy | None = None
    """Retry policy for steps and tools that declare none (default: one attempt)."""
    max_iterations: int = 100
    """Cap on any ``repeat.max_iterations`` (a plan asking for more is held to this)."""
    max_items: int = 10_000
    """Most items a ``for_each`` may fan out over; a longer list fails the step."""
    default_max_parallel: int = 16
    """Items of one ``for_each`` running at once when the step sets no ``max_parallel``."""
    seed: int | None = None
    """Seed of the jitter RNG (``None``: unpredictable jitter)."""
    max_identical_calls: int | None = _DEFAULT_IDENTICAL_CALLS
    """Most calls of one tool with the same resolved arguments in a run (retries of a call are
    not counted); the next identical call fails with ``RepeatedCallError`` instead of being
    made. ``None`` turns the guard off (``docs/policies.md``)."""
    repeatable_tools: frozenset[str] = frozenset()
    """Tools the repeated-call guard leaves alone: reads you mean to call again with the same
    arguments (a status you poll with ``repeat``, a clock)."""

    def to_dict(self) -> dict[str, Any]:
        """The policy as plain JSON data, stored with a run (:meth:`from_mapping` reads it).

        ``max_identical_calls`` and ``repeatable_tools`` are written only when they are not
        the defaults: a run stored before they were is the same policy as a default one (a
        resume compares the stored form with the given policy's), and reads back as it.
        """
        data: dict[str, Any] = {
            "resources": {
                name: {
                    "max_concurrency": lim.max_concurrency,
                    "rate": lim.rate,
                    "per": lim.per,
                    "burst": lim.burst,
                }
                for name, lim in sorted(self.resources.items())
            },
            "deadline": self.deadline,
            "default_retry": None if self.default_retry is None else self.default_retry.to_dict(),
            "max_iterations": self.max_iterations,
            "max_items": self.max_items,
            "default_max_parallel": self.default_max_parallel,
            "seed": self.seed,
        }
        if self.max_identical_calls != _DEFAULT_IDENTICAL_CALLS:
            data["max_identical_calls"] = self.max_identical_calls
        if self.repeatable_tools:
            data["repeatable_tools"] = sorted(self.repeatable_tools)
        return data

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> RunPolicy:
        """The policy :meth:`to_dict` wrote (unknown fields are an error; a missing field is
        its default)."""
        fields = dict(data)
        unknown = set(fields) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown run policy fields: {', '.join(sorted(unknown))}")
        retry = fields.get("default_retry")
        if retry is not None and not isinstance(retry, RetryPolicy):
            fields["default_retry"] = RetryPolicy.from_spec(retry)
        return cls(**fields)

    def __post_init__(self) -> None:
        resources = {name: ResourceLimit.parse(lim) for name, lim in dict(self.resources).items()}
        object.__setattr__(self, "resources", resources)
        if self.deadline is not None and (not math.isfinite(self.deadline) or self.deadline <= 0):
            raise ValueError(f"deadline must be a number of seconds > 0, got {self.deadline!r}")
        exempt = self.repeatable_tools
        exempt = frozenset([exempt] if isinstance(exempt, str) else exempt)
        if not all(isinstance(name, str) for name in exempt):
            raise ValueError(
                f"repeatable_tools must be tool names, got {sorted(exempt, key=repr)!r}"
            )
        object.__setattr__(self, "repeatable_tools", exempt)
        calls = self.max_identical_calls
        if calls is not None and (type(calls) is not int or calls < 1):
            raise ValueError(f"max_identical_calls must be an integer >= 1 or None, got {calls!r}")
        for name in ("max_iterations", "max_items", "default_max_parallel"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
