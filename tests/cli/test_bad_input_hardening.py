"""Hostile input on the command line ends in one line and a clean exit code, never a traceback,
and what a run records stays readable: a tools file raising a ``BaseException`` of its own at
import, a tool error whose ``__str__`` raises or whose message holds a lone surrogate, and
JSON nested too deeply or holding a huge integer in ``--catalog``, ``resolve --output`` and the
lines of a ``show --trace`` file."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from planrail import errors
from planrail.errors import ToolLoadError, error_dict
from planrail.plan.catalog import load_tools

from .conftest import Cli

PLANRAIL = Path(sys.executable).with_name("planrail")
GUARD = 60.0
"""A command still running after this long has hung (the guard only: no timing is asserted)."""

DEEP = "[" * 100_000 + "]" * 100_000
"""JSON nested far past what ``json`` can parse (a RecursionError, before)."""
HUGE = "9" * 5_001
"""An integer past Python's 4,300-digit conversion limit (a ValueError, before)."""

TOOLS = textwrap.dedent(
    '''
    import planrail

    class Unreadable(Exception):
        def __str__(self):
            raise RuntimeError("no message for you")

    @planrail.tool(side_effects="none")
    def unreadable(x: str) -> str:
        """Fails with an error whose message cannot be read."""
        raise Unreadable("boom")

    @planrail.tool(side_effects="none")
    def undecodable(x: str) -> str:
        """Fails quoting a file name Python decoded with surrogateescape."""
        raise OSError("cannot read /data/caf\\udce9.txt")
    '''
)


def _plan(tmp_path: Path, tool: str) -> Path:
    path = tmp_path / f"{tool}.json"
    path.write_text(json.dumps({"steps": [{"id": "a", "tool": tool, "args": {"x": "1"}}]}))
    return path


def _said(result: Any) -> str:
    return " ".join(result.output.split())


def _clean(result: Any, code: int) -> str:
    """What the command said, once its exit code is ``code`` and no traceback was shown."""
    assert result.exit_code == code, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    return _said(result)


# ------------------------------------------------------------------ 1. a tools file at import


