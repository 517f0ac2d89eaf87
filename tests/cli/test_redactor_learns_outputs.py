"""A redactor learns a run's secret values from its step outputs in one place,
``Redactor.learn_outputs``: what ``planrail plan`` prints after its agent ran several
executions (``cli.common.redactor_for``), and what the replan prompt quotes of a failed step."""

from __future__ import annotations

from typing import Any

import planrail
from planrail.cli.common import redactor_for
from planrail.engine.result import RunResult, StepResult
from planrail.plan.model import Plan
from planrail.plan.secrets import REDACTED, Redactor
from planrail.plan.tools import ToolRegistry
from planrail.plan.validate import validate

TOKEN = "sk-learned-7c1e5a2b"
NOT_SECRET = "just-a-name-3d9f"


@planrail.tool(side_effects="none", sensitivity="secret")
def vault(name: str) -> dict[str, str]:
    """A token (its whole output is secret)."""
    return {"token": TOKEN}


@planrail.tool(side_effects="none", secret_params=["token"])
def use(token: str, label: str) -> str:
    """Uses a token (a secret parameter)."""
    return label


@planrail.tool(side_effects="none")
def echo(text: str) -> dict[str, str]:
    """Returns its text (nothing secret about it)."""
    return {"text": text}


REGISTRY = ToolRegistry.of([vault, use, echo])
PLAN = {
    "steps": [
        {"id": "v", "tool": "vault", "args": {"name": "team"}},
        {"id": "u", "tool": "use", "args": {"token": "${v.token}", "label": "x"},
         "depends_on": ["v"]},
        {"id": "e", "tool": "echo", "args": {"text": NOT_SECRET}},
    ]
}  # fmt: skip


def _plan() -> Plan:
    checked = validate(PLAN, REGISTRY).plan
    assert checked is not None
    return checked


def _run(outputs: dict[str, Any]) -> RunResult:
    steps = {sid: StepResult(sid, "succeeded", output=o) for sid, o in outputs.items()}
    return RunResult("r1", "succeeded", steps)


def test_learn_outputs_learns_the_secret_steps_of_the_plan_from_finished_runs() -> None:
    """A fresh redactor knows no value; after ``learn_outputs`` the secret tool's output is
    scrubbed from any text, an ordinary step's output is not, and a step the plan does not
    hold (another plan's ``v``) teaches nothing."""
    plan = _plan()
    redactor = Redactor.for_plan(plan, REGISTRY)
    assert redactor is not None
    said = f"used {TOKEN} for {NOT_SECRET}"
    assert redactor.text(said) == said
    redactor.learn_outputs(plan, [_run({"e": {"text": NOT_SECRET}}), _run({"v": {"token": TOKEN}})])
    assert redactor.text(said) == f"used {REDACTED} for {NOT_SECRET}"

    other = Redactor.for_plan(plan, REGISTRY)
    assert other is not None
    other.learn_outputs(plan, [_run({"elsewhere": {"token": TOKEN}})])
    assert other.known == 0


async def test_redactor_for_and_a_real_run_agree() -> None:
    """``redactor_for`` (the CLI's, for runs an agent made) learns what a real run's outputs
    hold: the printed result shows the token redacted."""
    plan = _plan()
    result = await planrail.arun(plan, REGISTRY)
    assert result.status == "succeeded"
    redactor = redactor_for(plan, REGISTRY, [result])
    assert redactor is not None
    assert redactor.text(f"token {TOKEN}") == f"token {REDACTED}"
    assert redactor_for(None, REGISTRY, [result]) is None
