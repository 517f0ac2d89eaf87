"""A run recorded with lone surrogates in its text, as a store keeps one exactly (written before
errors were made readable, or by hand): what the dashboard and ``planrail mcp serve`` must
still answer (``tests/web/test_bad_text.py``, ``tests/integrations/mcp/test_serve_bad_text.py``)."""

from __future__ import annotations

from planrail.store import Store
from planrail.store.base import RunRecord, StepRecord

RUN_ID = "old"
ERROR = {"type": "OSError", "message": "caf\udcff", "retryable": False}
"""The run's and its step ``a``'s error."""
OUTPUT = {"name\udcff": "caf\udcff"}
"""Step ``a``'s output: a lone surrogate in a key and in a value."""
SHOWN_ERROR = "caf\\udcff"
SHOWN_OUTPUT = {"name\\udcff": "caf\\udcff"}
"""What a client reads of them: each lone surrogate as its escape."""


def store_raw_surrogates(store: Store, tool: str) -> None:
    """Commit run ``old`` (one step ``a`` calling ``tool``), failed, holding :data:`ERROR` and
    :data:`OUTPUT`."""
    plan = {"steps": [{"id": "a", "tool": tool, "args": {"name": "caf"}}]}
    run = RunRecord(
        run_id=RUN_ID,
        plan=plan,
        plan_hash="sha256:x",
        status="failed",
        created_at=1.0,
        updated_at=2.0,
        error=ERROR,
    )
    step = StepRecord(
        run_id=RUN_ID,
        step_id="a",
        status="failed",
        idempotency_key=f"{RUN_ID}:a",
        attempts=1,
        output=OUTPUT,
        error=ERROR,
    )
    store.commit(run=run, steps=[step])
