"""``planrail plan "GOAL"`` end to end against the local server (real openai SDK)."""

from __future__ import annotations

import gc
import json
import warnings
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from planrail.cli.app import app
from planrail.testing.llm_server import LLMTestServer, Reply

from .plans import GOAL, good_plan

TOOLS = '''
from pydantic import BaseModel
import planrail

LOG = {log!r}


def _log(name):
    with open(LOG, "a") as f:
        f.write(name + "\\n")


class SearchResult(BaseModel):
    titles: list[str]
    top: str


class Account(BaseModel):
    user_id: str
    name: str


class Sent(BaseModel):
    message_id: str


@planrail.tool(side_effects="none")
def search(query: str) -> SearchResult:
    """Search papers."""
    _log("search")
    return SearchResult(titles=[query + " 1"], top=query + " 1")


@planrail.tool(side_effects="keyed")
def create_account(name: str, email: str) -> Account:
    """Create an account."""
    _log("create_account")
    return Account(user_id="u_1", name=name)


@planrail.tool
def send_email(user_id: str, subject: str, body: str) -> Sent:
    """Send an email."""
    _log("send_email")
    return Sent(message_id="m_1")
'''


def _tools(tmp_path: Path) -> tuple[Path, Path]:
    log = tmp_path / "calls.log"
    module = tmp_path / "cli_tools.py"
    module.write_text(TOOLS.format(log=str(log)))
    return module, log


def _plan(module: Path, server: LLMTestServer, *more: str) -> Any:
    """``planrail plan GOAL`` with these tools, against the test server's model."""
    args = ["plan", GOAL, "--tools", str(module), "--model", "openai:test-model"]
    return CliRunner().invoke(app, [*args, "--base-url", server.url, *more])


