"""Reading a model's plan answer: repeated keys, unreadable text, enormous and empty answers.

Each answer that cannot be taken as it stands goes back to the model with an accurate reason
(the repair loop), or ends planning with a PlanningError saying what was wrong last."""

from __future__ import annotations

import json

import pytest

from planrail.agent import Agent, approve_all
from planrail.llm.errors import LLMAnswerError
from planrail.llm.jsontext import RepeatedKey, extract_json
from planrail.plan.loader import PlanLimits
from planrail.planner import Planner, PlanningError, StepStream
from planrail.testing.llm import Scripted, ScriptedLLM

from .conftest import FakeClock, Kit
from .plans import GOAL, good_plan

GOOD = json.dumps(good_plan())
FIRST_ARGS = '"args": {"query": "graph planning"}'
TWO_ARGS = GOOD.replace(FIRST_ARGS, f'{FIRST_ARGS}, "args": {{"query": "cats"}}')
"""A plan whose first step (search) holds "args" twice: json.loads would keep "cats"."""


def test_repeated_keys_are_reported_with_their_paths_in_text_order() -> None:
    """With a ``duplicates`` list every repeated key is named, nested ones too, by JSONPath
    (keys that are not identifiers quoted); the value read keeps the last, as before."""
    found: list[RepeatedKey] = []
    text = '{"a": 1, "a": 2, "b": [{"c": 1, "c": 2}], "x y": {"k": 1, "k": {"z": 1, "z": 2}}}'
    assert extract_json(text, duplicates=found) == {"a": 2, "b": [{"c": 2}], "x y": {"k": {"z": 2}}}
    assert [r.path for r in found] == ["$.a", "$.b[0].c", "$['x y'].k", "$['x y'].k.z"]
    assert extract_json(text) == extract_json(text, duplicates=[])


async def test_a_step_with_args_twice_is_sent_back_naming_the_place(kit: Kit) -> None:
    """Two "args" in one step are not read as the last one: the model is told where, with no
    "plan after the automatic fixes" (no reading of it is the model's), and the plan that is
    returned is the one written unambiguously."""
    llm = ScriptedLLM([TWO_ARGS, GOOD])
    result = await Planner(llm, kit.tools).plan(GOAL)

    (issue,) = result.attempts[0].issues
    assert (issue.code, issue.step, issue.path) == ("duplicate_key", "find", "$.steps[0].args")
    asked = llm.requests[1].messages[-1].content
    assert "- [duplicate_key] step 'find' at $.steps[0].args: the object at $.steps[0]" in asked
    assert "key 'args' more than once" in asked
    assert "The plan after the automatic fixes" not in asked
    assert result.plan.step("find").args == {"query": "graph planning"}


async def test_a_step_with_two_ids_is_named_by_its_place_only(kit: Kit) -> None:
    """A repeated "id" names no step (which id it has is the question), only the path."""
    two_ids = GOOD.replace('"id": "find"', '"id": "find", "id": "search_it"')
    llm = ScriptedLLM([two_ids, GOOD])
    result = await Planner(llm, kit.tools).plan(GOAL)
    (issue,) = result.attempts[0].issues
    assert (issue.code, issue.step, issue.path) == ("duplicate_key", None, "$.steps[0].id")


async def test_a_repair_keeping_one_of_two_values_is_a_new_answer(kit: Kit) -> None:
    """The repair writes the key once, with the value that was last: that is not "the same
    answer again" (its reading was never what the first answer said)."""
    fixed = TWO_ARGS.replace(f"{FIRST_ARGS}, ", "")
    result = await Planner(ScriptedLLM([TWO_ARGS, fixed]), kit.tools).plan(GOAL)
    assert [a.issues for a in result.attempts[1:]] == [[]]
    assert result.plan.step("find").args == {"query": "cats"}


async def test_a_repair_changing_1_to_true_is_a_new_answer(kit: Kit) -> None:
    """Answers are compared as JSON: ``1`` then ``true`` (equal in Python) differ, so the model
    is asked again instead of planning stopping with repeated_answer."""
    one, true = (GOOD.replace('"graph planning"', v, 1) for v in ("1", "true"))
    llm = ScriptedLLM([one, true, GOOD])
    result = await Planner(llm, kit.tools).plan(GOAL)
    assert len(llm.requests) == 3
    codes = [[i.code for i in a.issues] for a in result.attempts]
    assert codes == [["type_mismatch"], ["type_mismatch"], []]


def test_a_streamed_step_with_a_repeated_key_is_not_startable() -> None:
    """The stream hands on no step that holds a key twice; the steps around it come out."""
    text = '{"steps": [{"id": "a", "args": {"q": 1}, "args": {"q": 2}}, {"id": "b"}]}'
    assert StepStream().feed(text) == [{"id": "b"}]


