"""A stored run's plan is validated under the security policy it will run under. Resumed (or
run again under its id) with a policy that differs from the stored one, and no override, it is
refused as a policy mismatch; it used to be validated under the policy given, so a run started
without a policy whose side-effecting step holds a placeholder came back "no longer valid"
under ``--strict`` — the wrong reason, and no word of the override that would have said so."""

from __future__ import annotations

from pathlib import Path

import pytest

import planrail
from planrail.engine.approval import defer
from planrail.engine.checkpoint import PolicyMismatchError
from planrail.errors import PlanValidationError
from planrail.policies.security import SecurityPolicy
from planrail.store import open_store

CALLS: list[str] = []


@planrail.tool(side_effects="keyed")
def create(name: str) -> dict[str, str]:
    """Create an account."""
    CALLS.append(name)
    return {"id": "u1"}


PLAN = {"steps": [{"id": "c", "tool": "create", "args": {"name": "<user_name>"}}]}
STRICT = SecurityPolicy(strict=True)


@pytest.mark.parametrize("door", ["resume", "prepare"])
async def test_a_strict_resume_of_a_run_started_without_a_policy_is_a_mismatch(
    tmp_path: Path, door: str
) -> None:
    CALLS.clear()
    with open_store(f"sqlite:///{tmp_path / 'runs.db'}") as store:
        waiting = await planrail.prepare(
            PLAN, [create], store=store, run_id="R", approver=defer
        ).run()
        assert waiting.status == "awaiting_approval"

        def again(**options: object) -> planrail.Execution:
            if door == "resume":
                return planrail.resume("R", [create], store=store, approve=True, **options)
            return planrail.prepare(
                PLAN, [create], store=store, run_id="R", approve=True, **options
            )

        with pytest.raises(PolicyMismatchError, match="another security policy"):
            await again(security=STRICT).run()
        with pytest.raises(PlanValidationError) as invalid:
            again(security=STRICT, policy_override=True)
        assert [i.code for i in invalid.value.issues] == ["placeholder_literal"]
        assert CALLS == []
        done = await again().run()  # under the policy it started with: none
    assert done.status == "succeeded"
    assert CALLS == ["<user_name>"]
