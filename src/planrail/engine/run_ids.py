"""A run's id and its options, checked where they are given: what :class:`~planrail.Execution`
(every door: ``prepare``, ``run``, ``arun``, the CLI, MCP, the dashboard) and
:class:`~planrail.agent.Agent` refuse before anything runs, each said with the option's name."""

from __future__ import annotations

import re
import uuid
from typing import Any, Literal, get_args

from planrail.errors import ExecutionError
from planrail.plan.strict_json import CONTROL_CHARACTERS, surrogate_problem
from planrail.policies.limits import RunPolicy
from planrail.policies.security import check_security
from planrail.store.base import Store

__all__ = [
    "MAX_RUN_ID_LENGTH",
    "FailureMode",
    "check_new_run_id",
    "check_options",
    "failure_mode_of",
    "new_run_id",
    "run_id_problem",
]

FailureMode = Literal["continue", "fail_fast"]


def failure_mode_of(fail_fast: bool | None) -> FailureMode | None:
    """The ``failure_mode`` a door's fail-fast switch asks for (``--fail-fast``/
    ``--no-fail-fast``, MCP ``fail_fast``), or None when it is not given: a new run goes on
    past failures, a resume keeps the mode stored with the run."""
    return None if fail_fast is None else ("fail_fast" if fail_fast else "continue")


def new_run_id() -> str:
    """A fresh run id: ``run_`` and 12 hex digits."""
    return "run_" + uuid.uuid4().hex[:12]


_CONTROL = re.compile(f"[{CONTROL_CHARACTERS}]")
MAX_RUN_ID_LENGTH = 256
"""The longest run id a new run may have (every idempotency key, ``RUN_ID:STEP``, holds it)."""


def run_id_problem(run_id: str) -> str | None:
    """What makes ``run_id`` unfit for a new run, or None. A run id is free text, but not
    empty or blank (an unset ``--run-id "$VAR"`` would silently start a fresh run), not holding
    control characters (a newline splits every log line and table row it is in), not longer
    than :data:`MAX_RUN_ID_LENGTH`, Unicode (no store could keep a lone surrogate), and not
    ``.`` or ``..`` (a URL path segment that every browser and HTTP client resolves away: such a
    run would have no page on the dashboard)."""
    if not run_id.strip():
        return "is empty" if not run_id else "is blank"
    if run_id in (".", ".."):
        return f"is {run_id!r}, which a URL resolves away (no dashboard page could show it)"
    control = _CONTROL.search(run_id)
    if control is not None:
        return f"holds a control character (U+{ord(control.group()):04X})"
    if len(run_id) > MAX_RUN_ID_LENGTH:
        return f"is {len(run_id):,} characters; at most {MAX_RUN_ID_LENGTH} are allowed"
    return surrogate_problem(run_id)


def check_new_run_id(run_id: object, store: Store | None = None) -> None:
    """A TypeError for a run id that is not a ``str``, an :class:`ExecutionError` for one
    :func:`run_id_problem` refuses — unless ``store`` already holds that run (a run stored
    earlier keeps its id). What :class:`Execution` and :class:`~planrail.agent.Agent` check."""
    if not isinstance(run_id, str):
        raise TypeError(f"run_id must be a str, not {type(run_id).__name__}")
    problem = run_id_problem(run_id)
    if problem is not None and (store is None or store.get_run(run_id) is None):
        raise ExecutionError(f"the run id {problem}")


def check_options(
    max_concurrency: Any,
    failure_mode: Any,
    clock: Any,
    observers: Any,
    policy: Any,
    security: Any,
) -> None:
    """What a caller of :class:`Execution` (``prepare``, ``run``, ``arun``: every door) got
    wrong, said where it was given — a TypeError or ValueError naming the option — rather than
    an AttributeError from deep inside the run, or a wrong run."""
    if max_concurrency is not None:
        if not isinstance(max_concurrency, int) or isinstance(max_concurrency, bool):
            raise TypeError(
                f"max_concurrency must be a whole number, not {type(max_concurrency).__name__}"
            )
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
    if failure_mode is not None and failure_mode not in get_args(FailureMode):
        raise ValueError(f"failure_mode must be 'continue' or 'fail_fast', not {failure_mode!r}")
    missing = [m for m in ("now", "monotonic", "sleep") if not callable(getattr(clock, m, None))]
    if missing:
        lacks = ", ".join(f"{m}()" for m in missing)
        raise TypeError(f"clock must have now(), monotonic() and sleep(): {clock!r} lacks {lacks}")
    for obs in observers:
        if not callable(getattr(obs, "on_event", None)):
            raise TypeError(f"observer {obs!r} has no on_event(event) method")
    if policy is not None and not isinstance(policy, RunPolicy):
        raise TypeError(f"policy must be a planrail.RunPolicy, not {type(policy).__name__}")
    check_security(security)
