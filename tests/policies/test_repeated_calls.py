"""The repeated-call guard: the same tool with the same resolved arguments, past the limit,
fails with repeated_call instead of being called."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import random
from typing import Any

import pytest

from planrail.engine.call_guard import CallGuard, _key, canonical_json
from planrail.engine.checkpoint import args_hash
from planrail.errors import RepeatedCallError
from planrail.plan.model import Step
from planrail.policies import RunPolicy
from planrail.testing import ECHO, FaultTool, fail_times, http_error

from .conftest import run_plan


def poll_plan(max_iterations: int = 10) -> dict[str, Any]:
    """A loop whose body never changes: the same status call each iteration."""
    return {
        "steps": [
            {
                "id": "wait",
                "tool": "status",
                "args": {"job": "j1"},
                "repeat": {"until": {"eq": ["${self.state}", "done"]},
                           "max_iterations": max_iterations},
            }
        ]
    }  # fmt: skip


@pytest.mark.looptime
async def test_a_repeat_loop_making_the_same_call_is_stopped_before_max_iterations() -> None:
    """With the default limit (3), the fourth identical iteration is refused: the tool is
    called three times, not ten, and the error names the earlier iterations."""
    tool = FaultTool("status", [{"state": "running"}])
    result = await run_plan(poll_plan(10), [tool])
    step = result.steps["wait"]
    assert result.status == "failed"
    assert tool.call_count == 3
    assert step.error is not None
    assert step.error["type"] == "RepeatedCallError"
    assert step.error["message"] == (
        "'wait' iteration 4 would call 'status' with the same arguments for the 4th time in"
        " this run (earlier: 'wait' iteration 1, 'wait' iteration 2, 'wait' iteration 3);"
        " RunPolicy.max_identical_calls is 3. Change the arguments, or list 'status' in"
        " RunPolicy.repeatable_tools if calling it again is intended"
    )


@pytest.mark.looptime
async def test_a_repeatable_tool_or_a_guard_turned_off_polls_to_the_end() -> None:
    """A tool listed in repeatable_tools, or max_identical_calls=None, is called as often as
    the loop asks."""
    for policy in ({"repeatable_tools": ["status"]}, {"max_identical_calls": None}):
        tool = FaultTool("status", [{"state": "running"}] * 5 + [{"state": "done"}])
        result = await run_plan(poll_plan(10), [tool], policy=policy)
        assert result.status == "succeeded", policy
        assert tool.call_count == 6


@pytest.mark.looptime
async def test_identical_steps_past_the_limit_fail_and_the_limit_is_configurable() -> None:
    """Three steps making the same call under max_identical_calls=2: two are called, the third
    fails with repeated_call naming them; a step with other arguments is not affected."""
    tool = FaultTool("lookup", [ECHO])
    plan = {
        "steps": [
            {"id": "a", "tool": "lookup", "args": {"q": "x"}},
            {"id": "b", "tool": "lookup", "args": {"q": "x"}, "depends_on": ["a"]},
            {"id": "c", "tool": "lookup", "args": {"q": "x"}, "depends_on": ["b"]},
            {"id": "d", "tool": "lookup", "args": {"q": "y"}, "depends_on": ["c"],
             "join": "all_finished"},
        ]
    }  # fmt: skip
    result = await run_plan(plan, [tool], policy={"max_identical_calls": 2})
    assert [s.status for s in result.steps.values()] == [
        "succeeded",
        "succeeded",
        "failed",
        "succeeded",
    ]
    error = result.steps["c"].error
    assert error is not None
    assert error["type"] == "RepeatedCallError"
    assert "(earlier: 'a', 'b')" in error["message"]
    assert tool.call_count == 3


@pytest.mark.looptime
async def test_retries_of_one_call_are_not_counted() -> None:
    """A call retried four times after transient errors is one call: the retry policy bounds
    retries, the guard does not cut them short."""
    tool = fail_times("flaky", 4, http_error(503), value={"ok": True})
    plan = {
        "steps": [
            {"id": "s", "tool": "flaky", "args": {"q": 1},
             "retry": {"max_attempts": 5, "initial_delay": 0.01, "jitter": 0}}
        ]
    }  # fmt: skip
    result = await run_plan(plan, [tool])
    assert result.status == "succeeded"
    assert result.steps["s"].attempts == 5


@pytest.mark.looptime
async def test_fan_out_items_with_the_same_arguments_count_as_calls() -> None:
    """A for_each over four equal items makes three calls; the fourth item is refused, named
    by its index."""
    items = FaultTool("items", [{"xs": [7, 7, 7, 7]}])
    tool = FaultTool("use", [ECHO])
    plan = {
        "steps": [
            {"id": "list", "tool": "items"},
            {"id": "each", "tool": "use", "for_each": "${list.xs}", "args": {"x": "${item}"},
             "max_parallel": 1, "depends_on": ["list"]},
        ]
    }  # fmt: skip
    result = await run_plan(plan, [items, tool])
    error = result.steps["each"].error
    assert error is not None
    assert error["message"].startswith("item 3: 'each' item 3 would call 'use'")
    assert tool.call_count == 3


def test_a_replan_cannot_call_a_kept_step_again() -> None:
    """After new_plan, a call identical to one whose step succeeded before the replan is
    refused at once (reference its output instead); other earlier calls still count."""
    guard = CallGuard(3)
    search = Step(id="find", tool="search", args={"q": "x"})
    assert guard.check(search, None, {}, {"q": "x"}) is None
    guard.new_plan({"find": ("search", {"q": "x"})})
    again = Step(id="find_again", tool="search", args={"q": "x"})
    refused = guard.check(again, None, {}, {"q": "x"})
    assert isinstance(refused, RepeatedCallError)
    assert refused.previous == ("find",)
    assert refused.message == (
        "step 'find_again' would call 'search' with the same arguments as step 'find', which"
        " succeeded before the replan and whose output is kept; reference ${find} instead of"
        " calling it again"
    )
    assert guard.check(again, None, {}, {"q": "other"}) is None


def test_the_guard_ignores_other_actions_and_policy_values_are_checked() -> None:
    """llm_call and condition_check steps are not counted; a bad limit is refused."""
    guard = CallGuard(1)
    think = Step(id="t", action="llm_call", prompt="p")
    assert all(guard.check(think, None, {}, {}) is None for _ in range(3))
    assert CallGuard.for_policy(RunPolicy(max_identical_calls=None)) is None
    assert RunPolicy(repeatable_tools="clock").repeatable_tools == frozenset({"clock"})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_identical_calls"):
        RunPolicy(max_identical_calls=0)


def test_identical_means_the_same_canonical_json() -> None:
    """Arguments are the same call when their canonical JSON is: key order does not matter
    (nested objects too), but 1, 1.0 and true are different values, as are "1" and 1, and
    -0.0 and 0.0; a tuple is the list it holds and a str subclass the text it holds, as in
    JSON. A cycle is an error, not a hang."""

    class Text(str):
        pass

    guard = CallGuard(1)
    step = Step(id="s", tool="t", args={})

    def refused(args: Any) -> bool:
        return guard.check(step, None, {}, args) is not None

    assert not refused({"a": 1, "b": {"x": [1, {"p": 1, "q": 2}], "y": None}})
    assert refused({"b": {"y": None, "x": [1, {"q": 2, "p": 1}]}, "a": 1})
    assert not refused({"a": 1.0, "b": {"x": [1, {"p": 1, "q": 2}], "y": None}})
    assert not refused({"a": True, "b": {"x": [1, {"p": 1, "q": 2}], "y": None}})
    assert not refused({"a": "1", "b": {"x": [1, {"p": 1, "q": 2}], "y": None}})
    assert not refused({"when": Text("noon")})  # a str subclass: compared as JSON text
    assert refused({"when": "noon"})
    assert not refused({"at": [0.5, -0.0, 10**30, "x"]})
    assert refused({"at": [0.5, -0.0, 10**30, "x"]})
    assert not refused({"at": [0.5, 0.0, 10**30, "x"]})
    assert refused({"at": (0.5, 0.0, 10**30, "x")})  # a tuple is the list it holds
    assert not refused({"at": [[0.5]], "n": 1})
    assert refused({"n": 1, "at": ([0.5],)})
    assert not refused({"n": {"at": "noon"}})
    assert refused({"n": {"at": Text("noon")}})
    assert not refused(["é", "\u2028"])
    assert refused(["é", "\u2028"])
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    with pytest.raises(ValueError, match="Circular"):
        guard.check(step, None, {}, cyclic)


def test_the_error_names_plain_calls_and_units_alike() -> None:
    """A plain step's call and a fan-out item's or iteration's are named in the error."""
    guard = CallGuard(2)
    step = Step(id="s", tool="t", args={})
    assert guard.check(step, None, {}, {"q": 1}) is None
    assert guard.check(step, 3, {"iteration": 2}, {"q": 1}) is None
    refused = guard.check(step, None, {"fallback": True}, {"q": 1})
    assert isinstance(refused, RepeatedCallError)
    assert refused.previous == ("'s'", "'s' item 3 iteration 2")
    assert refused.message.startswith("'s' (its fallback) would call 't' with the same")


