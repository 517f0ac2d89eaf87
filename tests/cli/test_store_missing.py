"""Commands that read or change runs already made do not create a store: a mistyped
``--store`` path (or a folder where nothing has run) is said, exit 2, and no file or folder is
left behind; ``planrail run`` creates the store, after which they find it."""

from __future__ import annotations

import pytest

from .conftest import DATA, TOOLS, Cli

READERS = [
    pytest.param(["runs"], id="runs"),
    pytest.param(["runs", "--json"], id="runs-json"),
    pytest.param(["show", "r1"], id="show"),
    pytest.param(["resume", "r1", "--tools", TOOLS], id="resume"),
    pytest.param(["approve", "r1"], id="approve"),
    pytest.param(["refuse", "r1"], id="refuse"),
    pytest.param(["cancel", "r1"], id="cancel"),
    pytest.param(["resolve", "r1", "hello", "--retry"], id="resolve"),
    pytest.param(["graph", "r1"], id="graph"),
]


@pytest.mark.parametrize("args", READERS)
def test_a_missing_store_is_said_and_not_created(cli: Cli, args: list[str]) -> None:
    typo = cli.cwd / "sub" / "typo.db"
    result = cli(*args, "--store", f"sqlite:///{typo}")
    assert result.exit_code == 2, result.output
    assert f"no store at {typo}" in " ".join(result.output.split())
    assert "Traceback" not in result.output
    assert not typo.parent.exists()


@pytest.mark.parametrize("args", READERS)
def test_the_store_a_run_made_is_found(cli: Cli, args: list[str]) -> None:
    assert cli("run", str(DATA / "ok.json"), "--tools", TOOLS, "--run-id", "r1").exit_code == 0
    result = cli(*args)
    assert "no store at" not in result.output
    assert "Traceback" not in result.output
