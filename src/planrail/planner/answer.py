"""A model's answer read as plan data, or the issues that say why it cannot be.

The text is read tolerantly (:func:`planrail.llm.extract_json`), but never by guessing: an
answer cut off at ``max_tokens`` is not read (``answer_cut_off``), and an object that holds a
key twice (two ``"args"`` in one step) is refused (``duplicate_key``) — JSON readers keep the
last value silently, so the plan run could differ from the plan a person reads. Whether a
repair's answer repeats the previous one is decided here too (:func:`same_answer`).
"""

from __future__ import annotations

import re
from typing import Any

from planrail._json import encoder
from planrail.llm.base import LLMResponse
from planrail.llm.errors import LLMAnswerError
from planrail.llm.jsontext import RepeatedKey, answer_data, extract_json
from planrail.plan.loader import PlanLimits
from planrail.plan.validate import Issue

__all__ = ["read_answer", "same_answer"]


def read_answer(
    response: LLMResponse, limits: PlanLimits, max_steps: int | None = None
) -> tuple[dict[str, Any] | None, list[Issue]]:
    """The plan data in ``response`` (a bare list of steps is read as the plan's ``steps``),
    or ``None`` and the issues to tell the model. An answer larger than a plan file may be
    (``limits.max_plan_bytes``) is not read; one with more than ``max_steps`` steps (what the
    request's schema allows, which a model answering without it may not keep to) is refused."""
    size = _size(response.text, limits.max_plan_bytes)
    if size > limits.max_plan_bytes:
        return None, [
            Issue(
                "limit_exceeded",
                None,
                "$",
                f"your answer is {size:,} bytes; a plan may be at most"
                f" {limits.max_plan_bytes:,} (PlanLimits.max_plan_bytes): write a shorter plan",
            )
        ]
    if response.cut_off:
        return None, [
            Issue(
                "answer_cut_off",
                None,
                "$",
                f"your answer was cut off after {response.usage.output_tokens} tokens"
                " (max_tokens): write a shorter plan, fewer steps, no descriptions",
            )
        ]
    repeated: list[RepeatedKey] = []
    try:
        data = answer_data(response.text, response.data, repeated)
    except LLMAnswerError as exc:
        return None, [Issue("parse_error", None, "$", exc.message)]
    if isinstance(data, list):
        data = {"steps": data}
    if repeated:
        return None, [_repeated_issue(r, data) for r in repeated]
    if not isinstance(data, dict):
        return None, [Issue("parse_error", None, "$", "the plan must be a JSON object")]
    steps = data.get("steps")
    if max_steps is not None and isinstance(steps, list) and len(steps) > max_steps:
        return None, [
            Issue(
                "limit_exceeded",
                None,
                "$.steps",
                f"your plan has {len(steps)} steps; at most {max_steps} are allowed"
                " (Planner(max_steps)): merge steps or leave out what the goal does not need",
            )
        ]
    return data, []


def _size(text: str, limit: int) -> int:
    """The UTF-8 size of ``text`` (its length when that cannot pass ``limit``)."""
    if len(text) * 4 <= limit:
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


def _repeated_issue(repeated: RepeatedKey, data: Any) -> Issue:
    return Issue(
        "duplicate_key",
        _step_of(repeated, data),
        repeated.path,
        f"the object at {_clip(repeated.where)} has the key {_clip(repeated.key)!r} more than"
        " once; only the last value would be read, and it may not be the one you meant:"
        " write the key once",
    )


_IN_STEP = re.compile(r"\$(?:\.steps)?\[(\d+)\]")


def _step_of(repeated: RepeatedKey, data: Any) -> str | None:
    """The id of the step the repeated key is in (none when it is that step's ``id``)."""
    found = _IN_STEP.match(repeated.where)  # $.steps[2]..., or $[2]... in a bare list
    steps = data.get("steps") if isinstance(data, dict) else None
    if found is None or not isinstance(steps, list):
        return None
    if repeated.where == found.group() and repeated.key == "id":
        return None  # which id it has is the question
    step = steps[int(found.group(1))]
    ident = step.get("id") if isinstance(step, dict) else None
    return ident if isinstance(ident, str) else None


def _clip(text: str, n: int = 80) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


_CANONICAL = encoder(sort_keys=True)


def same_answer(text: str, before: str) -> bool:
    """Whether ``text`` says what ``before`` said: the same text, or the same JSON with other
    spacing or key order. Values are compared as JSON (``1``, ``1.0`` and ``true`` differ, as
    Python's ``==`` would not have them), and an answer repeating a key is the same only as
    the same text (its reading is not what it says)."""
    if text.strip() == before.strip():
        return True
    repeated: list[RepeatedKey] = []
    try:
        now, then = (
            extract_json(text, duplicates=repeated),
            extract_json(before, duplicates=repeated),
        )
        return not repeated and _CANONICAL(now) == _CANONICAL(then)
    except (LLMAnswerError, TypeError, ValueError):
        return False
