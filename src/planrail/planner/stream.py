"""Steps out of a plan that is still being written: an incremental JSON scanner.

:class:`StepStream` is fed the model's text as it arrives and returns each element of the
top-level ``"steps"`` array as soon as its closing brace has arrived. It never parses the
whole document again: each character is looked at once. Prose or a code fence before the
JSON is skipped; anything it cannot read, and a step that holds a key twice (which value was
meant?), is left to the planner's full parse at the end.
"""

from __future__ import annotations

import json
from typing import Any

from planrail.llm.jsontext import strip_trailing_commas
from planrail.plan.strict_json import loads_noting_repeats

__all__ = ["StepStream"]


class StepStream:
    """Feed text with :meth:`feed`; get back the step objects completed by it."""

    def __init__(self) -> None:
        self._buf: list[str] = []
        self._pos = 0
        self._stack: list[str] = []
        self._in_string = False
        self._escaped = False
        self._string_start = 0
        self._last_string: str | None = None
        self._key_at: dict[int, str | None] = {}
        self._steps_depth: int | None = None
        self._elem_start: int | None = None
        self._done = False
        self.count = 0
        """How many steps have been returned so far."""

    def feed(self, text: str) -> list[dict[str, Any]]:
        """Scan ``text`` (the next piece of the answer); return the steps it completed."""
        self._buf.append(text)
        if self._done:
            return []
        buf = "".join(self._buf)
        self._buf = [buf]
        found: list[dict[str, Any]] = []
        stack = self._stack
        for i in range(self._pos, len(buf)):
            c = buf[i]
            if self._in_string:
                if self._escaped:
                    self._escaped = False
                elif c == "\\":
                    self._escaped = True
                elif c == '"':
                    self._in_string = False
                    self._last_string = buf[self._string_start : i + 1]
                continue
            if not stack and c != "{":
                continue  # prose or a code fence before the plan
            if c == '"':
                self._in_string = True
                self._string_start = i
            elif c == ":" and stack and stack[-1] == "{":
                self._key_at[len(stack)] = _as_key(self._last_string)
            elif c == ",":
                self._key_at.pop(len(stack), None)
            elif c in "{[":
                if (
                    c == "["
                    and self._steps_depth is None
                    and len(stack) == 1
                    and self._key_at.get(1) == "steps"
                ):
                    self._steps_depth = 2
                if c == "{" and self._steps_depth is not None and len(stack) == self._steps_depth:
                    self._elem_start = i
                stack.append(c)
            elif c in "}]":
                if not stack:
                    continue
                stack.pop()
                depth = len(stack)
                self._key_at.pop(depth + 1, None)
                if c == "}" and self._elem_start is not None and depth == self._steps_depth:
                    step = _parse(buf[self._elem_start : i + 1])
                    self._elem_start = None
                    if step is not None:
                        found.append(step)
                        self.count += 1
                elif c == "]" and self._steps_depth is not None and depth == 1:
                    self._steps_depth = None
                    self._done = True
                    break
        self._pos = len(buf)
        return found


def _as_key(token: str | None) -> str | None:
    if token is None:
        return None
    try:
        key = json.loads(token)
    except ValueError:
        return None
    return key if isinstance(key, str) else None


def _parse(text: str) -> dict[str, Any] | None:
    for attempt in (text, strip_trailing_commas(text)):
        try:
            value, repeated = loads_noting_repeats(attempt)
        except ValueError:
            continue
        except RecursionError:  # nested too deep to be a step: the whole answer says so
            return None
        if repeated:  # which value was meant is for the model to say: not startable
            return None
        return value if isinstance(value, dict) else None
    return None
