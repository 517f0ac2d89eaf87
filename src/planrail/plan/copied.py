"""Literals a model copied: value matching of a plan's literals against what its author saw.

A plan written by a model that had read tool outputs (a replan sees the finished steps'
outputs) can carry an attacker's value as a *literal*: the model copied
``attacker@evil.example`` out of an e-mail into ``send_email(to=...)``. Provenance alone would
label it ``user``. :class:`Seen` indexes the outputs the plan's author saw; a literal that
occurs in one of them carries that output's sources instead (CaMeL-style value matching), so
policies and the approval screen treat it as untrusted.

What counts as a match:

- a literal string of four characters or more that occurs inside a seen string;
- a *value-like token* of a literal (six characters or more with a digit, ``@``, ``/`` or an
  inner ``.``: addresses, IBANs, URLs, account numbers) that is also a token of a seen string;
- a literal number (not ``0``, ``1`` or a boolean) equal to a seen number, or to a number
  written in a seen string.

A value that also occurs in what the user typed (the goal) stays the user's: exact value
matching, see :func:`in_goal`. Everything is linear in the size of what was seen.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from planrail.plan.compiled import CompiledPlan
    from planrail.plan.model import Step
    from planrail.plan.provenance import Provenance, Source, Sources
    from planrail.plan.tools import ToolRegistry

__all__ = ["Seen", "in_goal", "number_text", "provenance_for", "value_tokens"]

_TOKEN = re.compile(r"[^\s\"'<>,;()\[\]{}|]+")
_STRIP = ".!?:"
MIN_TEXT = 4
MIN_TOKEN = 6
MAX_LEAVES = 20_000
"""Seen strings and numbers indexed at most (a bound on the work per plan)."""


def value_tokens(text: str) -> list[str]:
    """The value-like tokens of ``text`` (addresses, IBANs, URLs, numbers with digits)."""
    out = []
    for raw in _TOKEN.findall(text):
        tok = raw.strip(_STRIP)
        if len(tok) < MIN_TOKEN:
            continue
        if any(c.isdigit() for c in tok) or "@" in tok or "/" in tok or "." in tok:
            out.append(tok)
    return out


def number_text(n: float) -> list[str]:
    """How a number may be written in text (``42``, ``42.5``, ``42.50``)."""
    forms = {repr(n)}
    if float(n).is_integer():
        forms.add(str(int(n)))
    forms.add(f"{n:.2f}")
    return sorted(forms)


def _numbers_in(text: str) -> list[float]:
    found = []
    for tok in re.findall(r"\d[\d,]*(?:\.\d+)?", text):
        try:
            found.append(float(tok.replace(",", "")))
        except ValueError:  # pragma: no cover - the pattern only matches numbers
            continue
    return found


def in_goal(value: Any, goal: str) -> bool:
    """Whether ``value`` (a string, number or list of them) occurs in ``goal`` exactly: the
    user typed it. Strings of fewer than four characters never count."""
    if not goal:
        return False
    kind = type(value)
    if kind is str:
        return len(value.strip()) >= MIN_TEXT and value.strip() in goal
    if kind is int or kind is float:
        return any(
            re.search(rf"(?<![\d.]){re.escape(form)}(?![\d])", goal) for form in number_text(value)
        )
    if kind is list:
        return bool(value) and all(in_goal(v, goal) for v in value)
    return False


@dataclass
class Seen:
    """What a plan's author saw before writing it: the outputs of finished steps, each with the
    sources it carries (only tool and LLM sources that are not trusted taint a literal)."""

    goal: str = ""
    _texts: list[tuple[str, Sources]] = field(default_factory=list)
    _tokens: dict[str, Sources] = field(default_factory=dict)
    _numbers: dict[float, Sources] = field(default_factory=dict)

    @classmethod
    def of(cls, outputs: Iterable[tuple[Any, Sources]], goal: str = "") -> Seen:
        """From ``(output, its sources)`` pairs."""
        seen = cls(goal)
        for output, sources in outputs:
            seen.add(output, sources)
        return seen

    def __bool__(self) -> bool:
        return bool(self._texts or self._numbers)

    def add(self, output: Any, sources: Sources) -> None:
        taint = frozenset(
            replace(s, copied=True) for s in sources if s.kind != "user" and not s.trusted
        )
        if not taint:
            return
        stack = [output]
        while stack and len(self._texts) + len(self._numbers) < MAX_LEAVES:
            v = stack.pop()
            kind = type(v)
            if kind is str:
                self._texts.append((v, taint))
                for tok in value_tokens(v):
                    self._tokens[tok] = self._tokens.get(tok, frozenset()) | taint
                for n in _numbers_in(v):
                    self._numbers[n] = self._numbers.get(n, frozenset()) | taint
            elif kind is int or kind is float:
                self._numbers[v] = self._numbers.get(v, frozenset()) | taint
            elif kind is dict:
                stack.extend(v.values())
                stack.extend(k for k in v if isinstance(k, str))
            elif kind is list:
                stack.extend(v)

    def literal(self, value: Any) -> Sources:
        """The sources a literal copied from what was seen carries (empty: not copied)."""
        kind = type(value)
        found: set[Source] = set()
        if kind is str:
            text = value.strip()
            if len(text) >= MIN_TEXT and text not in self.goal:
                for seen, sources in self._texts:
                    if text in seen:
                        found |= sources
            for tok in value_tokens(value):
                if tok in self._tokens and tok not in self.goal:
                    found |= self._tokens[tok]
        elif (kind is int or kind is float) and value not in (0, 1):
            hit = self._numbers.get(value)
            if hit and not in_goal(value, self.goal):
                found |= hit
        return frozenset(found)


def provenance_for(
    steps: Mapping[str, Step],
    registry: ToolRegistry | None,
    *,
    goal: str = "",
    trusted: Iterable[str] = (),
    seen: Mapping[str, Any] | None = None,
    compiled: CompiledPlan | None = None,
) -> Provenance:
    """The provenance a run decides with: ``trusted`` sources, the ``goal`` the user typed,
    and ``seen`` — the outputs (by step id) the plan's author read before writing it (the
    finished steps a replan reuses), whose values taint the literals copied from them."""
    from planrail.plan.provenance import Provenance

    prov = Provenance(steps, registry, trusted=trusted, goal=goal, compiled=compiled)
    if seen:
        pairs = [(out, prov.output(sid)) for sid, out in seen.items() if sid in steps]
        index = Seen.of(pairs, goal)
        # the reused steps were analysed without the index; every other step is analysed with it
        prov.seen = index if index else None
    return prov