def test_keys_are_equal_exactly_when_the_canonical_json_is() -> None:
    """On generated arguments (flat and nested, shuffled key order, tuples for lists), two
    calls share a key exactly when their JSON with sorted keys is the same text."""
    rng = random.Random(7)

    def value(depth: int) -> Any:
        pick = rng.randrange(8 if depth < 2 else 5)
        scalars = ["a", "b", "{", "(", 1, 2, 1.0, True, False, None, 0.5]
        if pick < 5:
            return rng.choice(scalars)
        if pick < 7:
            return [value(depth + 1) for _ in range(rng.randrange(3))]
        return {rng.choice("xyz"): value(depth + 1) for _ in range(rng.randrange(3))}

    def variant(v: Any) -> Any:  # the same JSON written another way
        if isinstance(v, dict):
            items = list(v.items())
            rng.shuffle(items)
            return {k: variant(x) for k, x in items}
        if isinstance(v, list):
            items = [variant(x) for x in v]
            return tuple(items) if rng.random() < 0.5 else items
        return v

    samples = [{rng.choice("pqrs"): value(0) for _ in range(rng.randrange(4))} for _ in range(400)]
    for args in samples:
        assert _key("t", args) == _key("t", variant(args))
    by_text: dict[str, int] = {}
    for args in samples:
        text = json.dumps(args, sort_keys=True, separators=(",", ":"))
        assert by_text.setdefault(text, _key("t", args)) == _key("t", args)
    assert len(set(by_text.values())) == len(by_text)  # different JSON, different keys


def test_the_canonical_text_is_json_dumps_sorted_so_stored_argument_hashes_hold() -> None:
    """``canonical_json`` (the guard's key and the intent's ``args_hash``) is exactly the
    ``json.dumps`` text the intent hash was made of before: a run stored by an earlier
    planrail resumes without its arguments looking changed."""
    samples: list[Any] = [
        {"b": [1, 2.5, None, True], "a": {"é": "ü", "z": "\u2028"}},
        [{"x": float("inf")}, -0.0, 10**20, 'quote"back\\slash'],
        {"when": dt.date(2026, 12, 1), "set": "not JSON, as text"},
        (1, ("nested", "tuple")),
        {},
        "plain",
    ]
    for v in samples:
        before = json.dumps(
            v, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
        )
        assert canonical_json(v) == before
        assert args_hash(v) == "sha256:" + hashlib.sha256(before.encode()).hexdigest()
