"""A tool's error whose message is not Unicode text (a file name Python decoded with
``surrogateescape``) is recorded like any other failure, on every store: the run ends
``failed`` in the store as it did in memory, never left ``running`` by a driver's encoding
error."""

from __future__ import annotations

import planrail
from planrail.engine.checkpoint import load_result

from .conftest import Opener

MESSAGE = "cannot read /data/caf\udce9.txt"
ESCAPED = MESSAGE.encode("utf-8", "backslashreplace").decode()
"""The message as recorded: its lone surrogate written as its escape (``\\udce9``)."""


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
    assert result.steps["read"].error["message"] == ESCAPED  # readable by every door

    stored = load_result(open_store(), "odd-error")  # as a new process reads it
    assert stored.status == "failed"
    assert stored.steps["read"].status == "failed"
    assert stored.steps["read"].error is not None
    assert stored.steps["read"].error["message"] == ESCAPED
    assert stored.steps["other"].status == "succeeded"
    assert stored.steps["other"].output == {"ok": "yes"}


ODD = "bad byte \udce9 and a NUL \x00 here"


@planrail.tool(side_effects="keyed")
async def odd_failure(ctx: planrail.StepContext) -> dict[str, str]:
    """Fails with a message holding a lone surrogate and NUL."""
    raise OSError(ODD)


FALLBACK_PLAN = {
    "goal": "a fallback after an odd error message",
    "steps": [
        {"id": "value", "tool": "odd_failure", "fallback": {"value": {"ok": "fallback"}}},
        {"id": "tool", "tool": "odd_failure", "fallback": {"tool": "fine"}},
    ],
}


async def test_a_fallback_after_such_a_failure_is_recorded_and_its_reason_kept(
    open_store: Opener,
) -> None:
    """A fallback's reason quotes the failure's message: it is recorded (with NUL and the lone
    surrogate written as their escapes), not turned into 'its outcome could not be recorded',
    and the stored reason is the one the run returned."""
    store = open_store()
    result = await planrail.arun(
        FALLBACK_PLAN, [odd_failure, fine], store=store, run_id="odd-fallback", approve=True
    )
    assert result.status == "succeeded", result.why
    stored = load_result(open_store(), "odd-fallback")
    assert stored.status == "succeeded"
    for sid, output in (("value", {"ok": "fallback"}), ("tool", {"ok": "yes"})):
        step = result.steps[sid]
        assert step.degraded
        assert step.output == output
        assert step.reason is not None
        assert "bad byte \\udce9 and a NUL \\x00 here" in step.reason
        assert stored.steps[sid].status == "succeeded"
        assert stored.steps[sid].output == output
        assert stored.steps[sid].reason == step.reason
