"""``planrail show`` and ``planrail graph`` on the command line, and ``run --trace``."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from planrail.cli.app import app

from .test_graph import demo_edges, parse_dot, parse_mermaid

DEMO_PLAN = str(resources.files("planrail.demo").joinpath("plan.json"))

SECRET_TOOLS = """
import planrail

@planrail.tool(side_effects="none", secret_params=["password"])
def login(user: str, password: str) -> dict:
    return {"session": "s-" + user}

@planrail.tool(side_effects="none")
def connect(session: str, api_key: str) -> dict:
    return {"ok": True}
"""

SECRET_PLAN = {
    "steps": [
        {"id": "login", "tool": "login", "args": {"user": "alice", "password": "hunter2"}},
        {
            "id": "connect",
            "tool": "connect",
            "args": {"session": "${login.session}", "api_key": "sk-live-1234"},
            "depends_on": ["login"],
        },
    ]
}


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Invoke ``planrail`` with a SQLite store and demo CRM in ``tmp_path`` and no latency."""
    monkeypatch.setenv("PLANRAIL_STORE", f"sqlite:///{tmp_path / 'store.db'}")
    monkeypatch.setenv("PLANRAIL_DEMO_CRM", str(tmp_path / "crm.sqlite"))
    monkeypatch.setenv("COLUMNS", "120")
    from planrail.demo import onboarding

    monkeypatch.setattr(onboarding, "LATENCY", 0.0)
    runner = CliRunner()

    def invoke(*args: str, code: int = 0) -> str:
        result = runner.invoke(app, list(args), catch_exceptions=False)
        assert result.exit_code == code, result.output
        return result.stdout

    return invoke


def demo_run(cli: Any, tmp_path: Path) -> str:
    """Run the demo plan as ``r1`` with a trace; return its ``--json`` output."""
    trace = str(tmp_path / "t.jsonl")
    return str(
        cli(
            "run",
            DEMO_PLAN,
            "--tools",
            "planrail.demo.onboarding",
            "--yes",
            "--run-id",
            "r1",
            "--trace",
            trace,
            "--json",
        )
    )


def test_show_json_equals_the_runs_own_json(cli: Any, tmp_path: Path) -> None:
    """``show --json`` from the store and from the trace print what ``run --json`` printed."""
    ran = json.loads(demo_run(cli, tmp_path))
    assert ran["status"] == "succeeded"
    assert json.loads(cli("show", "r1", "--json")) == ran
    assert json.loads(cli("show", "--trace", str(tmp_path / "t.jsonl"), "--json")) == ran


def test_show_from_trace_equals_show_from_store(cli: Any, tmp_path: Path) -> None:
    """The human view (summary, step table, timeline, output) is the same from both sources."""
    demo_run(cli, tmp_path)
    text = cli("show", "r1")
    assert text == cli("show", "--trace", str(tmp_path / "t.jsonl"))
    assert "run r1  succeeded" in text
    assert "steps    5: 5 succeeded   retries 0" in text
    for sid in ("price", "account", "subscription", "workspace", "welcome"):
        assert sid in text
    assert "timeline" in text
    assert "█" in text


def test_show_step_gives_inputs_output_and_attempts(cli: Any, tmp_path: Path) -> None:
    """``--step``: resolved inputs (references filled), output and the attempt history."""
    ran = json.loads(demo_run(cli, tmp_path))
    detail = json.loads(cli("show", "r1", "--step", "subscription", "--json"))
    account = next(s for s in ran["steps"] if s["id"] == "account")
    assert detail["inputs"]["user_id"] == account["output"]["user_id"]
    assert detail["output"] == next(s for s in ran["steps"] if s["id"] == "subscription")["output"]
    assert detail["idempotency_key"] == "r1:subscription"
    assert detail["depends_on"] == ["account", "price"]
    assert [e["type"] for e in detail["events"]] == ["step_started", "step_succeeded"]
    text = cli("show", "r1", "--step", "subscription")
    assert "create_subscription" in text
    assert account["output"]["user_id"] in text
    assert "unknown step" not in cli("show", "r1", "--step", "nope", code=2)


