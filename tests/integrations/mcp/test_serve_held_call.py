"""``planrail mcp serve`` is one long-lived process: a run cancelled while a keyed sync call
runs in its thread, then resumed in the same session, does not call that key again while the
first call still runs (the call could not be stopped: two calls at once with one key is what
``side_effects="keyed"`` does not promise to survive). From the tool's own ledger."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from mcp import Client, StdioServerParameters
from typer.testing import CliRunner

from planrail.cli import app

from .test_serve import approve, structured

HERE = Path(__file__).resolve().parent
PLANRAIL = str(Path(sys.executable).with_name("planrail"))
PLAN = {"goal": "post", "steps": [{"id": "p", "tool": "post", "args": {"text": "hi"}}]}


def _serve(db: Path, pipes: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=PLANRAIL,
        args=["mcp", "serve", "--tools", str(HERE / "held_tools.py"), "--store", f"sqlite:///{db}"],
        env={**os.environ, "HELD_DIR": str(pipes)},
    )


def _read(pipe: Path) -> str:
    return pipe.read_text()  # blocks until the tool writes


async def test_a_resume_in_the_same_session_waits_for_the_call_still_running(
    tmp_path: Path,
) -> None:
    pipes = tmp_path / "pipes"
    pipes.mkdir()
    for name in ("started", "release", "ended"):
        os.mkfifo(pipes / name)
    (pipes / "hold").touch()
    ledger = pipes / "ledger"
    db = tmp_path / "runs.db"
    async with Client(_serve(db, pipes)) as client:
        stored = structured(await client.call_tool("run_plan", {"plan": PLAN, "run_id": "R"}))
        assert stored["status"] == "awaiting_approval"
        approve(db, "R")
        first = asyncio.create_task(client.call_tool("resume_run", {"run_id": "R"}))
        await asyncio.to_thread(_read, pipes / "started")
        cancelled = CliRunner().invoke(app, ["cancel", "R", "--store", f"sqlite:///{db}"])
        assert cancelled.exit_code == 0, cancelled.output
        assert structured(await first)["status"] == "cancelled"

        held = structured(await client.call_tool("resume_run", {"run_id": "R"}))
        assert held["status"] == "failed"
        assert "still runs" in held["error"]
        assert ledger.read_text().split("\n") == ["start R:p", ""]

        await asyncio.to_thread((pipes / "release").write_text, "go")
        await asyncio.to_thread(_read, pipes / "ended")
        # The tool said it is about to return; its thread may not have yet: a resume before
        # then is refused the same way, and calls nothing.
        for _ in range(100):
            again = structured(await client.call_tool("resume_run", {"run_id": "R"}))
            if again["status"] != "failed":
                break
            assert "still runs" in again["error"]
        assert again["status"] == "succeeded", again
    assert ledger.read_text().split("\n") == ["start R:p", "end R:p", "start R:p", "end R:p", ""]
