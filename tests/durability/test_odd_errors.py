"""A tool's error whose message is not Unicode text (a file name Python decoded with
``surrogateescape``) is recorded like any other failure, on every store: the run ends
``failed`` in the store as it did in memory, never left ``running`` by a driver's encoding
error."""

from __future__ import annotations

import planrail
from planrail.engine.checkpoint import load_result

from .conftest import Opener

MESSAGE = "cannot read /data/caf\udce9.txt"


@planrail.tool(side_effects="keyed")
async def read_file(ctx: planrail.StepContext) -> dict[str, str]:
    """Fails quoting an undecodable file name."""
    raise OSError(MESSAGE)


@planrail.tool(side_effects="keyed")
async def fine(ctx: planrail.StepContext) -> dict[str, str]:
    """Succeeds."""
    return {"ok": "yes"}


PLAN = {
    "goal": "an error message holding a lone surrogate",
    "steps": [{"id": "read", "tool": "read_file"}, {"id": "other", "tool": "fine"}],
}


async def test_a_failure_whose_message_holds_a_lone_surrogate_is_recorded(
    open_store: Opener,
) -> None:
    store = open_store()
    result = await planrail.arun(
        PLAN, [read_file, fine], store=store, run_id="odd-error", approve=True
    )
    assert result.status == "failed"
    assert result.steps["read"].error is not None
    assert result.steps["read"].error["message"] == MESSAGE

    stored = load_result(open_store(), "odd-error")  # as a new process reads it
    assert stored.status == "failed"
    assert stored.steps["read"].status == "failed"
    assert stored.steps["read"].error is not None
    assert stored.steps["read"].error["message"] == MESSAGE
    assert stored.steps["other"].status == "succeeded"
    assert stored.steps["other"].output == {"ok": "yes"}
