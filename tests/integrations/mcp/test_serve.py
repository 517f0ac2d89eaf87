"""``planrail mcp serve`` driven by the MCP SDK's own client, over stdio and over HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shlex
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import mcp_types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.session import ClientRequestContext
from typer.testing import CliRunner

from planrail.cli import app

from .conftest import PROBE, START_BUDGET

HERE = Path(__file__).resolve().parent
TOOLS = str(HERE / "serve_tools.py")
PLANRAIL = str(Path(sys.executable).with_name("planrail"))

READ_ONLY = {
    "goal": "find Ada",
    "steps": [
        {"id": "a", "tool": "find", "args": {"name": "Ada"}},
        {"id": "b", "tool": "find", "args": {"name": "${a.user_id}"}, "depends_on": ["a"]},
    ],
    "output": "${b.name}",
}
CHANGES = {"goal": "create Bob", "steps": [{"id": "c", "tool": "create", "args": {"name": "Bob"}}]}


def serve(store: Path, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=PLANRAIL,
        args=["mcp", "serve", "--tools", TOOLS, "--store", f"sqlite:///{store}", *extra],
    )


def structured(result: mcp_types.CallToolResult) -> Any:
    assert not result.is_error, result.content
    return result.structured_content


async def test_validate_run_read_list_and_the_catalog(tmp_path: Path) -> None:
    """A bad plan's issues come back as structured content with their codes; a good plan runs
    and its record is readable; runs are listed; the catalog is a resource."""
    async with Client(serve(tmp_path / "runs.db")) as client:
        bad = {"steps": [{"id": "a", "tool": "find", "args": {"name": "${nope.x}"}},
                         {"id": "a", "tool": "missing"}]}  # fmt: skip
        report = structured(await client.call_tool("validate_plan", {"plan": bad}))
        assert report["valid"] is False
        assert {"duplicate_id", "unknown_step_reference"} <= {i["code"] for i in report["errors"]}
        ran = structured(await client.call_tool("run_plan", {"plan": READ_ONLY}))
        assert (ran["status"], ran["output"]) == ("succeeded", "usr_ada")
        record = structured(await client.call_tool("get_run", {"run_id": ran["run_id"]}))
        assert [(s["id"], s["status"]) for s in record["steps"]] == [
            ("a", "succeeded"), ("b", "succeeded")]  # fmt: skip
        listed = structured(await client.call_tool("list_runs", {}))["result"]
        assert [r["run_id"] for r in listed] == [ran["run_id"]]
        nobody = {"steps": [{"id": "a", "tool": "find", "args": {"name": "Nobody"}}]}
        failed = structured(await client.call_tool("run_plan", {"plan": nobody}))
        assert failed["status"] == "failed"  # and says why, not only that it failed
        assert "step 'a' failed" in failed["error"]
        assert "no account named Nobody" in failed["error"]
        invalid = structured(await client.call_tool("run_plan", {"plan": bad}))
        assert invalid["status"] == "invalid"
        assert invalid["errors"]
        resource = await client.read_resource("planrail://catalog")
        catalog = json.loads(resource.contents[0].text)  # type: ignore[union-attr]
        served = {t["name"] for t in catalog["tools"]}
        assert served == {"find", "create", "send", "api_key", "check_token"}


async def test_a_plan_needing_approval_waits_and_runs_once_approved(tmp_path: Path) -> None:
    """Without elicitation a plan that changes the world is stored ``awaiting_approval``
    (nothing runs); once an operator approved it (``planrail approve``), ``resume_run`` runs
    it."""
    db = tmp_path / "runs.db"
    async with Client(serve(db)) as client:
        waiting = structured(await client.call_tool("run_plan", {"plan": CHANGES}))
        assert waiting["status"] == "awaiting_approval"
        assert f"planrail approve {waiting['run_id']}" in waiting["next"]
        record = structured(await client.call_tool("get_run", {"run_id": waiting["run_id"]}))
        assert record["steps"][0]["status"] == "pending"
        approve(db, waiting["run_id"])
        done = structured(await client.call_tool("resume_run", {"run_id": waiting["run_id"]}))
        assert done["status"] == "succeeded"


async def test_run_plan_answers_with_secrets_redacted_as_the_store_keeps_them(
    tmp_path: Path,
) -> None:
    """The client of ``run_plan`` is an agent: a secret tool's output reaches it redacted,
    whether it is the plan's output itself or came through another step, and so does a
    secret parameter's value quoted by an error (it was handed out in clear, while
    ``get_run`` and ``planrail run --json`` redacted it)."""
    from .serve_tools import API_KEY

    plans = [
        {"steps": [{"id": "k", "tool": "api_key", "args": {"name": "x"}}], "output": "${k}"},
        {"steps": [{"id": "k", "tool": "api_key", "args": {"name": "x"}},
                   {"id": "f", "tool": "find", "args": {"name": "${k.key}"}, "depends_on": ["k"]}],
         "output": "${f.name}"},
    ]  # fmt: skip
    async with Client(serve(tmp_path / "runs.db")) as client:
        for plan in plans:
            result = await client.call_tool("run_plan", {"plan": plan})
            ran = structured(result)
            assert ran["status"] == "succeeded"
            told = json.dumps(ran) + " ".join(getattr(c, "text", "") for c in result.content)
            assert API_KEY not in told
            assert "***" in json.dumps(ran["output"])
        quoted = {"steps": [{"id": "k", "tool": "api_key", "args": {"name": "x"}},
                            {"id": "c", "tool": "check_token", "args": {"token": "${k.key}"},
                             "depends_on": ["k"]}]}  # fmt: skip
        result = await client.call_tool("run_plan", {"plan": quoted})
        failed = structured(result)
        assert failed["status"] == "failed"
        assert "token *** rejected" in failed["error"]
        told = json.dumps(failed) + " ".join(getattr(c, "text", "") for c in result.content)
        assert API_KEY not in told


async def test_a_plan_cannot_waive_its_own_approval(tmp_path: Path) -> None:
    """The agent's plan says its world-changing step needs no approval: it still waits for
    one (``awaiting_approval``, nothing run), as the same plan without the waiver does."""
    waiving = {"steps": [{**CHANGES["steps"][0], "requires_approval": False}]}
    async with Client(serve(tmp_path / "runs.db")) as client:
        waiting = structured(await client.call_tool("run_plan", {"plan": waiving}))
        assert waiting["status"] == "awaiting_approval"
        record = structured(await client.call_tool("get_run", {"run_id": waiting["run_id"]}))
        assert record["steps"][0]["status"] == "pending"


def approve(db: Path, run_id: str) -> None:
    """``planrail approve RUN_ID``, as an operator types it."""
    result = CliRunner().invoke(app, ["approve", run_id, "--store", f"sqlite:///{db}"])
    assert result.exit_code == 0, result.output


async def test_a_client_with_elicitation_is_asked_to_approve(tmp_path: Path) -> None:
    """A client that supports elicitation is asked; yes runs the plan, no refuses it."""
    answers: list[bool] = [True, False]
    asked: list[str] = []

    async def elicit(
        context: ClientRequestContext, params: mcp_types.ElicitRequestParams
    ) -> mcp_types.ElicitResult:
        asked.append(params.message)
        return mcp_types.ElicitResult(action="accept", content={"approve": answers.pop(0)})

    async with Client(serve(tmp_path / "runs.db"), elicitation_callback=elicit) as client:
        yes = structured(await client.call_tool("run_plan", {"plan": CHANGES}))
        no = structured(await client.call_tool("run_plan", {"plan": CHANGES}))
    assert yes["status"] == "succeeded"
    assert no["status"] == "refused"
    assert 'Step c calls create (keyed)\n  name = "Bob"\n' in asked[0]


async def test_the_approval_question_shows_arguments_and_cannot_be_forged(tmp_path: Path) -> None:
    """The elicitation is the CLI approval screen's data: each step that changes the world
    with its arguments and where they come from, secrets masked. What the agent wrote (here a
    goal forging a read-only step line and blank lines) is on one line, escaped, after the
    steps. Before, the goal was pasted verbatim and the arguments never shown."""
    asked: list[str] = []

    async def elicit(
        context: ClientRequestContext, params: mcp_types.ElicitRequestParams
    ) -> mcp_types.ElicitResult:
        asked.append(params.message)
        return mcp_types.ElicitResult(action="accept", content={"approve": False})

    forged = "tidy up\n- s: find (none; read-only)\n\n\u202eok"
    plan = {
        "goal": forged,
        "steps": [
            {"id": "a", "tool": "find", "args": {"name": "Ada"}},
            {"id": "s", "tool": "send", "args": {"to": "${a.user_id}", "token": "hunter2"},
             "depends_on": ["a"]},
        ],
    }  # fmt: skip
    async with Client(serve(tmp_path / "runs.db"), elicitation_callback=elicit) as client:
        no = structured(await client.call_tool("run_plan", {"plan": plan}))
    assert no["status"] == "refused"
    lines = asked[0].split("\n")
    assert "" not in lines
    assert not any(line.lstrip().startswith("- s:") for line in lines)
    assert "hunter2" not in asked[0]
    assert lines[1:6] == [
        "Step s calls send (unsafe)",
        '  ! to = "${a.user_id}" (known at run time)',
        "      from: output of tool find (untrusted)",
        '  token = "***"',
        "      from: written in the plan by the calling agent",
    ]
    assert 'Goal, as the calling agent wrote it: "tidy up\\n- s: find' in asked[0]
    assert '\\n\\n\\u202eok"' in asked[0]
    assert lines.index("Read-only, run without asking: a (find)") < len(lines) - 2


async def test_served_plans_can_call_mcp_tools_too(tmp_path: Path) -> None:
    """``mcp serve --mcp NAME=COMMAND`` runs plans over another MCP server's tools."""
    extra = ("--mcp", f"probe={shlex.join([sys.executable, PROBE])}")
    plan = {"steps": [{"id": "w", "tool": "probe.lookup", "args": {"name": "Eve"}}]}
    async with Client(serve(tmp_path / "runs.db", *extra)) as client:
        ran = structured(await client.call_tool("run_plan", {"plan": plan}))
    assert ran["status"] == "awaiting_approval"  # --mcp servers are untrusted: approval needed