def test_show_step_redacts_secrets(cli: Any, tmp_path: Path) -> None:
    """Declared secret parameters, and parameters named like secrets, are shown as ``***``."""
    tools = tmp_path / "secret_tools.py"
    tools.write_text(SECRET_TOOLS)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(SECRET_PLAN))
    trace = tmp_path / "s.jsonl"
    cli(
        "run",
        str(plan),
        "--tools",
        str(tools),
        "--yes",
        "--run-id",
        "s1",
        "--trace",
        str(trace),
        "-q",
    )
    for source in (("s1", "--tools", str(tools)), ("--trace", str(trace))):
        login = json.loads(cli("show", *source, "--step", "login", "--json"))
        assert login["inputs"] == {"user": "alice", "password": "***"}
        connect = json.loads(cli("show", *source, "--step", "connect", "--json"))
        assert connect["inputs"] == {"session": "s-alice", "api_key": "***"}
        text = cli("show", *source, "--step", "login")
        assert "hunter2" not in text
    assert "hunter2" not in trace.read_text()
    assert "sk-live-1234" not in cli("show", "s1", "--step", "connect")


def test_show_errors_are_usage_errors(cli: Any, tmp_path: Path) -> None:
    """Unknown run, no run id, unreadable trace: exit 2 with a one-line reason."""
    cli("show", "nope", code=2)
    cli("show", code=2)
    cli("show", "--trace", str(tmp_path / "missing.jsonl"), code=2)


def test_graph_of_plan_run_and_trace(cli: Any, tmp_path: Path) -> None:
    """Mermaid of the plan file; DOT of the run by id, coloured; SVG of the trace to a file."""
    _nodes, edges = parse_mermaid(cli("graph", DEMO_PLAN))
    assert edges == demo_edges()
    demo_run(cli, tmp_path)
    dot = cli("graph", "r1", "--format", "dot")
    assert parse_dot(dot)[1] == demo_edges()
    assert dot.count('fillcolor="#e6f4ea"') == 5
    out = tmp_path / "g.svg"
    cli("graph", str(tmp_path / "t.jsonl"), "-f", "svg", "-o", str(out))
    assert out.read_text().startswith("<?xml")


def test_graph_of_an_invalid_plan_or_unknown_target(cli: Any, tmp_path: Path) -> None:
    """An invalid plan exits 3 (as validate does); a name that is neither file nor run, 2."""
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"steps": [{"id": "a", "tool": "t", "depends_on": ["zz"]}]}))
    cli("graph", str(bad), code=3)
    cli("graph", "no_such_run", code=2)


def test_graph_output_that_cannot_be_written_is_a_usage_error(cli: Any, tmp_path: Path) -> None:
    """``-o`` into a folder that does not exist, or onto a folder: exit 2 naming it, no
    traceback (the graph was drawn; only the file could not be written)."""
    for target in (tmp_path / "no" / "such" / "g.svg", tmp_path):
        said = CliRunner().invoke(app, ["graph", DEMO_PLAN, "-f", "svg", "-o", str(target)])
        assert said.exit_code == 2, said.output
        assert said.exception is None or isinstance(said.exception, SystemExit)
        assert f"--output {target}" in " ".join(said.output.split())


def test_otel_variables_without_the_extra_are_a_usage_error(
    cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OTEL_TRACES_EXPORTER set but OpenTelemetry missing: exit 2 with the install command."""
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    monkeypatch.delitem(sys.modules, "opentelemetry.trace", raising=False)
    runner = CliRunner()
    result = runner.invoke(
        app, ["run", DEMO_PLAN, "--tools", "planrail.demo.onboarding", "--yes", "-q"]
    )
    assert result.exit_code == 2
    assert "pip install 'planrail[otel]'" in result.output
