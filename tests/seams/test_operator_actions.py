"""``planrail approve``, ``refuse`` and ``cancel`` from a second process, against real runs on
SQLite and PostgreSQL: each goes through :mod:`planrail.engine.operations` (lease checks, an
``operator_action`` event) and the tools' own ledger shows what really ran."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from planrail import run, tool
from planrail.store import open_store

DATA = Path(__file__).resolve().parent / "data"
TOOLS_FILE = str(DATA / "path_tools.py")
PAY = {
    "goal": "Pay the invoice",
    "steps": [
        {"id": "look", "tool": "fetch_page", "args": {"url": "https://example.org/invoice"}},
        {"id": "pay", "tool": "transfer", "args": {"amount": 120}, "depends_on": ["look"]},
    ],
}


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'runs.db'}"
    else:
        yield request.getfixturevalue("pg_url")


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "plan.json").write_text(json.dumps(PAY))
    return {
        **os.environ,
        "PLANRAIL_TEST_LEDGER": str(tmp_path / "ledger.jsonl"),
        "COLUMNS": "200",
    }


def planrail(env: dict[str, str], *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    """``planrail ARGS`` in a process of its own, with no terminal on stdin."""
    cmd = [sys.executable, "-c", "from planrail.cli import main; main()", *args]
    return subprocess.run(
        cmd, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120, **kw
    )


def _ledger(env: dict[str, str]) -> list[str]:
    path = Path(env["PLANRAIL_TEST_LEDGER"])
    return [json.loads(x)["tool"] for x in path.read_text().splitlines()] if path.exists() else []


def _events(store_url: str, run_id: str) -> list[tuple[str, Any]]:
    store = open_store(store_url)
    try:
        return [(e.type, e.data.get("action")) for e in store.events(run_id)]
    finally:
        store.close()


def test_a_waiting_run_is_approved_from_another_process_then_resumed(
    env: dict[str, str], store_url: str
) -> None:
    """Without a terminal or --yes the run is stored awaiting approval and nothing runs;
    ``planrail approve`` in another process binds the approval to the stored plan's hash, and
    ``planrail resume`` runs it: the transfer happens exactly once."""
    first = planrail(
        env,
        "run",
        "plan.json",
        "--tools",
        TOOLS_FILE,
        "--store",
        store_url,
        "--run-id",
        "r_wait",
        "--json",
    )
    assert first.returncode == 4, first.stderr
    assert json.loads(first.stdout)["status"] == "awaiting_approval"
    assert _ledger(env) == []
    shown = planrail(env, "runs", "--status", "awaiting_approval", "--store", store_url, "--json")
    assert [r["run_id"] for r in json.loads(shown.stdout)] == ["r_wait"]

    approved = planrail(env, "approve", "r_wait", "--store", store_url)
    assert approved.returncode == 0, approved.stderr
    again = planrail(env, "approve", "r_wait", "--store", store_url)
    assert again.returncode == 2
    assert "cannot approve" in again.stderr + again.stdout

    done = planrail(env, "resume", "r_wait", "--tools", TOOLS_FILE, "--store", store_url, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "succeeded"
    assert _ledger(env) == ["fetch_page", "transfer"]
    assert ("operator_action", "approve") in _events(store_url, "r_wait")


def test_a_refused_run_never_runs(env: dict[str, str], store_url: str) -> None:
    """``planrail refuse`` ends a waiting run cancelled; a resume then runs nothing."""
    planrail(
        env, "run", "plan.json", "--tools", TOOLS_FILE, "--store", store_url, "--run-id", "r_no"
    )
    refused = planrail(env, "refuse", "r_no", "--store", store_url, "--reason", "not this month")
    assert refused.returncode == 0, refused.stderr
    store = open_store(store_url)
    try:
        run = store.get_run("r_no")
        assert run is not None
        assert run.status == "cancelled"
        assert "not this month" in (run.error or {}).get("message", "")
    finally:
        store.close()
    late = planrail(env, "approve", "r_no", "--store", store_url)
    assert late.returncode == 2
    assert _ledger(env) == []
    assert ("operator_action", "refuse") in _events(store_url, "r_no")


def test_cancel_from_another_process_stops_a_live_run_and_leaves_the_call_in_doubt(
    env: dict[str, str], store_url: str
) -> None:
    """A run is inside its unsafe transfer when ``planrail cancel`` comes from another
    process: the runner stops within its watch interval (exit 130), the run is cancelled and
    the transfer — which may or may not have happened — is in doubt, never re-run by resume."""
    read, write = os.pipe()
    runner_env = {**env, "PLANRAIL_TEST_HANG_TRANSFER_FD": str(write)}
    cmd = [sys.executable, "-c", "from planrail.cli import main; main()", "run", "plan.json"]
    cmd += ["--tools", TOOLS_FILE, "--store", store_url, "--run-id", "r_cut", "--yes", "--json"]
    proc = subprocess.Popen(
        cmd,
        env=runner_env,
        pass_fds=[write],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    os.close(write)
    try:
        ready, _, _ = select.select([read], [], [], 60)
        assert ready
        assert os.read(read, 64) == b"transferring\n"
        cancel = planrail(env, "cancel", "r_cut", "--store", store_url)
        assert cancel.returncode == 0, cancel.stderr
        assert "cancel requested" in cancel.stdout
        out, err = proc.communicate(timeout=60)
    finally:
        os.close(read)
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    data = json.loads(out)
    assert data["status"] == "cancelled"
    steps = {s["id"]: s["status"] for s in data["steps"]}
    assert steps == {"look": "succeeded", "pay": "in_doubt"}

    resumed = planrail(
        env, "resume", "r_cut", "--tools", TOOLS_FILE, "--store", store_url, "--json"
    )
    assert resumed.returncode == 1
    assert {s["id"]: s["status"] for s in json.loads(resumed.stdout)["steps"]}["pay"] == "in_doubt"
    assert _ledger(env).count("transfer") == 1, "the unsafe call was never made twice"
    assert ("cancel_requested", None) in _events(store_url, "r_cut")


def test_undecodable_command_line_bytes_are_refused_and_change_nothing(
    env: dict[str, str], store_url: str
) -> None:
    """Bytes that are not UTF-8 on the command line (Python reads them as lone surrogates):
    a reason holding them is refused before anything is written, a run id holding them names
    no run, and every message is printed (escaped), never a traceback."""
    planrail(
        env, "run", "plan.json", "--tools", TOOLS_FILE, "--store", store_url, "--run-id", "r_b"
    )

    def raw(*args: bytes) -> tuple[int, str]:
        cmd = [sys.executable.encode(), b"-c", b"from planrail.cli import main; main()", *args]
        done = subprocess.run(
            cmd, env=env, capture_output=True, stdin=subprocess.DEVNULL, timeout=120
        )
        said = (done.stdout + done.stderr).decode("utf-8")  # what was printed is UTF-8
        assert "Traceback" not in said
        return done.returncode, said

    store = store_url.encode()
    code, said = raw(b"refuse", b"r_b", b"--store", store, b"--reason", b"bad \xff byte")
    assert code == 2
    assert "lone surrogate ('\\udcff')" in said
    for command in (b"show", b"refuse", b"cancel", b"approve"):
        code, said = raw(command, b"r_b\xff", b"--store", store)
        assert code != 0, command
        assert "no run 'r_b\\udcff'" in said, command
    assert ("operator_action", "refuse") not in _events(store_url, "r_b")
    code, said = raw(b"run", b"plan.json", b"--tools", TOOLS_FILE.encode(), b"--store", store,
                     b"--yes", b"--run-id", b"r_new\xff")  # fmt: skip
    assert code == 2
    assert "the run id holds a lone surrogate ('\\udcff')" in said
    assert _ledger(env) == []  # nothing ran
    check = open_store(store_url)
    try:
        assert check.get_run("r_b").status == "awaiting_approval"  # type: ignore[union-attr]
    finally:
        check.close()


@pytest.mark.parametrize(
    "output", [float("nan"), {"rows": [1, float("inf")]}, {"k": "\ud800"}, {"tags": {"a"}}]
)
def test_a_resolved_output_must_be_strict_json(output: Any) -> None:
    """What an operator says a call returned must be what a tool could have returned: strict
    JSON (plan/strict_json.py); refused before the store is read."""
    from planrail.engine import operations

    with open_store("memory://") as store, pytest.raises(operations.OperationError) as caught:
        operations.resolve(store, "any", "x", "succeeded", output=output)
    assert "the output is not strict JSON" in caught.value.message


def test_resolving_a_step_the_plan_does_not_have_says_so_and_writes_nothing() -> None:
    """``planrail resolve RUN zz`` and retrying ``zz``: the run has no step ``zz`` (it was
    called "not started")."""
    from planrail.engine import operations

    @tool(side_effects="none")
    def find(name: str) -> str:
        return name

    plan = {"goal": "g", "steps": [{"id": "a", "tool": "find", "args": {"name": "x"}}]}
    with open_store("memory://") as store:
        assert run(plan, [find], store=store, run_id="r").status == "succeeded"
        before = store.events("r")
        with pytest.raises(operations.OperationError) as caught:
            operations.resolve(store, "r", "zz", "succeeded", output=1)
        assert caught.value.message == "run 'r' has no step 'zz'"
        with pytest.raises(operations.OperationError) as caught:
            operations.retry_step(store, "r", "zz")  # the dashboard's "retry this step"
        assert caught.value.message == "run 'r' has no step 'zz'"
        assert store.events("r") == before
