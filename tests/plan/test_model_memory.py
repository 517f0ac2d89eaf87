"""Steps kept compactly (issue 21): shared keys and shared fields sets, same behaviour."""

from __future__ import annotations

import copy
import pickle
import platform
import sys
from typing import Any

import pytest

from planrail.plan import model
from planrail.plan.model import Plan, Step
from planrail.plan.tools import ToolRegistry
from planrail.plan.validate import load_plan

from .helpers import PLANS


def _step(sid: str, **extra: Any) -> Step:
    return Step.model_validate({"id": sid, "tool": "t", "args": {"x": [1, 2]}, **extra})


def _plain(monkeypatch: pytest.MonkeyPatch, source: Any, catalog: ToolRegistry) -> Plan:
    """``source`` loaded with steps kept the way pydantic keeps them (no compaction)."""
    with monkeypatch.context() as m:
        m.setattr(model, "_compact", lambda step: None)
        return load_plan(source, catalog)


@pytest.mark.parametrize("name", ["onboarding.json", "onboarding.yaml", "warnings.yaml"])
def test_compact_steps_dump_hash_and_compare_as_before(
    name: str, catalog: ToolRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    compact = load_plan(PLANS / name, catalog)
    plain = _plain(monkeypatch, PLANS / name, catalog)
    assert compact.hash == plain.hash
    assert compact.model_dump() == plain.model_dump()
    assert compact.model_dump(exclude_unset=True) == plain.model_dump(exclude_unset=True)
    assert compact == plain
    for a, b in zip(compact.steps, plain.steps, strict=True):
        assert a.model_fields_set == b.model_fields_set
        assert list(a.__dict__) == list(b.__dict__) == list(Step.model_fields)
        assert repr(a) == repr(b)


def test_steps_giving_the_same_fields_share_one_set_no_caller_can_change() -> None:
    a, b = _step("a"), _step("b")
    assert a.__pydantic_fields_set__ is b.__pydantic_fields_set__
    got = a.model_fields_set
    got.add("description")
    got.discard("tool")
    assert a.model_fields_set == b.model_fields_set == {"id", "tool", "args"}
    assert "description" not in a.model_dump(exclude_unset=True)


def test_a_copy_with_an_update_changes_only_the_copy() -> None:
    a, b = _step("a"), _step("b")
    c = a.model_copy(update={"description": "new"})
    assert c.description == "new"
    assert c.model_fields_set == {"id", "tool", "args", "description"}
    assert a.model_fields_set == b.model_fields_set == {"id", "tool", "args"}
    assert a.description is None
    assert b.description is None
    assert a.model_dump(exclude_unset=True) == {"id": "a", "tool": "t", "args": {"x": [1, 2]}}


def test_steps_with_equal_values_do_not_share_their_mutable_ones() -> None:
    a, b = _step("a"), _step("b")
    a.args["x"].append(3)
    a.args["y"] = 1
    assert b.args == {"x": [1, 2]}
    assert a.args == {"x": [1, 2, 3], "y": 1}


def test_other_ways_to_make_a_step_keep_their_fields() -> None:
    built = _step("a", depends_on=["b"], when={"==": [1, 1]})
    for other in (
        Step.model_validate_json(built.model_dump_json(exclude_unset=True)),
        Step.model_construct(**built.model_dump(exclude_unset=True)),
        copy.deepcopy(built),
        copy.copy(built),
        pickle.loads(pickle.dumps(built)),
    ):
        assert other == built
        assert other.model_dump() == built.model_dump()
        assert other.model_fields_set == {"id", "tool", "args", "depends_on", "when"}


def test_past_the_bound_a_step_keeps_its_own_fields_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model, "_FIELDS_SETS", {})
    monkeypatch.setattr(model, "_MAX_FIELDS_SETS", 1)
    a, b = _step("a"), _step("b", model="m")
    c = _step("c", model="m")
    assert len(model._FIELDS_SETS) == 1
    assert b.__pydantic_fields_set__ is not c.__pydantic_fields_set__
    assert b.model_fields_set == c.model_fields_set == {"id", "tool", "args", "model"}
    assert a.model_fields_set == {"id", "tool", "args"}


@pytest.mark.skipif(
    platform.python_implementation() != "CPython", reason="split dicts are CPython's"
)
def test_a_steps_fields_take_less_than_a_dict_of_their_own() -> None:
    step = _step("a")
    assert sys.getsizeof(step.__dict__) < sys.getsizeof(dict(step.__dict__)) / 2
