"""``--mcp`` and ``--mcp-config`` on the command line, and the onboarding example over MCP."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cli.test_demo_and_examples import (
    EXAMPLE,
    REPO,
    check_crm,
    run_readme_command,
    subprocess_env,
)
from planrail.cli import app

from .conftest import PROBE, START_BUDGET

PROBE_OPT = f"probe={shlex.join([sys.executable, PROBE])}"


def two_steps(tmp_path: Path, first: dict[str, Any], second: str, name: str) -> Path:
    """A plan file: ``first``, then a ``probe.lookup`` step ``second`` given ``name``."""
    plan = tmp_path / "plan.json"
    then = {"id": second, "tool": "probe.lookup", "args": {"name": name},
            "depends_on": [first["id"]]}  # fmt: skip
    plan.write_text(json.dumps({"steps": [first, then]}))
    return plan


def test_the_onboarding_example_runs_end_to_end_over_its_mcp_server(tmp_path: Path) -> None:
    """The README's ``planrail run --mcp …`` command, run as is by the installed script from a
    clean directory holding ``examples/``, onboards exactly one customer through the MCP
    server."""
    (tmp_path / "examples").symlink_to(REPO / "examples", target_is_directory=True)
    crm = tmp_path / "crm.sqlite"
    env = subprocess_env(tmp_path, PLANRAIL_DEMO_LATENCY="0", PLANRAIL_DEMO_CRM=str(crm))
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    command = (
        "planrail run examples/onboarding/plan_mcp.json"
        ' --mcp crm="python examples/onboarding/mcp_server.py" --yes'
    )
    proc = run_readme_command(command, tmp_path, env, "--json")
    result = json.loads(proc.stdout)
    assert result["status"] == "succeeded"
    rows = check_crm(crm)
    assert result["output"]["user"] == rows["account"][0]


def test_the_mcp_plan_is_the_demo_plan_with_prefixed_tools() -> None:
    """``plan_mcp.json`` is ``plan.json`` with every tool called as ``crm.TOOL``."""
    plain = json.loads((EXAMPLE / "plan.json").read_text())
    over_mcp = json.loads((EXAMPLE / "plan_mcp.json").read_text())
    for step in plain["steps"]:
        step["tool"] = f"crm.{step['tool']}"
    assert over_mcp == plain


def test_validate_with_mcp_reports_a_wrong_output_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``validate --mcp`` checks references against the server's output schemas (exit 3)."""
    monkeypatch.setenv("PROBE_DIR", str(tmp_path))
    plan = two_steps(tmp_path, {"id": "who", "tool": "probe.lookup", "args": {"name": "A"}},
                     "b", "${who.nope}")  # fmt: skip
    result = CliRunner().invoke(app, ["validate", str(plan), "--mcp", PROBE_OPT, "--json"])
    assert result.exit_code == 3, result.output
    report = json.loads(result.stdout)
    assert [i["code"] for i in report["errors"]] == ["unknown_output_field"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--mcp", "probe"], "expected NAME=COMMAND"),
        (["--mcp", "a.b=python x.py"], "a server name starts with a letter or '_'"),
        (["--mcp", "9a=python x.py"], "at most 64 characters"),
        (["--mcp", f"x={sys.executable} -c 'import sys; sys.exit(3)'"], "could not be started"),
    ],
)
def test_a_bad_mcp_option_is_a_usage_error(tmp_path: Path, args: list[str], message: str) -> None:
    """A malformed ``--mcp`` or a server that cannot start exits 2 with one line saying why."""
    plan = tmp_path / "plan.json"
    plan.write_text('{"steps": [{"id": "a", "tool": "x.y"}]}')
    result = CliRunner().invoke(app, ["validate", str(plan), *args])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("http", "message"), [("nope", "HOST:PORT"), ("127.0.0.1:99999", "0 to 65535")]
)
def test_a_bad_http_address_for_serve_is_a_usage_error(
    tmp_path: Path, http: str, message: str
) -> None:
    """``mcp serve --http`` with no port, or one past 65535: exit 2 saying so, no traceback."""
    tools = tmp_path / "tools.py"
    tools.write_text("import planrail\n\n@planrail.tool\ndef t() -> int:\n    return 1\n")
    result = CliRunner().invoke(app, ["mcp", "serve", "--tools", str(tools), "--http", http])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_mcp_config_sets_per_server_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``--mcp-config`` file names servers with their options (``${NAME}`` in headers and env
    from the environment); unknown options are refused."""
    from planrail.integrations.mcp import load_config

    monkeypatch.setenv("PROBE_TOKEN", "t")

    good = tmp_path / "mcp.yaml"
    good.write_text(
        "servers:\n  crm:\n    command: python server.py --flag\n    trusted: true\n"
        "    call_timeout: 5\n    max_output_bytes: 2048\n    max_inflight: 2\n"
        "    env: {A: b}\n  web:\n    url: http://127.0.0.1:9/mcp\n"
        "    headers: {Authorization: 'Bearer ${PROBE_TOKEN}'}\n"
    )
    crm, web = load_config(good)
    assert crm.command == ("python", "server.py", "--flag")
    assert (crm.trusted, crm.call_timeout, crm.max_output_bytes, crm.max_inflight) == (
        True, 5.0, 2048, 2)  # fmt: skip
    assert dict(crm.env) == {"A": "b"}
    assert (web.url, dict(web.headers), web.trusted) == (
        "http://127.0.0.1:9/mcp", {"Authorization": "Bearer t"}, False)  # fmt: skip
    bad = tmp_path / "bad.json"
    bad.write_text('{"servers": {"s": {"command": "x", "trust": true}}}')
    result = CliRunner().invoke(app, ["validate", str(bad), "--mcp-config", str(bad)])
    assert result.exit_code == 2
    assert "unknown option(s) ['trust']" in result.output


def test_an_in_doubt_mcp_step_is_resolved_by_an_operator_and_resumed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server dies during a non-idempotent call: the run ends with the step ``in_doubt``
    (exit 1) and its dependent not started; ``resolve --retry`` then ``resume`` (same
    ``--mcp``, the stored approval's schema pins still matching) runs both."""
    monkeypatch.setenv("PROBE_DIR", str(tmp_path))
    plan = two_steps(tmp_path, {"id": "pay", "tool": "probe.charge", "args": {"label": "cli"}},
                     "then", "${pay.result}")  # fmt: skip
    store = ["--store", f"sqlite:///{tmp_path / 'runs.db'}"]
    cli = CliRunner()
    first = cli.invoke(
        app, ["run", str(plan), "--mcp", PROBE_OPT, "--yes", "--run-id", "r1", "--json", *store]
    )
    assert first.exit_code == 1, first.output
    steps = {s["id"]: s for s in json.loads(first.stdout)["steps"]}
    assert (steps["pay"]["status"], steps["then"]["status"]) == ("in_doubt", "pending")
    assert cli.invoke(app, ["resolve", "r1", "pay", "--retry", *store]).exit_code == 0
    again = cli.invoke(app, ["resume", "r1", "--mcp", PROBE_OPT, "--json", *store])
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["status"] == "succeeded"


