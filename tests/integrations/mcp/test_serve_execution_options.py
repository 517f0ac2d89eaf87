"""``run_plan`` and ``resume_run`` take ``max_concurrency`` and ``fail_fast``, as ``planrail
run`` and ``resume`` take ``--max-concurrency`` and ``--fail-fast``/``--no-fail-fast``: an MCP
client could only run a plan with no bound and on past every failure. Stored with the run: a
``resume_run`` given neither runs as the run last ran. Over stdio, with the SDK's client."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp import Client

from .test_serve import approve, serve, structured

# One call at a time, in plan order: ``first`` fails (there is no account named Nobody).
FAILS_FIRST = {
    "goal": "find two",
    "steps": [
        {"id": "first", "tool": "find", "args": {"name": "Nobody"}},
        {"id": "second", "tool": "find", "args": {"name": "Ada"}},
    ],
}
# The same, changing the world: it waits for approval, then ``resume_run`` runs it.
CHANGES = {
    "goal": "find then create",
    "steps": [
        {"id": "first", "tool": "find", "args": {"name": "Nobody"}},
        {"id": "second", "tool": "create", "args": {"name": "Bob"}},
    ],
}


def _steps(record: dict[str, Any]) -> dict[str, str]:
    return {s["id"]: s["status"] for s in record["steps"]}


async def test_run_plan_fail_fast_stops_at_the_first_failure(tmp_path: Path) -> None:
    async with Client(serve(tmp_path / "runs.db")) as client:
        told = {"plan": FAILS_FIRST, "max_concurrency": 1, "fail_fast": True}
        stopped = structured(await client.call_tool("run_plan", told))
        on = structured(
            await client.call_tool("run_plan", {"plan": FAILS_FIRST, "max_concurrency": 1})
        )
        for ran in (stopped, on):
            assert ran["status"] == "failed"
        first = structured(await client.call_tool("get_run", {"run_id": stopped["run_id"]}))
        second = structured(await client.call_tool("get_run", {"run_id": on["run_id"]}))
    assert _steps(first)["first"] == "failed"
    assert _steps(first)["second"] in ("skipped", "cancelled")  # never called
    assert _steps(second) == {"first": "failed", "second": "succeeded"}


async def test_resume_run_takes_them_and_stores_them(tmp_path: Path) -> None:
    """A run started without fail-fast, approved by an operator, resumed ``fail_fast``: its
    ``second`` step is never called; resumed again given nothing, it stops so again (stored);
    resumed ``fail_fast: false``, it goes on and creates Bob."""
    db = tmp_path / "runs.db"
    async with Client(serve(db)) as client:
        waiting = structured(await client.call_tool("run_plan", {"plan": CHANGES}))
        assert waiting["status"] == "awaiting_approval"
        run_id = waiting["run_id"]
        approve(db, run_id)
        seen = []
        for given in ({"fail_fast": True, "max_concurrency": 1}, {}, {"fail_fast": False}):
            done = structured(await client.call_tool("resume_run", {"run_id": run_id, **given}))
            assert done["status"] == "failed"
            record = structured(await client.call_tool("get_run", {"run_id": run_id}))
            seen.append(_steps(record)["second"])
    assert seen[0] in ("skipped", "cancelled")
    assert seen[1] in ("skipped", "cancelled")
    assert seen[2] == "succeeded"


async def test_a_max_concurrency_below_one_is_refused_before_anything_runs(tmp_path: Path) -> None:
    async with Client(serve(tmp_path / "runs.db")) as client:
        refused = await client.call_tool("run_plan", {"plan": FAILS_FIRST, "max_concurrency": 0})
        assert refused.is_error
        said = " ".join(getattr(part, "text", "") for part in refused.content)
        # refused by the tool's input schema (ge=1) before planrail runs; the answer names it
        assert "max_concurrency" in said, said
        listed = structured(await client.call_tool("list_runs", {}))["result"]
    assert listed == []
