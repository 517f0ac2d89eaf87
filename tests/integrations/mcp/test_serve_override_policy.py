"""``planrail mcp serve --override-policy``: ``resume_run`` of a run started under another
security policy is refused (``[policy_mismatch]``, an ``isError`` answer, no traceback) unless
the server overrides it, which the run records as a ``policy_overridden`` event, as
``planrail resume --override-policy`` does. Judged from the store (events, steps, the stored
policy) and from the tools' own ledger, over stdio with the SDK's client. Before, ``mcp serve``
had no such option: a run started under one policy never resumed under another."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import stdio_client

from planrail.store import open_store

from .test_serve import approve, structured
from .test_serve_policy import CREATE, Served

OPEN = {"rules": []}
"""A policy that denies nothing: under it the ``create`` that the test's POLICY denies runs."""


def _open_policy(served: Served) -> str:
    path = served.policy.with_name("open.json")
    path.write_text(json.dumps(OPEN))
    return str(path)


def _stored(served: Served, run_id: str) -> dict[str, Any]:
    """What the store holds of the run: its status, its steps' states, its events' types,
    the ``policy_overridden`` events' data and the security policy stored with it."""
    store = open_store(f"sqlite:///{served.db}", create=False)
    record = store.get_run(run_id)
    assert record is not None
    events = store.events(run_id)
    return {
        "status": record.status,
        "steps": {sid: s.status for sid, s in store.get_steps(run_id).items()},
        "events": [e.type for e in events],
        "overridden": [e.data for e in events if e.type == "policy_overridden"],
        "security": record.metadata["policies"]["security"],
    }


async def _approved_under_the_policy(served: Served) -> str:
    """A run of CREATE started under the test's POLICY (which denies ``create``), stored
    ``awaiting_approval`` (the client has no elicitation), then approved by an operator."""
    async with Client(served.serve("--policy", str(served.policy))) as client:
        waiting = structured(await client.call_tool("run_plan", {"plan": CREATE}))
    assert waiting["status"] == "awaiting_approval"
    approve(served.db, waiting["run_id"])
    return str(waiting["run_id"])


async def test_resume_run_under_another_policy_is_refused_with_its_code(tmp_path: Path) -> None:
    """Without ``--override-policy`` a server under another policy refuses ``resume_run``: an
    ``isError`` answer whose reason starts with the stable code ``[policy_mismatch]`` and
    names the option, no traceback (in the answer or on the server's stderr); the store is as
    it was (no event, no step run, the stored policy kept) and no tool was called."""
    served = Served(tmp_path)
    run_id = await _approved_under_the_policy(served)
    before = _stored(served, run_id)
    stderr = tmp_path / "stderr.txt"
    with stderr.open("w") as errlog:
        params = served.serve("--policy", _open_policy(served))
        async with Client(stdio_client(params, errlog=errlog)) as client:
            result = await client.call_tool("resume_run", {"run_id": run_id})
    assert result.is_error
    said = result.content[0].text  # type: ignore[union-attr]
    refused = f"resume_run: [policy_mismatch] run '{run_id}' was started under another"
    assert refused in said
    assert "--override-policy" in said
    assert "Traceback" not in said + stderr.read_text()
    assert _stored(served, run_id) == before
    assert before["steps"] == {}  # no step has a record: none ran
    assert before["overridden"] == []
    assert served.calls() == []


async def test_override_policy_resumes_under_the_served_policy_and_records_it(
    tmp_path: Path,
) -> None:
    """With ``--override-policy`` the run resumes under the server's policy: the ``create``
    the stored policy denied is really called, once; the store records one
    ``policy_overridden`` event with both policies, before the run starts again, and keeps
    the server's policy with the run from then on."""
    served = Served(tmp_path)
    run_id = await _approved_under_the_policy(served)
    started_under = served.stored_security(run_id)
    assert started_under["max_tool_calls"] == 2
    params = served.serve("--policy", _open_policy(served), "--override-policy")
    async with Client(params) as client:
        resumed = structured(await client.call_tool("resume_run", {"run_id": run_id}))
    assert resumed["status"] == "succeeded"
    assert served.calls() == ["create Bob"]
    after = _stored(served, run_id)
    assert after["steps"] == {"c": "succeeded"}
    assert after["status"] == "succeeded"
    assert after["overridden"] == [
        {"policy": "security", "stored": started_under, "now": after["security"]}
    ]
    assert after["security"]["rules"] == []
    events = after["events"]
    assert events.index("policy_overridden") < events.index("run_started")


