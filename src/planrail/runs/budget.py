"""A run's LLM budget, kept with it: every door that resumes a run with a model
(``planrail resume --model``, :func:`planrail.resume`, ``planrail run --run-id``) spends from
what the run had left, not from a new budget; a door that resumes it with none (MCP
``resume_run``, the dashboard, ``planrail resume`` without ``--model``) keeps it stored as it is.

When a run opens, its stored policies take the budget's record
(:meth:`~planrail.llm.budget.BudgetMeter.record`: the limits, the prices, what was spent so far)
and the ids of the steps whose usage that spend already holds (``counted``). The run's other
``llm_call`` steps keep their own usage in their records. A resume given a client that no
meter wraps meters it from the stored record plus the usage of the steps recorded since; a
call the budget no longer allows is refused before it is made (the step fails with
``BudgetExceededError``, which stops the run). A call cut short by a crash, before its step was
recorded, is not counted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from planrail.engine.executor import BudgetRecord
from planrail.engine.gate import BUDGET
from planrail.engine.result import StepResult, usage_of
from planrail.errors import StoreError
from planrail.llm.budget import BudgetMeter
from planrail.plan.model import Plan
from planrail.store.base import RunRecord, Store

__all__ = ["kept", "record_of", "stored_meter"]


def record_of(meter: BudgetMeter) -> BudgetRecord:
    """What a run metered by ``meter`` stores of its budget when it opens."""

    def record(steps: Mapping[str, StepResult]) -> dict[str, Any]:
        counted = sorted(sid for sid, res in steps.items() if usage_of(res))
        return {**meter.record(), "counted": counted}

    return record


def _saved(stored: RunRecord) -> Any:
    """The budget record stored run ``stored`` holds (None: it has no budget)."""
    policies = stored.metadata.get("policies")
    return policies.get(BUDGET) if isinstance(policies, dict) else None


def kept(stored: RunRecord) -> BudgetRecord | None:
    """What a resume given no model stores of stored run ``stored``'s budget: the record it
    holds, unchanged (its ``llm_call`` steps cannot run, and a later resume with a model spends
    from that budget still); None if it has none."""
    saved = _saved(stored)
    return None if saved is None else lambda _steps: saved


def stored_meter(
    store: Store, stored: RunRecord, plan: Plan, model: str
) -> tuple[BudgetMeter, BudgetRecord] | None:
    """The meter of stored run ``stored``'s budget, with what the run has spent (its steps'
    usage, read from ``store``, priced as ``model`` unless a step names its own), and its
    record to store again unchanged; None if the run has no budget."""
    run_id = stored.run_id
    saved = _saved(stored)
    if saved is None:
        return None
    try:
        meter = BudgetMeter.from_record(saved)
        counted = set(saved.get("counted", ()))
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise StoreError(
            f"run '{run_id}' holds an LLM budget that cannot be read ({exc}): it is not"
            " resumed without one",
            run_id=run_id,
        ) from None
    for sid, step in store.get_steps(run_id).items():
        usage = step.metadata.get("usage")
        if sid in counted or not isinstance(usage, dict) or not usage:
            continue
        named = plan.by_id[sid].model if sid in plan.by_id else None
        meter.add_spent(named or model, usage)
    return meter, lambda _steps: saved
