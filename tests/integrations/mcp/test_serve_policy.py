"""``planrail mcp serve --policy FILE --strict``: the runs ``run_plan`` and ``resume_run`` make
run under that security policy, stored with the run as every other door stores it. Judged from
the tools' own ledger (a line per call that really happened), over stdio with the SDK's client.
Before, ``mcp serve`` had neither option: every served run ran with no policy at all."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mcp_types
from mcp import Client, StdioServerParameters
from mcp.client.session import ClientRequestContext

from planrail.store import open_store

from .test_serve import PLANRAIL, approve, structured

TOOLS = '''
import planrail

LEDGER = {ledger!r}


def _called(line: str) -> None:
    with open(LEDGER, "a") as f:
        f.write(line + "\\n")


@planrail.tool(side_effects="none")
def look(name: str) -> str:
    """Read-only."""
    _called(f"look {{name}}")
    return name


@planrail.tool(side_effects="none")
def leak(text: str) -> str:
    """Read-only, and denied by the policy."""
    _called(f"leak {{text}}")
    return text


@planrail.tool(side_effects="keyed")
def create(name: str) -> str:
    """Changes the world (honours its key)."""
    _called(f"create {{name}}")
    return name
'''

POLICY = {"rules": [{"tool": "leak", "action": "deny"}, {"tool": "create", "action": "deny"}],
          "max_tool_calls": 2}  # fmt: skip
LEAK = {"steps": [{"id": "l", "tool": "leak", "args": {"text": "the files"}}]}
THREE_LOOKS = {"steps": [{"id": f"s{i}", "tool": "look", "args": {"name": f"n{i}"}} for i in "012"]}
CREATE = {"steps": [{"id": "c", "tool": "create", "args": {"name": "Bob"}}]}


class Served:
    """A store, a tools file writing a ledger, and a policy file, in ``tmp_path``."""

    def __init__(self, tmp_path: Path) -> None:
        self.db = tmp_path / "runs.db"
        self.ledger = tmp_path / "ledger.txt"
        self.tools = tmp_path / "policy_tools.py"
        self.tools.write_text(TOOLS.format(ledger=str(self.ledger)))
        self.policy = tmp_path / "policy.json"
        self.policy.write_text(json.dumps(POLICY))

    def serve(self, *extra: str) -> StdioServerParameters:
        store = f"sqlite:///{self.db}"
        args = ["mcp", "serve", "--tools", str(self.tools), "--store", store, *extra]
        return StdioServerParameters(command=PLANRAIL, args=args)

    def calls(self) -> list[str]:
        """What the tools were really called with, in order."""
        return self.ledger.read_text().splitlines() if self.ledger.exists() else []

    def stored_security(self, run_id: str) -> Any:
        record = open_store(f"sqlite:///{self.db}", create=False).get_run(run_id)
        assert record is not None
        return record.metadata["policies"]["security"]


async def _approve_all(
    context: ClientRequestContext, params: mcp_types.ElicitRequestParams
) -> mcp_types.ElicitResult:
    return mcp_types.ElicitResult(action="accept", content={"approve": True})


async def test_run_plan_runs_under_the_policy(tmp_path: Path) -> None:
    """A denied tool is never called (its step fails with the policy's reason), and
    ``max_tool_calls: 2`` lets two of three calls happen; the policy is stored with each run.
    The same plans on a server without ``--policy`` call every tool."""
    served = Served(tmp_path)
    async with Client(served.serve("--policy", str(served.policy))) as client:
        denied = structured(await client.call_tool("run_plan", {"plan": LEAK}))
        capped = structured(await client.call_tool("run_plan", {"plan": THREE_LOOKS}))
    assert denied["status"] == "failed"
    assert "calling 'leak' is denied" in denied["error"]
    assert capped["status"] == "failed"
    calls = served.calls()
    assert len(calls) == 2  # two of the three looks (they run at once: which two is open)
    assert set(calls) < {"look n0", "look n1", "look n2"}
    for ran in (denied, capped):
        stored = served.stored_security(ran["run_id"])
        assert stored["max_tool_calls"] == 2
        assert [r["tool"] for r in stored["rules"]] == ["leak", "create"]

    served.ledger.unlink()
    async with Client(served.serve()) as client:  # the control: no policy, every call made
        for plan in (LEAK, THREE_LOOKS):
            ran = structured(await client.call_tool("run_plan", {"plan": plan}))
            assert ran["status"] == "succeeded"
    assert sorted(served.calls()) == ["leak the files", "look n0", "look n1", "look n2"]


async def test_strict_denies_what_no_rule_allows_and_refuses_placeholders(tmp_path: Path) -> None:
    """``--strict`` alone: an approved side-effecting call no ``allow`` rule names is denied
    (default-deny), and a placeholder literal in its arguments makes the plan invalid, for
    ``validate_plan`` and ``run_plan`` alike."""
    served = Served(tmp_path)
    placeholder = {"steps": [{"id": "c", "tool": "create", "args": {"name": "<user_name>"}}]}
    async with Client(served.serve("--strict"), elicitation_callback=_approve_all) as client:
        ran = structured(await client.call_tool("run_plan", {"plan": CREATE}))
        checked = structured(await client.call_tool("validate_plan", {"plan": placeholder}))
        refused = structured(await client.call_tool("run_plan", {"plan": placeholder}))
    assert ran["status"] == "failed"
    assert "calling 'create' is denied" in ran["error"]
    assert checked["valid"] is False
    assert refused["status"] == "invalid"
    assert served.calls() == []
    assert served.stored_security(ran["run_id"])["strict"] is True


async def test_resume_run_runs_under_the_policy_stored_with_the_run(tmp_path: Path) -> None:
    """A run started under the policy (stored ``awaiting_approval``) and approved by an
    operator is resumed by a server started *without* ``--policy``: the stored policy still
    denies its call. A run started without a policy is not resumed under one unasked (as
    ``planrail resume --policy`` refuses it): the caller reads why."""
    served = Served(tmp_path)
    async with Client(served.serve("--policy", str(served.policy))) as client:
        waiting = structured(await client.call_tool("run_plan", {"plan": CREATE}))
    assert waiting["status"] == "awaiting_approval"
    approve(served.db, waiting["run_id"])
    async with Client(served.serve()) as client:
        resumed = structured(await client.call_tool("resume_run", {"run_id": waiting["run_id"]}))
    assert resumed["status"] == "failed"
    assert "calling 'create' is denied" in resumed["error"]
    assert served.calls() == []

    async with Client(served.serve()) as client:
        plain = structured(await client.call_tool("run_plan", {"plan": CREATE}))
    approve(served.db, plain["run_id"])
    async with Client(served.serve("--policy", str(served.policy))) as client:
        result = await client.call_tool("resume_run", {"run_id": plain["run_id"]})
    assert result.is_error
    assert "started under another security policy" in result.content[0].text  # type: ignore[union-attr]
    assert served.calls() == []