def _calls(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []


def test_plan_refused_exits_4_and_calls_no_tool(tmp_path: Path, server: LLMTestServer) -> None:
    """Without --yes and without a terminal to ask on, approval is refused: exit 4, the plan
    is shown, and no tool was called (streaming off: nothing may start early)."""
    module, log = _tools(tmp_path)
    server.add(Reply.json(good_plan()))
    result = _plan(module, server, "--no-stream")
    assert result.exit_code == 4, result.output
    assert "approval refused" in result.output
    assert "acct" in result.output
    assert "written by the planner model" in result.output  # the approval screen
    assert _calls(log) == []


def test_plan_yes_json_runs_the_plan(tmp_path: Path, server: LLMTestServer) -> None:
    """With --yes --json the plan runs and one JSON object reports run, plan and usage."""
    module, log = _tools(tmp_path)
    server.add(Reply.json(good_plan()), "A summary.")
    args = ["plan", GOAL, "--tools", str(module), "--model", "openai:test-model"]
    args += ["--base-url", server.url, "--yes", "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["status"] == "succeeded"
    assert data["output"] == {"message": "m_1"}
    assert {s["id"] for s in data["steps"]} == {"find", "summary", "acct", "mail"}
    assert data["usage"]["calls"] == 2
    assert data["planning"][0]["kind"] == "plan"
    assert sorted(_calls(log)) == ["create_account", "search", "send_email"]
    assert server.completions[0].stream  # streamed by default


def test_plan_invalid_after_repairs_exits_3(tmp_path: Path, server: LLMTestServer) -> None:
    """A model that never writes a valid plan: exit 3, nothing executed."""
    module, log = _tools(tmp_path)
    bad = {"goal": GOAL, "steps": [{"id": "x", "tool": "nope", "args": {}}]}
    server.add(*[Reply.json(bad)] * 2)
    args = ["plan", GOAL, "--tools", str(module), "--model", "test-model", "--yes"]
    args += ["--base-url", server.url, "--max-repairs", "1", "--no-stream"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 3, result.output
    assert "unknown_tool" in result.output
    assert _calls(log) == []


def test_plan_budget_exceeded_exits_1(tmp_path: Path, server: LLMTestServer) -> None:
    """Passing the token budget stops the run with exit 1 and says which budget."""
    module, _ = _tools(tmp_path)
    server.add(Reply.json(good_plan()), Reply("A summary.", input_tokens=10_000))
    args = ["plan", GOAL, "--tools", str(module), "--model", "test-model", "--yes"]
    args += ["--base-url", server.url, "--max-input-tokens", "5000"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    assert "input token budget is exceeded" in result.output


@pytest.mark.parametrize("cost", ["inf", "nan", "-1"])
def test_a_budget_no_spend_could_reach_is_a_usage_error(
    tmp_path: Path, server: LLMTestServer, cost: str
) -> None:
    """``--max-cost inf`` (and nan, -1) is exit 2 with one line, before the model is asked
    (inf passed typer's min=0 and reached Budget, whose refusal was a traceback)."""
    module, _ = _tools(tmp_path)
    result = _plan(module, server, "--max-cost", cost, "--yes")
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert server.completions == []


def test_plan_without_tools_is_a_usage_error() -> None:
    """--tools is required: exit 2."""
    result = CliRunner().invoke(app, ["plan", GOAL, "--model", "test-model"])
    assert result.exit_code == 2


def test_plan_generation_options_reach_the_server(tmp_path: Path, server: LLMTestServer) -> None:
    """--max-tokens, --temperature, --seed and --prompt compact shape the request; --json
    records each attempt's raw answer, the structured-output form and the prompt mode."""
    module, _log = _tools(tmp_path)
    plan = {"steps": [{"id": "s", "tool": "search", "args": {"query": "q"}, "depends_on": []}]}
    server.add(Reply.json(plan))
    args = ["plan", GOAL, "--tools", str(module), "--model", "test-model", "--yes", "--json"]
    args += ["--base-url", server.url, "--no-stream", "--max-tokens", "321", "--seed", "5"]
    args += ["--temperature", "0", "--prompt", "compact", "--timeout", "30"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    body = server.completions[0].body
    assert (body["max_tokens"], body["seed"], body["temperature"]) == (321, 5, 0)
    assert body["messages"][0]["content"].startswith("Write a plan as JSON")
    planning = json.loads(result.output)["planning"]
    assert planning[0]["structured"] == "json_schema"
    assert planning[0]["prompt"] == "compact"
    assert json.loads(planning[0]["raw"]) == plan


def _placeholder_plan() -> dict[str, object]:
    plan = good_plan()
    plan["steps"][3]["args"]["user_id"] = "<USER_ID>"  # type: ignore[index]
    return plan


def test_plan_shows_the_models_plan_warnings_before_the_approval_screen(
    tmp_path: Path, server: LLMTestServer
) -> None:
    """A placeholder the model wrote is shown as ``planrail run`` shows a plan file's, before
    the person is asked: they approve (or not) knowing it runs as written."""
    module, log = _tools(tmp_path)
    server.add(Reply.json(_placeholder_plan()))
    result = _plan(module, server, "--no-stream")
    assert result.exit_code == 4, result.output
    warning = result.output.index("warning [placeholder_literal] step 'mail'")
    assert warning < result.output.index("approval needed")
    assert "$.steps[3].args.user_id" in result.output
    assert _calls(log) == []


def test_plan_strict_has_the_model_repair_a_placeholder(
    tmp_path: Path, server: LLMTestServer
) -> None:
    """With --strict the placeholder is an error of the plan: the model is asked to repair
    it, and the repaired plan runs (the run refused the accepted plan with a traceback)."""
    module, log = _tools(tmp_path)
    policy = tmp_path / "policy.json"
    everything = [{"tool": "*", "action": "allow"}, {"arg": "*", "from": ["*"], "action": "allow"}]
    policy.write_text(json.dumps({"strict": True, "rules": everything}))
    server.add(Reply.json(_placeholder_plan()), Reply.json(good_plan()), "A summary.")
    result = _plan(module, server, "--policy", str(policy), "--yes", "--json", "--no-stream")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [a["kind"] for a in data["planning"]] == ["plan", "repair"]
    assert data["planning"][0]["issues"][0]["code"] == "placeholder_literal"
    assert sorted(_calls(log)) == ["create_account", "search", "send_email"]


def test_max_steps_bounds_the_schema_sent_and_the_answer(
    tmp_path: Path, server: LLMTestServer
) -> None:
    """``--max-steps 2``: the request's schema allows two steps, and a four-step answer (the
    server does not enforce the schema) is sent back, then the two-step repair runs."""
    module, log = _tools(tmp_path)
    two = {"steps": [{"id": "s", "tool": "search", "args": {"query": "q"}, "depends_on": []}]}
    server.add(Reply.json(good_plan()), Reply.json(two))
    result = _plan(module, server, "--max-steps", "2", "--yes", "--no-stream", "--json")
    assert result.exit_code == 0, result.output
    schema = server.completions[0].body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["steps"]["maxItems"] == 2
    planning = json.loads(result.stdout)["planning"]
    assert planning[0]["issues"][0]["code"] == "limit_exceeded"
    assert _calls(log) == ["search"]
    assert _plan(module, server, "--max-steps", "0").exit_code == 2


def test_a_streamed_plan_nobody_could_approve_is_stored_for_planrail_approve(
    tmp_path: Path, server: LLMTestServer
) -> None:
    """With no terminal to ask on, ``planrail plan`` (streamed, its default) exits 4, and the
    run is stored for ``planrail approve RUN_ID`` (it used to be stored only with
    ``--no-stream``: approve said there was no such run); the resume runs the rest."""
    module, log = _tools(tmp_path)
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    server.add(Reply.json(good_plan()), "A summary.")
    result = _plan(module, server, "--store", store, "--run-id", "R")
    assert result.exit_code == 4, result.output
    assert server.completions[0].stream
    early = _calls(log)
    assert "create_account" not in early
    assert "send_email" not in early

    cli = CliRunner()
    approved = cli.invoke(app, ["approve", "R", "--store", store])
    assert approved.exit_code == 0, approved.output
    model = ["--model", "openai:test-model", "--base-url", server.url]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        resumed = cli.invoke(app, ["resume", "R", "--tools", str(module), "--store", store, *model])
        code, output = resumed.exit_code, resumed.output
        del resumed  # its traceback holds the command's frames, and the client in them
        gc.collect()
    assert code == 0, output
    unclosed = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert unclosed == [], "resume --model closes the client it made"
    calls = _calls(log)
    assert calls.count("create_account") == 1
    assert calls.count("send_email") == 1
    assert calls[-1] == "send_email"
