"""Control characters in what the command line prints (a plan's goal and arguments, a stored
run's goal) are shown as escapes, never sent to the terminal: ``\\x1b[2J`` in an argument
could otherwise clear the approval screen and draw another one in its place."""

from __future__ import annotations

import io
import json
from pathlib import Path

from planrail.cli.printable import console

from .conftest import Cli

HIDING = "\x1b[2J\x1b[Hname = Alice"  # clear the screen, cursor home, a harmless-looking line


def test_text_with_control_characters_is_printed_escaped_and_styles_stay() -> None:
    out = io.StringIO()
    con = console(
        file=out, force_terminal=True, color_system="standard", width=200, highlight=False
    )
    con.print(f"[red]value[/] = {HIDING}\tand a\nnew line")
    printed = out.getvalue()
    assert "\\x1b[2J\\x1b[Hname = Alice" in printed
    assert "\x1b[2J" not in printed
    assert "\x1b[31m" in printed  # Rich's own style codes are still sent
    assert "and a\nnew line" in printed  # newlines kept (tabs are Rich's to expand)


def test_the_approval_screen_shows_a_hiding_argument_escaped(cli: Cli, tmp_path: Path) -> None:
    """The approval screen of a plan whose argument clears the terminal (no --yes, no
    terminal to ask on: refused) shows the sequence as text; nothing runs."""
    tools = tmp_path / "keyed_tools.py"
    tools.write_text(
        "import planrail\n\n@planrail.tool(side_effects='keyed')\n"
        "def save(name: str) -> str:\n    return name\n"
    )
    plan = tmp_path / "hiding.json"
    steps = [{"id": "a", "tool": "save", "args": {"name": HIDING}}]
    plan.write_text(json.dumps({"goal": "save \x1b[8mhidden\x1b[0m", "steps": steps}))
    result = cli("run", str(plan), "--tools", str(tools))
    assert result.exit_code == 4, result.output
    assert "\x1b" not in result.output
    assert "name = \\x1b[2J\\x1b[Hname = Alice" in result.output
    assert "save \\x1b[8mhidden\\x1b[0m" in result.output


def test_rich_cursor_controls_pass_through_unescaped() -> None:
    """Live progress moves the cursor with Rich's control segments: those are Rich's own,
    not text it was given, and reach the terminal as they are."""
    from rich.control import Control

    out = io.StringIO()
    con = console(file=out, force_terminal=True, width=80, highlight=False)
    con.print(Control.move_to(0, 0), "after")
    printed = out.getvalue()
    assert "\x1b[1;1H" in printed
    assert "\\x1b" not in printed
