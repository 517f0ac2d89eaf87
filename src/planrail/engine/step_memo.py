"""What a run's step runner derives from a step once and reuses for the run: each field's
filler, each predicate, the step's effect, its fallback call as a step.

Most steps fill their arguments exactly once, where compiling them would cost more than it
saves: the first fill walks the value directly, and only a second fill of the same field (a
retry, a fan-out item, a loop iteration) compiles it for reuse.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from planrail.plan.effects import Effect, step_effect, tool_effect
from planrail.plan.fill import Filler
from planrail.plan.first import compile_args, fill_first
from planrail.plan.model import Step
from planrail.plan.predicates import Predicate, compile_predicate
from planrail.plan.refs import Parse
from planrail.plan.resolve import resolve_value
from planrail.plan.tools import ToolRegistry

__all__ = ["StepMemo"]

_UNKNOWN = tool_effect(None)
"""The effect of a tool nobody knows: unsafe."""

Key = str | tuple[str, str]
"""A step's id for its ``args`` (no tuple per step), ``(id, field)`` for its other fields."""


class StepMemo:
    """The derived values of one run's steps, each made once: ``parse`` is the plan's parsed
    strings (its compiled plan's ``template``), ``tools`` the run's registry (None: every
    effect unknown)."""

    __slots__ = (
        "_effects",
        "_fallback_steps",
        "_filled_once",
        "_fillers",
        "_predicates",
        "first",
        "parse",
        "tools",
    )

    def __init__(self, parse: Parse, tools: ToolRegistry | None) -> None:
        self.parse = parse
        self.first = functools.partial(_fill_first, parse)
        """How a ``$first`` in a value is filled (:mod:`planrail.plan.first`)."""
        self.tools = tools
        self._fillers: dict[Key, Filler] = {}
        self._filled_once: set[Key] = set()
        """The fields filled once so far (plain steps' arguments aside: the step runner fills
        those itself, once)."""
        self._predicates: dict[tuple[str, str], Predicate] = {}
        self._fallback_steps: dict[str, Step] = {}
        self._effects: dict[tuple[str, str], Effect] = {}

    def filled(self, step: Step, name: str, value: Any, outputs: Mapping[str, Any]) -> Any:
        """``value`` (the field ``name`` of ``step``) with its references filled from
        ``outputs``; compiled on its second fill."""
        key: Key = step.id if name == "args" else (step.id, name)
        filler = self._fillers.get(key)
        if filler is None:
            if key not in self._filled_once:
                self._filled_once.add(key)
                return resolve_value(value, outputs, self.first, self.parse)
            filler = self._fillers[key] = compile_args(value, self.parse)
        return filler(outputs)

    def predicate(self, step: Step, name: str, value: Any) -> Predicate:
        """The compiled predicate of the field ``name`` of ``step`` (``when``,
        ``repeat.until``)."""
        key = (step.id, name)
        pred = self._predicates.get(key)
        if pred is None:
            pred = self._predicates[key] = compile_predicate(value, self.parse)
        return pred

    def effect(self, step: Step) -> Effect:
        """What calling the step's tool does (:mod:`planrail.plan.effects`); no registry: none
        may run again."""
        key = (step.id, step.tool or "")
        known = self._effects.get(key)
        if known is None:
            known = step_effect(step, self.tools) if self.tools is not None else _UNKNOWN
            self._effects[key] = known
        return known

    def fallback_step(self, step: Step) -> Step:
        """The step's fallback call as a step of its own: the fallback's tool and arguments,
        none of the step's policies."""
        fb_step = self._fallback_steps.get(step.id)
        if fb_step is None:
            assert step.fallback is not None
            fb_step = self._fallback_steps[step.id] = step.model_copy(
                update={
                    "action": "tool_call",
                    "tool": step.fallback.tool,
                    "args": step.fallback.args,
                    "retry": None,
                    "timeout": None,
                    "total_timeout": None,
                    "resource": None,
                    "fallback": None,
                    "repeat": None,
                    "for_each": None,
                    "compute": None,
                    "remote_output": False,
                }
            )
        return fb_step


def _fill_first(parse: Parse, value: dict[str, Any], outputs: Mapping[str, Any]) -> Any:
    return fill_first(value, outputs, parse)
