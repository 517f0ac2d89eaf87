"""What the command line prints shows control characters instead of sending them.

A plan's goal and arguments, a tool's output, a model's answer, a run id stored by an earlier
version: any of them may hold terminal control sequences (``\\x1b[2J`` clears the screen,
``\\x1b[1A`` moves up a line). Printed raw, they could redraw the approval screen a person is
about to approve. Every console the CLI makes (:func:`console`) renders the text it is given
with its control characters written as escapes (``\\x1b``); the styles Rich adds itself, and
its cursor controls (live progress), are untouched.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from rich.console import Console, ConsoleOptions, ConsoleRenderable, RenderHook
from rich.segment import Segment

from planrail.plan.strict_json import CONTROL_CHARACTERS

__all__ = ["console", "printable"]

_CONTROL = re.compile(f"(?![\n\t])[{CONTROL_CHARACTERS}]")
"""The control characters but newline and tab."""


def printable(text: str) -> str:
    """``text`` with its control characters written as escapes (newlines and tabs kept)."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


class _Escaped:
    """A renderable drawn as the one it wraps, its text's control characters escaped."""

    def __init__(self, inner: ConsoleRenderable) -> None:
        self.inner = inner

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Segment]:
        for seg in console.render(self.inner, options):
            if seg.control is None and _CONTROL.search(seg.text):
                yield Segment(printable(seg.text), seg.style)
            else:
                yield seg


class _EscapeControls(RenderHook):
    def process_renderables(self, renderables: list[ConsoleRenderable]) -> list[Any]:
        return [_Escaped(r) for r in renderables]


def console(**options: Any) -> Console:
    """A Rich console whose printed text shows control characters as escapes."""
    made = Console(**options)
    made.push_render_hook(_EscapeControls())
    return made
