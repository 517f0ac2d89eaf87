"""The ``duplicate_call`` warning: two steps that would make exactly the same tool call.

Two ``tool_call`` steps with the same tool and the same ``args`` (compared as canonical JSON)
call the tool twice with the same resolved arguments: references in them point at the same
outputs, which never change once produced. That is almost always a planning slip (the second
step should reference the first one's output); the run-time guard
(``RunPolicy.max_identical_calls``) stops the pattern when it repeats. Steps with ``for_each``
are not compared: ``${item}`` differs per item. It is a warning, not an error: a tool read
twice on purpose (a clock, a queue) is legitimate.
"""

from __future__ import annotations

import json
from typing import Any

from planrail.plan.model import Step
from planrail.plan.validate_context import Context

__all__ = ["duplicate_calls_pass"]


def duplicate_calls_pass(ctx: Context) -> None:
    """Warning ``duplicate_call``: a step repeats an earlier step's tool and arguments."""
    # The first step of each call, by the hash of the call's key: a big plan's keys are mostly
    # canonical JSON texts, and holding one per step made this pass the peak of a validation's
    # memory. Steps whose keys share a hash are told apart by building the earlier keys again.
    first: dict[int, Step | list[Step]] = {}
    skipped = ctx.skipped
    for step in ctx.steps:
        if step.action != "tool_call" or not step.tool or step.for_each is not None:
            continue
        if skipped and ctx.skips(step, "args"):  # malformed: reported, left out (so empty)
            continue
        key = _call_key(step.tool, step.args)
        if key is None:  # not JSON: reported by the shape pass
            continue
        digest = hash(key)
        seen = first.get(digest)
        if seen is None:
            first[digest] = step
            continue
        steps = seen if isinstance(seen, list) else [seen]
        earlier = next((s for s in steps if _call_key(s.tool or "", s.args) == key), None)
        if earlier is None:  # another call whose key has the same hash
            first[digest] = [*steps, step]
        elif earlier.id != step.id:
            ctx.warn(
                "duplicate_call",
                step.id,
                f"{ctx.at(step)}.args",
                f"step '{step.id}' calls '{step.tool}' with the same arguments as step"
                f" '{earlier.id}'; reference ${{{earlier.id}}} instead of calling it again",
            )


def _call_key(tool: str, args: dict[str, Any]) -> tuple[Any, ...] | None:
    """What two calls share exactly when they are the same call: flat arguments of strings,
    integers, booleans and nulls as a frozenset of their items (in any order: keys are unique)
    and the keys that hold booleans (``1`` is not ``true``, though they compare equal; no other
    two of these types do), anything else as canonical JSON."""
    kinds = set(map(type, args.values()))
    if _FLAT.issuperset(kinds):
        bools = frozenset(k for k, v in args.items() if type(v) is bool) if bool in kinds else None
        return tool, frozenset(args.items()), bools
    try:
        return tool, json.dumps(args, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        return None


_FLAT = frozenset((str, int, bool, type(None)))
