"""What ``planrail run`` leaves behind when a tool does not stop or the user interrupts, run as
a user would (the real entry point, real signals): a never-returning sync tool under
``timeout: 0.5``, Ctrl-C once and twice mid-call, and tools files that try to exit."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from interrupting import sigint_not_ignored

PLANRAIL = Path(sys.executable).with_name("planrail")
GUARD = 60.0
"""A command still running after this long has hung (the guard only: no timing is asserted)."""

TOOLS = textwrap.dedent(
    '''
    import json, os, threading
    import planrail

    LOG = os.environ["STOP_LOG"]
    _lock = threading.Lock()
    _active = [0]

    def _log(event, step):
        with _lock:
            _active[0] += 1 if event == "start" else -1
            with open(LOG, "a") as f:
                f.write(json.dumps({"event": event, "step": step, "active": _active[0]}) + "\\n")

    @planrail.tool(side_effects="unsafe", timeout=0.5, resource="upstream",
                   retry={"max_attempts": 3, "initial_delay": 0.01})
    def hang(step: str) -> str:
        """Never returns (its thread blocks for good)."""
        _log("start", step)
        threading.Event().wait()
        return step

    @planrail.tool(side_effects="keyed", timeout=0.5, resource="upstream",
                   retry={"max_attempts": 3, "initial_delay": 0.01})
    def hang_keyed(step: str) -> str:
        """Never returns either, but honours idempotency keys."""
        _log("start", step)
        threading.Event().wait()
        return step

    @planrail.tool(side_effects="unsafe")
    def pay(step: str) -> str:
        """Blocks until the test's file says go: a call under way when Ctrl-C arrives."""
        _log("start", step)
        threading.Event().wait(30)
        _log("end", step)
        return step

    @planrail.tool(side_effects="keyed")
    def put(step: str) -> str:
        """As ``pay``, for a tool that honours keys."""
        _log("start", step)
        threading.Event().wait(30)
        _log("end", step)
        return step
    '''
)


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """A folder with the tools file; the tools log to ``log.jsonl`` there."""
    (tmp_path / "stop_tools.py").write_text(TOOLS)
    return tmp_path


def _plan(work: Path, steps: list[dict[str, Any]]) -> Path:
    path = work / "plan.json"
    path.write_text(json.dumps({"goal": "stopping", "steps": steps}))
    return path


def _start(work: Path, plan: Path, *extra: str) -> subprocess.Popen[str]:
    env = dict(os.environ, STOP_LOG=str(work / "log.jsonl"), PYTHONUNBUFFERED="1")
    args = [str(PLANRAIL), "run", str(plan), "--tools", str(work / "stop_tools.py"), "--yes"]
    with sigint_not_ignored():
        return subprocess.Popen(
            [*args, "--store", f"sqlite:///{work / 'runs.db'}", "--run-id", "r1", *extra],
            cwd=work,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )


def _log(work: Path) -> list[dict[str, Any]]:
    path = work / "log.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def _wait_started(work: Path, proc: subprocess.Popen[str], count: int) -> None:
    """Wait (on the tools' own log, polled through the process's liveness) for calls to start."""
    while len([e for e in _log(work) if e["event"] == "start"]) < count:
        try:
            proc.wait(timeout=0.05)
        except subprocess.TimeoutExpired:
            continue
        raise AssertionError(f"the run ended first: {proc.communicate()}")


def _stored(work: Path) -> dict[str, str]:
    with contextlib.closing(sqlite3.connect(work / "runs.db")) as conn:
        return dict(conn.execute("SELECT step_id, status FROM steps").fetchall())


def test_a_never_returning_sync_tool_under_a_timeout_lets_the_command_exit(work: Path) -> None:
    """``hang`` (unsafe) and ``hang_keyed`` never return, under ``timeout: 0.5`` and a retry
    policy of three attempts: the command still exits (no waiting for their threads, reporting
    the abandoned calls); the unsafe step is in doubt, the keyed one failed; neither is retried
    while its first call runs (the tools' own log never shows two calls of a step at once) and
    the output is strict JSON."""
    plan = _plan(
        work,
        [
            {"id": "a", "tool": "hang", "args": {"step": "a"}},
            {"id": "b", "tool": "hang_keyed", "args": {"step": "b"}},
        ],
    )
    proc = _start(work, plan, "--json")
    out, err = proc.communicate(timeout=GUARD)

    assert proc.returncode == 1, err
    result = json.loads(out, parse_constant=_no_constant)
    steps = {s["id"]: s for s in result["steps"]}
    assert steps["a"]["status"] == "in_doubt"
    assert steps["b"]["status"] == "failed"
    assert steps["b"]["error"]["type"] == "AttemptTimeoutError"
    starts = [e["step"] for e in _log(work) if e["event"] == "start"]
    assert sorted(starts) == ["a", "b"], "no retry overlapped a call still running"
    assert "2 sync tool call(s)" in err
    assert "Traceback" not in err
    assert _stored(work) == {"a": "in_doubt", "b": "failed"}


def test_ctrl_c_mid_call_records_unsafe_in_doubt_and_keyed_cancelled(work: Path) -> None:
    """One Ctrl-C while ``p`` (unsafe) and ``k`` (keyed) are mid-call: the command exits 130
    without a traceback; the store says ``p`` is in doubt (a resume will not call it again)
    and ``k`` cancelled (a resume calls it again with its key); ``after``, which never
    started, is not left running."""
    plan = _plan(
        work,
        [
            {"id": "p", "tool": "pay", "args": {"step": "p"}},
            {"id": "k", "tool": "put", "args": {"step": "k"}},
            {"id": "after", "tool": "put", "args": {"step": "after"}, "depends_on": ["k"]},
        ],
    )
    proc = _start(work, plan)
    _wait_started(work, proc, 2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=GUARD)

    assert proc.returncode == 130, err
    assert "Traceback" not in err
    stored = _stored(work)
    assert stored["p"] == "in_doubt"
    assert stored["k"] == "cancelled"
    assert stored.get("after", "skipped") in ("skipped", "cancelled")


def test_a_second_ctrl_c_exits_130_at_once_without_a_traceback(work: Path) -> None:
    """Two Ctrl-C in a row mid-call: exit 130, never a traceback, and the unsafe call under way
    is not left ``running`` for a resume to call again: it is in doubt (or, if the second
    Ctrl-C came before anything was written, still ``running``, which a resume treats as a
    crash: in doubt too)."""
    plan = _plan(work, [{"id": "p", "tool": "pay", "args": {"step": "p"}}])
    proc = _start(work, plan)
    _wait_started(work, proc, 1)
    proc.send_signal(signal.SIGINT)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=GUARD)

    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert _stored(work)["p"] in ("in_doubt", "running")


@pytest.mark.parametrize(
    ("body", "shown"),
    [
        ("import sys\nsys.exit(5)\n", "SystemExit(5)"),
        ("raise KeyboardInterrupt\n", "KeyboardInterrupt"),
        ("raise SystemExit\n", "SystemExit(None)"),
    ],
)
def test_a_tools_file_that_exits_on_import_is_a_usage_error(
    work: Path, body: str, shown: str
) -> None:
    """A tools file raising SystemExit or KeyboardInterrupt on import: exit 2 with one line
    saying so, never its own exit code, never a traceback."""
    (work / "exits.py").write_text(body)
    plan = _plan(work, [{"id": "p", "tool": "pay", "args": {"step": "p"}}])
    proc = subprocess.run(
        [str(PLANRAIL), "run", str(plan), "--tools", str(work / "exits.py"), "--yes"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=GUARD,
    )
    said = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode == 2, said
    assert shown in said
    assert "Traceback" not in said


def _no_constant(name: str) -> Any:
    raise ValueError(f"not strict JSON: {name}")


ISOLATED = textwrap.dedent(
    '''
    import os, threading
    import planrail

    PIDS = os.environ["STOP_PIDS"]

    @planrail.tool(side_effects="unsafe", timeout=0.5, isolation="process")
    def hang_isolated(step: str) -> str:
        """Never returns; writes the pid of the process it runs in first."""
        with open(PIDS, "a") as f:
            f.write(f"{os.getpid()}\\n")
        threading.Event().wait()
        return step

    # unsafe like hang_isolated: both calls wait for the same group commit of their intents
    # and start in the same turn, each in a worker of its own (a read-only call would start a
    # turn earlier, finish, and leave its worker to the hanging call).
    @planrail.tool(side_effects="unsafe", isolation="process")
    def where(step: str) -> int:
        """Returns the pid of the process it runs in."""
        return os.getpid()

    @planrail.tool(side_effects="keyed", timeout=2.0, isolation="process",
                   retry={"max_attempts": 2, "initial_delay": 0.01})
    def keyed_isolated(step: str, ctx: planrail.StepContext) -> int:
        """Its first attempt never returns, its retry does; notes pid, attempt and key first."""
        with open(PIDS + ".keyed", "a") as f:
            f.write(f"{os.getpid()} {ctx.attempt} {ctx.idempotency_key}\\n")
        if ctx.attempt == 1:
            threading.Event().wait()
        return os.getpid()
    '''
)


def test_a_process_isolated_tool_is_really_terminated_on_timeout(tmp_path: Path) -> None:
    """``isolation="process"``: the call runs in another process; on its timeout that process
    is terminated (it no longer exists once the command has exited; nothing runs on, nothing is
    abandoned). The unsafe step is then ``in_doubt``, not failed — its call may have taken
    effect before it was killed — and not retried; the keyed one is retried with the same
    idempotency key in another worker and succeeds; a third isolated tool returned its own
    worker's pid."""
    (tmp_path / "iso_tools.py").write_text(ISOLATED)
    pids = tmp_path / "pids.txt"
    plan = _plan(
        tmp_path,
        [
            {"id": "h", "tool": "hang_isolated", "args": {"step": "h"}},
            {"id": "w", "tool": "where", "args": {"step": "w"}},
            {"id": "k", "tool": "keyed_isolated", "args": {"step": "k"}},
        ],
    )
    env = dict(os.environ, STOP_PIDS=str(pids))
    args = [str(PLANRAIL), "run", str(plan), "--tools", str(tmp_path / "iso_tools.py")]
    proc = subprocess.run(
        [*args, "--yes", "--json", "--store", "memory://", "--run-id", "r"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=GUARD,
    )
    assert proc.returncode == 1, proc.stderr
    steps = {s["id"]: s for s in json.loads(proc.stdout)["steps"]}
    assert steps["h"]["status"] == "in_doubt"
    assert steps["h"]["error"]["type"] == "CallCrashedError"
    assert "timed out after 0.5s" in steps["h"]["error"]["message"]
    assert "killed mid-call" in steps["h"]["error"]["message"]
    assert steps["h"]["attempts"] == 1
    assert "still run" not in proc.stderr  # nothing abandoned
    assert steps["w"]["status"] == "succeeded"
    worker = int(pids.read_text().split()[0])
    assert steps["w"]["output"] not in (worker, proc.returncode)
    keyed = [line.split() for line in (tmp_path / "pids.txt.keyed").read_text().splitlines()]
    assert [(attempt, key) for _, attempt, key in keyed] == [("1", "r:k"), ("2", "r:k")]
    assert steps["k"]["status"] == "succeeded"
    assert steps["k"]["output"] == int(keyed[1][0]) != int(keyed[0][0])
    for killed in (worker, int(keyed[0][0])):
        with pytest.raises(ProcessLookupError):
            os.kill(killed, 0)
