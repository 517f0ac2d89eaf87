"""Ctrl-C during ``planrail run``: running steps are cancelled, the run is recorded
``cancelled`` (nothing half-written) and the command exits 130."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from interrupting import lines_until, sigint_not_ignored, watched

from .conftest import DATA, TOOLS, Cli

PLANRAIL = Path(sys.executable).with_name("planrail")


def interrupt_run(cli: Cli, run_id: str) -> tuple[int, str, dict[str, Any]]:
    """Start ``hang.json``, send SIGINT once ``forever`` is running; return the exit code, the
    output and what ``show --json`` then reports."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONIOENCODING="utf-8")
    args = [str(PLANRAIL), "run", str(DATA / "hang.json"), "--tools", TOOLS, "--run-id", run_id]
    with watched(args, cwd=cli.cwd, env=env) as proc:
        seen = lines_until(proc, "forever running", "'forever' started")
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
    code, shown = cli.json("show", run_id, "--json")
    assert code == 0
    return proc.returncode, "".join(seen) + rest, shown


def test_ctrl_c_cancels_the_run_and_exits_130(cli: Cli) -> None:
    """SIGINT while ``forever`` runs (its progress line seen): the process exits 130 saying it
    was interrupted, without a traceback; the stored run is ``cancelled``; the step after
    ``forever`` is never called."""
    code, output, shown = interrupt_run(cli, "r_int")
    assert code == 130, output
    assert "interrupted" in output
    assert "Traceback" not in output
    assert shown["status"] == "cancelled"
    assert "after" not in cli.calls


def test_ctrl_c_leaves_every_stored_step_final(cli: Cli) -> None:
    """After Ctrl-C nothing is half-written in the store: ``forever`` is ``cancelled`` with
    an end time, ``after`` never started, and no step is left ``running`` or ``pending``."""
    _, _, shown = interrupt_run(cli, "r_int2")
    steps = {s["id"]: s for s in shown["steps"]}
    assert steps["forever"]["status"] == "cancelled"
    assert steps["forever"]["finished_at"] is not None
    assert steps["after"]["status"] in {"cancelled", "skipped"}
    assert steps["after"]["started_at"] is None
    assert all(s["status"] not in {"running", "pending"} for s in steps.values())
    if steps["hello"]["status"] == "succeeded":
        assert steps["hello"]["output"] == {"text": "hello Ada", "name": "Ada"}


SIGINT_ON_IMPORT = """
import os, signal, sys

class SigintOnImport:
    '''Sends this process SIGINT when {module!r} is first imported: a Ctrl-C that lands
    while planrail is still being imported, before any of its code has run.'''

    def find_spec(self, name, path=None, target=None):
        if name == {module!r}:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, SigintOnImport())
sys.argv = [{script!r}, *{args!r}]
import runpy
runpy.run_path({script!r}, run_name="__main__")
"""


def _early_interrupt(cli: Cli, code: str) -> subprocess.CompletedProcess[str]:
    with sigint_not_ignored():
        return subprocess.run(
            [sys.executable, "-c", code],
            cwd=cli.cwd,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=120,
        )


def test_ctrl_c_while_planrail_is_still_being_imported_exits_130(cli: Cli) -> None:
    """A SIGINT in the first instants of ``planrail run`` — while ``typer`` is being imported,
    long before the run's own handler — exits 130 with one line: no traceback, not click's
    ``Aborted!``, and nothing ran."""
    plan = str(DATA / "hang.json")
    args = ["run", plan, "--tools", TOOLS, "--run-id", "r_early", "--yes"]
    code = SIGINT_ON_IMPORT.format(module="typer", script=str(PLANRAIL), args=args)
    proc = _early_interrupt(cli, code)
    said = proc.stdout + proc.stderr
    assert proc.returncode == 130, said
    assert "interrupted" in said
    assert "Traceback" not in said
    assert "Aborted" not in said
    assert cli.calls == []


def test_ctrl_c_before_the_run_starts_exits_130(cli: Cli, tmp_path: Path) -> None:
    """A SIGINT while the command reads its tools file (after the command started, before
    the run's handler is installed) exits 130 too — not click's ``Aborted!`` exit 1, and not
    the usage error of a tools file that raises ``KeyboardInterrupt`` itself; nothing is
    stored."""
    tools = tmp_path / "interrupting_tools.py"
    tools.write_text(
        "import os, signal\nos.kill(os.getpid(), signal.SIGINT)  # Ctrl-C lands here\n"
    )
    args = ["run", str(DATA / "hang.json"), "--tools", str(tools), "--run-id", "r_early2"]
    with sigint_not_ignored():
        proc = subprocess.run(
            [str(PLANRAIL), *args, "--yes"],
            cwd=cli.cwd,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=120,
        )
    said = proc.stdout + proc.stderr
    assert proc.returncode == 130, said
    assert "interrupted" in said
    assert "Traceback" not in said
    assert "Aborted" not in said
    assert cli("show", "r_early2").exit_code == 2, "no run was stored"


ISOLATED_WAIT = '''
import os, threading
import planrail


@planrail.tool(side_effects="keyed", isolation="process")
def wait_here(step: str) -> str:
    """Says it started (its pid, on the FIFO), then never returns."""
    with open(os.environ["ISO_FIFO"], "w") as f:
        f.write(f"{os.getpid()}\\n")
    threading.Event().wait()
    return step
'''


def test_a_terminal_ctrl_c_does_not_interrupt_a_process_isolated_call_itself(
    cli: Cli, tmp_path: Path
) -> None:
    """A Ctrl-C at a terminal is sent to the whole foreground process group, the worker
    process of an ``isolation="process"`` tool included. The worker used to take it as a
    KeyboardInterrupt in the tool and print the tool's traceback, racing the run's own
    cancellation; it ignores SIGINT, and the run cancels the call as for any step: exit 130,
    no traceback, the keyed step ``cancelled`` (a resume calls it again with its key)."""
    (tmp_path / "iso_wait.py").write_text(ISOLATED_WAIT)
    plan = tmp_path / "wait.json"
    plan.write_text(
        '{"goal": "wait", "steps": [{"id": "w", "tool": "wait_here", "args": {"step": "w"}}]}'
    )
    fifo = tmp_path / "started"
    os.mkfifo(fifo)
    env = dict(os.environ, ISO_FIFO=str(fifo), PYTHONUNBUFFERED="1", PYTHONIOENCODING="utf-8")
    args = [str(PLANRAIL), "run", str(plan), "--tools", str(tmp_path / "iso_wait.py")]
    # its own process group, as a terminal's foreground job
    with watched(
        [*args, "--yes", "--run-id", "r_iso"], cwd=cli.cwd, env=env, start_new_session=True
    ) as proc:
        with open(fifo) as started:  # blocks until the tool runs in its worker
            assert started.readline().strip().isdigit()
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
        output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, output
    assert "Traceback" not in output
    assert "KeyboardInterrupt" not in output
    code, shown = cli.json("show", "r_iso", "--json")
    assert code == 0
    assert [(s["id"], s["status"]) for s in shown["steps"]] == [("w", "cancelled")]