def test_plan_with_mcp_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``planrail plan --mcp …``: the model plans with the MCP server's tools (``NAME.TOOL``,
    their schemas in the prompt) and the plan runs over the server."""
    from planrail.testing.llm_server import LLMTestServer, Reply

    monkeypatch.setenv("PROBE_DIR", str(tmp_path))
    plan = {
        "goal": "find Eve",
        "steps": [{"id": "w", "tool": "probe.lookup", "args": {"name": "Eve"}}],
        "output": "${w.user_id}",
    }
    with LLMTestServer() as server:
        server.add(Reply.json(plan))
        args = ["plan", "find Eve", "--mcp", PROBE_OPT, "--model", "openai:test-model"]
        args += ["--base-url", server.url, "--yes", "--json", "--no-stream"]
        result = CliRunner().invoke(app, args)
        prompt = json.dumps(server.completions[0].messages)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["output"] == "usr_eve"
    assert "probe.lookup" in prompt


def test_a_server_that_never_answers_is_a_usage_error_after_its_start_timeout(
    tmp_path: Path,
) -> None:
    """A stdio server that starts and then says nothing (it hangs, or prints something that
    is not JSON-RPC) stops the command after ``start_timeout``, saying so; before, planrail
    waited without end."""
    config = tmp_path / "servers.yaml"
    silent = [sys.executable, "-c", "import sys; sys.stdin.read()"]  # reads, never answers
    config.write_text(json.dumps({"servers": {"mute": {"command": silent, "start_timeout": 0.5}}}))
    plan = tmp_path / "plan.json"
    plan.write_text('{"steps": [{"id": "a", "tool": "mute.y"}]}')
    result = CliRunner().invoke(app, ["validate", str(plan), "--mcp-config", str(config)])
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.split())  # as one line, whatever the terminal's width
    assert "MCP server 'mute'" in said
    assert "no answer within 0.5 s (start_timeout)" in said


def test_lines_a_stdio_server_prints_before_the_protocol_are_one_line_each(tmp_path: Path) -> None:
    """A server printing a banner on stdout before the protocol: each such line is one warning
    line on stderr (the SDK logs it with its traceback, which Python's last-resort handler
    printed in full), and the command goes on. A subprocess: in-process, pytest's own log
    capture would hide the traceback."""
    plan = tmp_path / "plan.json"
    plan.write_text('{"steps": [{"id": "a", "tool": "probe.lookup", "args": {"name": "A"}}]}')
    proc = subprocess.run(
        [
            str(Path(sys.executable).with_name("planrail")),
            "validate",
            str(plan),
            "--mcp",
            PROBE_OPT,
        ],
        capture_output=True,
        text=True,
        timeout=START_BUDGET * 2,
        env={**os.environ, "PROBE_DIR": str(tmp_path), "PROBE_PRELUDE": "Starting v1\nready\n"},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(warnings) == 2, proc.stderr
    assert all(w.startswith("warning: mcp.client.stdio: Failed to parse") for w in warnings)
    assert "'Starting v1'" in warnings[0]


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ({"command": ["python", 5]}, "'command' must be a string or a list of strings"),
        ({"command": 5}, "'command' must be a string or a list of strings"),
        ({"command": {"a": 1}}, "'command' must be a string or a list of strings"),
        ({"command": "python x.py", "cwd": 5}, "'cwd' must be a directory's path"),
        ({"command": "x", "max_inflight": 0.5}, "'max_inflight' must be a positive whole"),
        ({"command": "x", "max_output_bytes": 0.5}, "'max_output_bytes' must be a positive"),
        ({"command": "x", "max_inflight": 0}, "'max_inflight' must be a positive whole"),
    ],
)
def test_a_config_entry_of_the_wrong_type_says_which_field(
    tmp_path: Path, entry: dict[str, Any], said: str
) -> None:
    """A wrong type is a usage error naming the field: a non-string command said "the command
    is empty", a numeric cwd reached the SDK (a pydantic dump as "could not be started"), and
    0.5 calls in flight or bytes of output became 0, which broke every call."""
    from planrail.errors import ToolLoadError
    from planrail.integrations.mcp import load_config

    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"servers": {"s": entry}}))
    with pytest.raises(ToolLoadError) as caught:
        load_config(config)
    assert f"server 's': {said}" in caught.value.message


def test_a_servers_url_credentials_and_query_are_never_shown(tmp_path: Path) -> None:
    """An HTTP server that cannot be reached is named by its URL without ``user:password@``
    and without its query string (an API key)."""
    plan = tmp_path / "plan.json"
    plan.write_text('{"steps": [{"id": "a", "tool": "raw.x"}]}')
    url = "http://alice:SECRET@127.0.0.1:1/mcp?api_key=KEY123"
    result = CliRunner().invoke(app, ["validate", str(plan), "--mcp", f"raw={url}"])
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.split())
    assert "MCP server 'raw' (http://127.0.0.1:1/mcp?…) could not be started" in said
    assert "SECRET" not in said
    assert "KEY123" not in said
