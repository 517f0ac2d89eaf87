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

from typing import Any

from planrail._json import encoder
from planrail.plan.model import Step
from planrail.plan.validate_context import Context

__all__ = ["duplicate_calls_pass"]


def duplicate_calls_pass(ctx: Context) -> None:
    """Warning ``duplicate_call``: a step repeats an earlier step's tool and arguments."""
    if ctx.level("warning") == "off":
        return  # duplicate_call is only ever a warning, and none is kept
    # Steps are told apart first by a rough key that any two same calls share (:func:`_rough_key`:
    # cheap, no JSON); a call's exact key (canonical JSON when its arguments nest) is built only
    # once a step with the same rough key has come, and the earlier one's then too. Both maps
    # hold hashes, not keys: holding a key per step made this pass the peak of a validation's
    # memory. Steps whose exact keys share a hash are told apart by building the keys again.
    rough: dict[int, Step | None] = {}  # the one step with a rough key, None once it has more
    exact: dict[int, Step | list[Step]] = {}
    skipped = ctx.skipped
    for step in ctx.steps:
        if step.action != "tool_call" or not step.tool or step.for_each is not None:
            continue
        if skipped and ctx.skips(step, "args"):  # malformed: reported, left out (so empty)
            continue
        digest = hash(_rough_key(step.tool, step.args))
        alone = rough.get(digest, _NEW)
        if alone is _NEW:
            rough[digest] = step
            continue
        if alone is not None:  # the first step with this rough key: no earlier call is its same
            rough[digest] = None
            _earlier(exact, alone)
        earlier = _earlier(exact, step)
        if earlier is not None and earlier.id != step.id:
            ctx.warn(
                "duplicate_call",
                step.id,
                f"{ctx.at(step)}.args",
                f"step '{step.id}' calls '{step.tool}' with the same arguments as step"
                f" '{earlier.id}'; reference ${{{earlier.id}}} instead of calling it again",
            )


_NEW: Any = object()


def _earlier(exact: dict[int, Step | list[Step]], step: Step) -> Step | None:
    """The first step kept in ``exact`` that makes the same call as ``step`` (``step`` is kept
    when none does)."""
    key = _call_key(step.tool or "", step.args)
    if key is None:  # not JSON: reported by the shape pass
        return None
    digest = hash(key)
    seen = exact.get(digest)
    if seen is None:
        exact[digest] = step
        return None
    steps = seen if isinstance(seen, list) else [seen]
    earlier = next((s for s in steps if _call_key(s.tool or "", s.args) == key), None)
    if earlier is None:  # another call whose key has the same hash
        exact[digest] = [*steps, step]
    return earlier


def _rough_key(tool: str, args: dict[str, Any]) -> tuple[Any, ...]:
    """Equal for any two calls whose :func:`_call_key` is equal (and for some others): the tool
    and the arguments that are strings, integers, booleans or nulls (subclasses too: a value
    equal in JSON is equal in Python), without building JSON for the others."""
    if _FLAT.issuperset(map(type, args.values())):
        return tool, frozenset(args.items())
    return tool, frozenset([(k, v) for k, v in args.items() if v is None or isinstance(v, _ROUGH)])


_ROUGH = (str, int)


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
        return tool, _SORTED(args)
    except (TypeError, ValueError):
        return None


_FLAT = frozenset((str, int, bool, type(None)))
_SORTED = encoder(sort_keys=True)