async def test_override_policy_changes_nothing_when_the_policy_is_the_same(
    tmp_path: Path,
) -> None:
    """``--override-policy`` overrides only a policy that differs: a server under the run's
    own policy, or under none, resumes it under the stored policy with no
    ``policy_overridden`` event, and that policy still denies the ``create``."""
    served = Served(tmp_path)
    for extra in (("--policy", str(served.policy)), ()):
        run_id = await _approved_under_the_policy(served)
        async with Client(served.serve(*extra, "--override-policy")) as client:
            resumed = structured(await client.call_tool("resume_run", {"run_id": run_id}))
        assert resumed["status"] == "failed", extra
        assert "calling 'create' is denied" in resumed["error"]
        after = _stored(served, run_id)
        assert after["overridden"] == []
        assert after["security"]["max_tool_calls"] == 2
        assert after["steps"] == {"c": "failed"}
    assert served.calls() == []


async def test_run_plan_of_a_stored_run_never_overrides_its_policy(tmp_path: Path) -> None:
    """``--override-policy`` is for ``resume_run`` only, as ``planrail resume`` has it and
    ``planrail run --run-id`` does not: ``run_plan`` of the same plan under the stored run's
    id is refused with ``[policy_mismatch]``, nothing recorded, nothing called."""
    served = Served(tmp_path)
    run_id = await _approved_under_the_policy(served)
    before = _stored(served, run_id)
    params = served.serve("--policy", _open_policy(served), "--override-policy")
    async with Client(params) as client:
        result = await client.call_tool("run_plan", {"plan": CREATE, "run_id": run_id})
    assert result.is_error
    assert "[policy_mismatch]" in result.content[0].text  # type: ignore[union-attr]
    assert _stored(served, run_id) == before
    assert served.calls() == []


async def test_a_strict_server_refuses_another_policys_plan_as_a_mismatch_first(
    tmp_path: Path,
) -> None:
    """A run started without a policy holds a placeholder in its side-effecting step's
    arguments, which ``--strict`` refuses. A strict server without ``--override-policy``
    refuses it as a policy mismatch — the plan is judged under the policy it would resume
    under, the stored one — (it answered ``invalid``, "no longer valid with these tools", with
    no issue, though the tools were the same); with the override it is ``invalid`` under the
    strict policy, with the issue's code. A server without ``--strict`` resumes it."""
    served = Served(tmp_path)
    placeholder = {"steps": [{"id": "c", "tool": "create", "args": {"name": "<user_name>"}}]}
    async with Client(served.serve()) as client:
        waiting = structured(await client.call_tool("run_plan", {"plan": placeholder}))
    run_id = waiting["run_id"]
    approve(served.db, run_id)
    async with Client(served.serve("--strict")) as client:
        refused = await client.call_tool("resume_run", {"run_id": run_id})
    assert refused.is_error
    assert "[policy_mismatch]" in refused.content[0].text
    async with Client(served.serve("--strict", "--override-policy")) as client:
        invalid = structured(await client.call_tool("resume_run", {"run_id": run_id}))
    assert invalid["status"] == "invalid"
    assert "under the strict security policy it resumes under" in invalid["error"]
    assert [(i["code"], i["step"]) for i in invalid["errors"]] == [("placeholder_literal", "c")]
    assert _stored(served, run_id)["steps"] == {}  # none ran
    assert served.calls() == []
    async with Client(served.serve()) as client:
        resumed = structured(await client.call_tool("resume_run", {"run_id": run_id}))
    assert resumed["status"] == "succeeded"
    assert served.calls() == ["create <user_name>"]