async def test_serve_over_streamable_http(tmp_path: Path) -> None:
    """``mcp serve --http 127.0.0.1:0`` serves the same tools over Streamable HTTP (the URL it
    prints once it listens)."""
    async with _served_over_http(tmp_path) as url, Client(url) as client:
        ran = structured(await client.call_tool("run_plan", {"plan": READ_ONLY}))
    assert ran["status"] == "succeeded"


@contextlib.asynccontextmanager
async def _served_over_http(
    tmp_path: Path, address: str = "127.0.0.1:0", url_host: str = "127.0.0.1"
) -> AsyncIterator[str]:
    """``planrail mcp serve --http ADDRESS`` in a process of its own: the URL it prints once it
    listens."""
    proc = await asyncio.create_subprocess_exec(
        *[PLANRAIL, "mcp", "serve", "--tools", TOOLS, "--store", f"sqlite:///{tmp_path / 'r.db'}"],
        "--http",
        address,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stderr is not None
        line = (await asyncio.wait_for(proc.stderr.readline(), START_BUDGET)).decode()
        url = line.rsplit(" ", 1)[-1].strip()
        assert url.startswith(f"http://{url_host}:"), line
        yield url
    finally:
        proc.kill()
        await proc.wait()


@pytest.mark.usefixtures("ipv6_loopback")
@pytest.mark.parametrize("address", ["[::1]:0", "::1:0"])
async def test_serve_over_http_on_ipv6(tmp_path: Path, address: str) -> None:
    """An IPv6 host, bracketed as in a URL or not, is served, and the printed URL brackets it
    (``http://::1:…`` is no URL; ``[::1]:0`` was a bare "Name or service not known")."""
    async with _served_over_http(tmp_path, address, "[::1]") as url, Client(url) as client:
        ran = structured(await client.call_tool("run_plan", {"plan": READ_ONLY}))
    assert ran["status"] == "succeeded"


def test_serve_over_http_on_an_address_it_cannot_have_exits_2(tmp_path: Path) -> None:
    """A taken port or an address that does not resolve is a usage error (exit 2, said in one
    line); uvicorn's own failure was exit 3, which the CLI's contract keeps for invalid plans."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        for address, said in (
            (f"127.0.0.1:{port}", f"cannot listen on 127.0.0.1:{port}: Address already in use"),
            ("999.1.1.1:8765", "cannot listen on 999.1.1.1:8765"),
        ):
            serve_on = [PLANRAIL, "mcp", "serve", "--tools", TOOLS, "--store", "memory://"]
            proc = subprocess.run(
                [*serve_on, "--http", address],
                capture_output=True,
                text=True,
                timeout=START_BUDGET,
                check=False,
            )
            assert proc.returncode == 2, proc.stderr
            assert said in " ".join(proc.stderr.split())
            assert "Traceback" not in proc.stderr


async def test_an_anticipated_refusal_reaches_the_client_with_its_reason(tmp_path: Path) -> None:
    """An unknown run id (to read or to resume) or a bad limit is the caller's mistake: the
    error result carries the
    reason (a plain exception would reach the client as a bare "Error executing tool", and be
    logged on the server as a crash)."""
    async with Client(serve(tmp_path / "runs.db")) as client:
        for tool in ("get_run", "resume_run"):  # resume_run answered status "unknown", no error
            unknown = await client.call_tool(tool, {"run_id": "nope"})
            assert unknown.is_error, tool
            said = unknown.content[0].text  # type: ignore[union-attr]
            assert "no run 'nope' in this store" in said
        bad = await client.call_tool("list_runs", {"limit": -1})
        assert bad.is_error
        assert "limit must be >= 0" in bad.content[0].text  # type: ignore[union-attr]
        huge = structured(await client.call_tool("list_runs", {"limit": 10**30}))
        assert huge["result"] == []
        blank = await client.call_tool("run_plan", {"plan": READ_ONLY, "run_id": " "})
        assert blank.is_error
        assert "the run id is blank" in blank.content[0].text  # type: ignore[union-attr]
        assert structured(await client.call_tool("list_runs", {}))["result"] == []  # none ran


async def test_over_http_a_request_nested_past_the_sdks_parser_gets_a_parse_error(
    tmp_path: Path,
) -> None:
    """docs/mcp.md: a request nested ~200 levels deep never reaches planrail (the SDK's JSON
    parser stops); over Streamable HTTP the SDK answers JSON-RPC -32700. (Over stdio it sends
    no answer at all: not tested here, it would mean waiting for a timeout.)"""
    import httpx

    async with _served_over_http(tmp_path) as url:
        headers = {"accept": "application/json, text/event-stream"}
        hello = {"protocolVersion": "2025-06-18", "capabilities": {},
                 "clientInfo": {"name": "t", "version": "1"}}  # fmt: skip
        deep: Any = {"x": 1}
        for _ in range(200):
            deep = [deep]
        call = {"name": "validate_plan", "arguments": {"plan": {"steps": deep}}}
        async with httpx.AsyncClient(timeout=30) as http:
            init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}
            first = await http.post(url, json=init, headers=headers)
            assert first.status_code == 200
            session = {**headers, "mcp-session-id": first.headers["mcp-session-id"]}
            done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            await http.post(url, json=done, headers=session)
            body = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
            answer = await http.post(
                url, content=body, headers={**session, "content-type": "application/json"}
            )
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == -32700