async def test_a_streamed_read_only_step_with_args_twice_is_not_started_early(kit: Kit) -> None:
    """Streaming dispatch starts read-only steps early; one with two "args" is not started
    with the last of them: the repaired plan runs, and search saw only its query."""
    cut = TWO_ARGS.index('"id": "summary"')
    first = Scripted(TWO_ARGS, chunks=[TWO_ARGS[:cut], TWO_ARGS[cut:]])
    llm = ScriptedLLM([first, GOOD, "A summary."])
    result = await Agent(llm, kit.tools, approval=approve_all, stream=True).run(GOAL)
    assert result.status == "succeeded", result.reason
    assert result.attempts[0].streamed
    early = [e.step_id for e in result.trace if e.type == "step_dispatched_early"]
    assert "find" not in early
    assert [args for name, args in kit.calls if name == "search"] == [{"query": "graph planning"}]


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (
            "Here is the plan:\n" + GOOD[:40],
            "not valid JSON (line 2, column 10: Unterminated string starting at); the JSON in it"
            " never closes (was the answer cut off?)",
        ),
        (
            "Sure:\n```json\n" + GOOD.replace('"tool": "search"', '"tool" "search"') + "\n```\n",
            "not valid JSON (line 3, column 118: Expecting ':' delimiter)",
        ),
        ('{"steps": [{"id": "a", "args": {"n": ' + "9" * 5000 + "}}]}", "5000 digits"),
    ],
    ids=["prose-then-cut-off", "fenced-typo", "long-integer"],
)
async def test_an_unreadable_answer_is_sent_back_with_where_it_goes_wrong(
    kit: Kit, answer: str, reason: str
) -> None:
    """The parse error's line and column are the answer's (not of prose before the JSON), an
    answer whose JSON never closes says so, and no advice meant for Python programmers."""
    llm = ScriptedLLM([answer, GOOD])
    result = await Planner(llm, kit.tools).plan(GOAL)
    (issue,) = result.attempts[0].issues
    assert issue.code == "parse_error"
    assert reason in issue.message
    assert "sys.set_int_max_str_digits" not in issue.message
    assert reason in llm.requests[1].messages[-1].content


def test_prose_holding_brackets_before_the_plan_does_not_hide_it() -> None:
    """Bracketed prose before the JSON ("use the {tools} [below]") is passed over."""
    assert extract_json('Use {curly} braces [ok]:\n{"a": [1]}\nThanks {x}') == {"a": [1]}


async def test_an_answer_larger_than_a_plan_file_may_be_is_not_read(kit: Kit) -> None:
    """An answer over ``PlanLimits.max_plan_bytes`` is sent back as ``limit_exceeded``, as the
    same plan in a file would be refused, though each of its strings is within bounds."""
    big = good_plan()
    big["steps"][0]["args"]["query"] = "graph planning " * 300
    llm = ScriptedLLM([big, GOOD])
    result = await Planner(llm, kit.tools, limits=PlanLimits(max_plan_bytes=4000)).plan(GOAL)
    (issue,) = result.attempts[0].issues
    assert issue.code == "limit_exceeded"
    assert "bytes; a plan may be at most 4,000 (PlanLimits.max_plan_bytes)" in issue.message
    assert len(llm.requests) == 2


async def test_an_answer_with_more_steps_than_max_steps_is_sent_back(kit: Kit) -> None:
    """The schema asks for at most ``max_steps`` steps; a model answering without it (JSON
    mode, a provider that ignores ``maxItems``) is held to the same bound by the planner."""
    plan = good_plan()
    extra = [{"id": f"more_{i}", "tool": "search", "args": {"query": f"q{i}"}} for i in range(3)]
    long = {**plan, "steps": [*plan["steps"], *extra]}
    allowed = len(plan["steps"])
    llm = ScriptedLLM([long, GOOD])
    result = await Planner(llm, kit.tools, max_steps=allowed).plan(GOAL)
    (issue,) = result.attempts[0].issues
    assert issue.code == "limit_exceeded"
    assert issue.path == "$.steps"
    assert f"has {allowed + 3} steps; at most {allowed} are allowed" in issue.message
    assert len(result.plan.steps) == allowed
    assert len(llm.requests) == 2


async def test_a_model_that_only_answers_nothing_ends_planning_saying_so(
    kit: Kit, clock: FakeClock
) -> None:
    """Empty answers are retried by the planner's own policy (the same request, on the
    clock), then PlanningError says the model answered nothing usable — not that it could
    not be asked — and keeps the attempt with each retry."""
    llm = ScriptedLLM([" \n\t "] * 4)
    with pytest.raises(PlanningError) as info:
        await Planner(llm, kit.tools, clock=clock).plan(GOAL)
    assert (
        str(info.value)
        == "the model gave no usable answer (4 attempts): the model's answer is empty"
    )
    assert len(llm.requests) == 4
    assert clock.sleeps == [1, 2, 4]
    assert len(info.value.attempts[0].retries) == 3
    assert isinstance(info.value.__cause__, LLMAnswerError)