def test_a_tools_file_raising_its_own_base_exception_at_import_is_a_usage_error(
    tmp_path: Path,
) -> None:
    """``class Abort(BaseException)`` raised at import: exit 2 naming it (was a traceback: only
    Exception, SystemExit and KeyboardInterrupt were caught)."""
    tools = tmp_path / "aborting.py"
    tools.write_text("class Abort(BaseException):\n    pass\n\nraise Abort('stop here')\n")
    proc = subprocess.run(
        [str(PLANRAIL), "validate", str(_plan(tmp_path, "x")), "--tools", str(tools)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=GUARD,
        check=False,
    )
    said = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode == 2, said
    assert "Traceback" not in said
    assert f"--tools {tools}: importing it raised Abort: stop here" in said
    assert "which is not an Exception" in said


def test_a_keyboard_interrupt_at_import_goes_on_as_a_ctrl_c_under_pythons_handler(
    tmp_path: Path,
) -> None:
    """Where Python's own SIGINT handler is in place (a program calling ``load_tools``), a
    ``KeyboardInterrupt`` at import may be a Ctrl-C: it goes on as one. Under another handler
    (the ``planrail`` command's, which exits 130 on a Ctrl-C itself) it can only be the file's
    own: a ``ToolLoadError`` (``cli/test_stopping.py`` pins the command's exit 2)."""
    tools = tmp_path / "interrupting.py"
    tools.write_text("raise KeyboardInterrupt\n")
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            load_tools(str(tools))
        signal.signal(signal.SIGINT, lambda *_: None)
        with pytest.raises(ToolLoadError, match="importing it raised KeyboardInterrupt"):
            load_tools(str(tools))
    finally:
        signal.signal(signal.SIGINT, previous)


# ------------------------------------------------------------------ 2, 3. tool errors


def test_a_tool_error_whose_str_raises_is_recorded_readably(cli: Cli, tmp_path: Path) -> None:
    """The tool's exception cannot say its message: the attempt is still recorded (was a
    traceback logged, and the step's record lost: attempts 0, the error the ``__str__``'s own
    RuntimeError), the run fails (exit 1), and ``show --json`` reads its type and why."""
    tools = tmp_path / "bad_text_tools.py"
    tools.write_text(TOOLS)
    plan = _plan(tmp_path, "unreadable")
    ran = cli("run", str(plan), "--tools", str(tools), "--run-id", "r_str", "--json")
    _clean(ran, 1)
    shown = cli("show", "r_str", "--json")
    _clean(shown, 0)
    for printed in (ran.stdout, shown.stdout):
        (step,) = json.loads(printed)["steps"]
        assert (step["status"], step["attempts"]) == ("failed", 1)
        assert step["error"]["type"] == "Unreadable"
        assert step["error"]["message"] == (
            "Unreadable('boom') (its message cannot be read: str() raised RuntimeError)"
        )


def test_a_tool_error_quoting_undecodable_bytes_is_stored_as_readable_text(
    cli: Cli, tmp_path: Path
) -> None:
    """A lone surrogate in a tool's error message is stored as its escape (``\\udce9``):
    the record every door reads is Unicode text."""
    tools = tmp_path / "bad_text_tools.py"
    tools.write_text(TOOLS)
    plan = _plan(tmp_path, "undecodable")
    _clean(cli("run", str(plan), "--tools", str(tools), "--run-id", "r_sur", "--json"), 1)
    shown = cli("show", "r_sur", "--json")
    _clean(shown, 0)
    (step,) = json.loads(shown.stdout)["steps"]
    assert step["error"]["message"] == "cannot read /data/caf\\udce9.txt"
    assert "\udce9" not in step["error"]["message"]


class _Unreadable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no")

    def __repr__(self) -> str:
        raise RuntimeError("no repr either")


def test_error_dict_reads_every_exception() -> None:
    """Whatever an exception's ``__str__`` and ``__repr__`` do, and whatever text it holds,
    ``error_dict`` returns the contract's object with Unicode text."""
    assert error_dict(_Unreadable()) == {
        "type": "_Unreadable",
        "message": "_Unreadable (its message cannot be read: str() raised RuntimeError)",
        "retryable": False,
    }
    assert errors.error_message(ValueError("a \ud800 b é")) == "a \\ud800 b é"
    assert error_dict("Odd", "x \udcff")["message"] == "x \\udcff"


# ------------------------------------------------------------------ 5, 6, 7. JSON read safely


@pytest.mark.parametrize(
    ("text", "said"),
    [(DEEP, "nests too deeply to parse"), (f'[{{"name": "a", "x": {HUGE}}}]', "4300 digits")],
    ids=["deep", "huge-int"],
)
def test_a_catalog_nested_too_deeply_or_with_a_huge_integer_is_a_usage_error(
    cli: Cli, tmp_path: Path, text: str, said: str
) -> None:
    """``--catalog`` is read as plan files, policies and MCP configs are (was a RecursionError
    or ValueError traceback)."""
    catalog = tmp_path / "catalog.json"
    catalog.write_text(text)
    result = cli("validate", str(_plan(tmp_path, "a")), "--catalog", str(catalog))
    shown = _clean(result, 2)
    assert f"--catalog {catalog}:" in shown
    assert said in shown


@pytest.mark.parametrize(
    ("output", "said"),
    [
        ("[" * 10_000 + "]" * 10_000, "nests too deeply to parse"),  # fits one argv entry
        (HUGE, "4300 digits"),
        ('{"paid": 1, "paid": 2}', "key 'paid' appears twice"),
    ],
    ids=["deep", "huge-int", "repeated-key"],
)
def test_resolve_output_nested_too_deeply_or_with_a_huge_integer_is_a_usage_error(
    cli: Cli, output: str, said: str
) -> None:
    """``resolve --succeeded --output`` is read as a plan file is (was a traceback)."""
    result = cli("resolve", "r1", "a", "--succeeded", "--output", output)
    shown = _clean(result, 2)
    assert shown.startswith("error: --output:")
    assert said in shown


def _trace(tmp_path: Path, line: str) -> Path:
    head = {"kind": "run", "run_id": "r", "version": 1, "at": 0, "resumed": False}
    path = tmp_path / "t.jsonl"
    path.write_text(f"{json.dumps(head)}\n{line}\n{json.dumps({'kind': 'event'})}\n")
    return path


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ('{"kind": "event", "data": ' + DEEP + "}", ":2: a JSON line nested too deeply to read"),
        ('{"kind": "event", "at": ' + HUGE + "}", ":2: a JSON line that cannot be read"),
        ('{"kind": "step"}', ": not a planrail trace: a line lacks a field"),
    ],
    ids=["deep", "huge-int", "no-step-id"],
)
def test_show_trace_of_a_line_it_cannot_read_is_a_usage_error(
    cli: Cli, tmp_path: Path, line: str, said: str
) -> None:
    """A trace line nested too deeply, holding a huge integer, or JSON that is no trace line:
    exit 2 naming the file (and the line), never a traceback."""
    trace = _trace(tmp_path, line)
    shown = _clean(cli("show", "--trace", str(trace)), 2)
    assert f"{trace}{said}" in shown
