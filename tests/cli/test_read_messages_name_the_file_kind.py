"""What cannot be read is named for what it is: a ``--catalog`` file, a ``resolve --output``
value, a ``--policy`` file and an ``--mcp-config`` file are read as plan files are, and their
errors say "the catalog", "the output", "the policy", "the MCP config" — not "the plan"
(``--catalog x.json: the plan is empty``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from planrail.errors import PlanLoadError
from planrail.plan.loader import PlanLimits, load_document

from .conftest import DATA, TOOLS, Cli

DEEP = "[" * 100_000 + "]" * 100_000
"""JSON nested far past what ``json`` can parse."""
HUGE = "9" * 5_001
"""An integer past Python's 4,300-digit conversion limit."""

BAD_DOCUMENTS = [
    pytest.param("", "is empty", id="empty"),
    pytest.param(DEEP, "nests too deeply to parse", id="deep"),
    pytest.param(f'{{"x": {HUGE}}}', "holds a value that cannot be read", id="huge-int"),
]
"""Text no document may be, and what is said of it after the document's name."""


def _said(result: Any, code: int) -> str:
    """What the command said (one line), once it exited ``code`` without a traceback."""
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    return " ".join(result.output.split())


@pytest.mark.parametrize(
    ("option", "name", "what"),
    [
        ("--catalog", "catalog.json", "the catalog"),
        ("--mcp-config", "servers.json", "the MCP config"),
    ],
)
@pytest.mark.parametrize(("text", "said"), BAD_DOCUMENTS)
def test_a_file_of_tools_that_cannot_be_read_is_named_for_what_it_is(
    cli: Cli, tmp_path: Path, option: str, name: str, what: str, text: str, said: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    shown = _said(cli("validate", str(DATA / "ok.json"), option, str(path)), 2)
    assert f"{option} {path}: {what} {said}" in shown
    assert "the plan" not in shown


@pytest.mark.parametrize(("text", "said"), BAD_DOCUMENTS)
def test_a_resolve_output_that_cannot_be_read_is_called_the_output(
    cli: Cli, text: str, said: str
) -> None:
    shown = _said(cli("resolve", "r1", "a", "--succeeded", "--output", text), 2)
    assert shown.startswith(f"error: --output: the output {said}")


@pytest.mark.parametrize(
    ("name", "text", "said"),
    [
        *(
            pytest.param("policy.json", text, f"the policy {said}", id=f"json-{p.id}")
            for p in BAD_DOCUMENTS
            for text, said in [p.values]
        ),
        pytest.param(
            "policy.yaml",
            "rules:\n- {tool: greet, action: deny, until: 2024-01-01}\n",
            "date values are not allowed in a policy (JSON only)",
            id="yaml-date",
        ),
    ],
)
def test_a_policy_file_that_cannot_be_read_is_called_the_policy(
    cli: Cli, tmp_path: Path, name: str, text: str, said: str
) -> None:
    policy = tmp_path / name
    policy.write_text(text)
    run = ("run", str(DATA / "ok.json"), "--tools", TOOLS, "--yes", "--policy", str(policy))
    shown = _said(cli(*run), 2)
    assert f"{policy}: " in shown
    assert said in shown
    assert "the plan" not in shown
    assert cli.calls == []  # nothing ran


def test_a_plan_is_still_called_the_plan() -> None:
    """The default: what plan files, plan text and plan dicts have always been told."""
    with pytest.raises(PlanLoadError, match=r"^the plan is empty$"):
        load_document("  ", PlanLimits())
    with pytest.raises(PlanLoadError, match=r"^the plan nests too deeply to parse"):
        load_document(DEEP, PlanLimits())
    with pytest.raises(PlanLoadError, match="not allowed in a plan"):
        load_document("x: 2024-01-01\n", PlanLimits())
