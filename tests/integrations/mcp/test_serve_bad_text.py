"""``planrail mcp serve`` answers whatever its tools do and whatever its store holds: a tool
error quoting text that is not Unicode, a record stored with such text, and tools raising
``KeyboardInterrupt`` (a failed step; the server goes on) — while a real Ctrl-C still stops it.
Driven over stdio by the MCP SDK's own client, as ``test_serve.py``."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import mcp_types
import pytest
from mcp import Client, StdioServerParameters

from bad_text_records import RUN_ID, SHOWN_ERROR, SHOWN_OUTPUT, store_raw_surrogates
from planrail.integrations.mcp.hub import schema_hash
from planrail.store import open_store

from .conftest import START_BUDGET

HERE = Path(__file__).resolve().parent
TOOLS = str(HERE / "bad_text_tools.py")
PLANRAIL = str(Path(sys.executable).with_name("planrail"))
GUARD = 60.0
"""A server still running this long after its Ctrl-C has hung (a guard: no timing asserted)."""


def serve(store: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=PLANRAIL, args=["mcp", "serve", "--tools", TOOLS, "--store", f"sqlite:///{store}"]
    )


def structured(result: mcp_types.CallToolResult) -> Any:
    assert not result.is_error, result.content
    return result.structured_content


def one(tool: str) -> dict[str, Any]:
    return {"steps": [{"id": "a", "tool": tool, "args": {"name": "caf"}}]}


async def test_a_tool_error_quoting_undecodable_bytes_is_answered(tmp_path: Path) -> None:
    """The tool's error holds a lone surrogate: ``run_plan`` answers with the run id and the
    error, the surrogate as its escape, and ``get_run`` reads the step (before, both were a
    bare "Error executing tool": the SDK could not encode the answer, and the client never
    learned the run id)."""
    async with Client(serve(tmp_path / "runs.db")) as client:
        ran = structured(await client.call_tool("run_plan", {"plan": one("undecodable")}))
        assert ran["status"] == "failed"
        assert "cannot read /data/caf\\udcff.txt" in ran["error"]
        record = structured(await client.call_tool("get_run", {"run_id": ran["run_id"]}))
    (step,) = record["steps"]
    assert step["status"] == "failed"
    assert step["error"]["message"] == "cannot read /data/caf\\udcff.txt"


async def test_a_record_holding_a_lone_surrogate_is_answered_escaped(tmp_path: Path) -> None:
    """Whatever text a stored record holds, ``get_run`` answers it: strings and keys with each
    lone surrogate as its escape (before, a bare "Error executing tool")."""
    db = tmp_path / "runs.db"
    with open_store(f"sqlite:///{db}") as store:
        store_raw_surrogates(store, "echo")
    async with Client(serve(db)) as client:
        record = structured(await client.call_tool("get_run", {"run_id": RUN_ID}))
        listed = structured(await client.call_tool("list_runs", {}))["result"]
    (step,) = record["steps"]
    assert step["error"]["message"] == SHOWN_ERROR
    assert step["output"] == SHOWN_OUTPUT
    assert [r["run_id"] for r in listed] == [RUN_ID]


@pytest.mark.parametrize(
    ("tool", "why"),
    [
        ("interrupting", "in its thread, where no Ctrl-C arrives"),  # the engine's runner says
        ("interrupting_async", "which does not stop a served planrail"),  # the server says
    ],
)
async def test_a_tool_raising_keyboard_interrupt_fails_its_step_and_the_server_goes_on(
    tmp_path: Path, tool: str, why: str
) -> None:
    """For ``planrail run`` an async tool's ``KeyboardInterrupt`` is a Ctrl-C; for the server
    it is a failed attempt: the run is recorded failed and says why, naming the tool, and the
    next plan runs (before, the run never ended and the client was never answered). A sync
    tool's, raised in its worker thread, is never a Ctrl-C: the engine's own message says so."""
    async with Client(serve(tmp_path / "runs.db")) as client:
        ran = structured(await client.call_tool("run_plan", {"plan": one(tool)}))
        assert ran["status"] == "failed"
        assert f"tool '{tool}' raised KeyboardInterrupt" in ran["error"]
        record = structured(await client.call_tool("get_run", {"run_id": ran["run_id"]}))
        after = structured(await client.call_tool("run_plan", {"plan": one("echo")}))
    (step,) = record["steps"]
    assert (step["status"], step["attempts"]) == ("failed", 1)
    assert step["error"]["type"] == "ToolError"
    assert f"tool '{tool}' raised KeyboardInterrupt" in step["error"]["message"]
    assert why in step["error"]["message"]
    assert step["error"]["message"].endswith("the attempt failed instead")
    assert after["status"] == "succeeded"


def _send(proc: subprocess.Popen[str], message: dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    proc.stdin.flush()


def test_a_real_ctrl_c_still_stops_the_server_while_a_tool_runs(tmp_path: Path) -> None:
    """A SIGINT to ``planrail mcp serve`` stops it, exit 130 and no traceback, even while a
    tool runs and after a tool's own ``KeyboardInterrupt`` was taken for a failed step."""
    args = ["mcp", "serve", "--tools", TOOLS, "--store", f"sqlite:///{tmp_path / 'runs.db'}"]
    proc = subprocess.Popen(  # SIGINT is not ignored in the tests (tests/conftest.py)
        [PLANRAIL, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stderr is not None
        hello = {"protocolVersion": "2025-06-18", "capabilities": {},
                 "clientInfo": {"name": "t", "version": "1"}}  # fmt: skip
        _send(proc, {"id": 1, "method": "initialize", "params": hello})
        assert '"id":1' in proc.stdout.readline()
        _send(proc, {"method": "notifications/initialized"})
        for n, tool in enumerate(["interrupting", "blocking"], 2):
            call = {"name": "run_plan", "arguments": {"plan": one(tool)}}
            _send(proc, {"id": n, "method": "tools/call", "params": call})
        answer = json.loads(proc.stdout.readline())
        assert answer["id"] == 2
        assert '\\"status\\": \\"failed\\"' in json.dumps(answer["result"]["content"][0]["text"])
        said = []
        while not said or "blocking tool started" not in said[-1]:
            said.append(proc.stderr.readline())
            assert said[-1], f"the server ended first: {''.join(said)}"
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=GUARD)
        rest = proc.stderr.read()
    finally:
        proc.kill()
        proc.wait(timeout=START_BUDGET)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    assert code == 130, rest
    assert "Traceback" not in "".join(said) + rest


def test_a_remote_tool_schema_holding_a_lone_surrogate_has_a_hash() -> None:
    """What an approval pins is hashed from any text (``digest`` encoded a lone surrogate
    strictly: a UnicodeEncodeError); two schemas differing only there hash differently."""
    one_tool = mcp_types.Tool(name="t", input_schema={"type": "object", "description": "\udcff"})
    other = mcp_types.Tool(name="t", input_schema={"type": "object", "description": "\udcfe"})
    assert schema_hash(one_tool).startswith("sha256:")
    assert schema_hash(one_tool) != schema_hash(other)
