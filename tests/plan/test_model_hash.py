"""The Plan model: frozen, canonical JSON and the hash an approval is bound to."""

from __future__ import annotations

import json
from typing import Any

import pydantic
import pytest
import yaml

from planrail.plan.model import Plan, Step
from planrail.plan.tools import ToolRegistry
from planrail.plan.validate import load_plan

from .helpers import PLANS


def _reverse_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _reverse_keys(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reverse_keys(v) for v in value]
    return value


@pytest.fixture
def onboarding(catalog: ToolRegistry) -> Plan:
    return load_plan(PLANS / "onboarding.json", catalog)


def test_hash_is_stable_across_key_order(onboarding: Plan, catalog: ToolRegistry) -> None:
    """Reordering every object's keys changes neither the canonical JSON nor the hash."""
    data = json.loads((PLANS / "onboarding.json").read_text(encoding="utf-8"))
    shuffled = load_plan(json.dumps(_reverse_keys(data)), catalog)
    assert shuffled.canonical_json() == onboarding.canonical_json()
    assert shuffled.hash == onboarding.hash


def test_hash_is_stable_across_reloading(onboarding: Plan, catalog: ToolRegistry) -> None:
    """Loading a plan's own canonical JSON gives the same plan and the same hash."""
    again = load_plan(onboarding.canonical_json(), catalog)
    assert again == onboarding
    assert again.hash == onboarding.hash
    assert onboarding.hash.startswith("sha256:")
    assert len(onboarding.hash) == len("sha256:") + 64


def test_yaml_and_json_of_the_same_plan_hash_equal(catalog: ToolRegistry) -> None:
    """onboarding.yaml and onboarding.json are one plan: equal models, equal hashes."""
    from_yaml = load_plan(PLANS / "onboarding.yaml", catalog)
    from_json = load_plan(PLANS / "onboarding.json", catalog)
    assert from_yaml == from_json
    assert from_yaml.hash == from_json.hash
    assert yaml.safe_load((PLANS / "onboarding.yaml").read_text(encoding="utf-8")) == json.loads(
        (PLANS / "onboarding.json").read_text(encoding="utf-8")
    )


def test_one_changed_character_changes_the_hash(onboarding: Plan, catalog: ToolRegistry) -> None:
    """Changing one character anywhere (goal, an arg, an id) changes the hash."""
    text = onboarding.canonical_json()
    for old, new in [("Alice", "Alicf"), ('"pro"', '"pra"'), ("Onboard", "Onboarc")]:
        changed = text.replace(old, new, 1)
        assert changed != text
        plan = load_plan(changed)
        assert plan.hash != onboarding.hash, old


def test_defaults_do_not_affect_the_hash() -> None:
    """Writing a field at its default value (action, join, empty args) is the same plan."""
    terse = load_plan({"steps": [{"id": "a", "tool": "t"}]})
    verbose = load_plan({"steps": [{"id": "a", "tool": "t", "action": "tool_call", "args": {},
                                    "depends_on": [], "join": "all_succeeded"}]})  # fmt: skip
    assert terse.hash == verbose.hash
    assert terse.canonical_json() == '{"steps":[{"id":"a","tool":"t"}]}'


def test_aliases_normalise_to_the_same_hash() -> None:
    """A plan written with LLM aliases hashes like its canonical spelling."""
    canonical = load_plan({"steps": [{"id": "a", "tool": "t", "args": {"x": 1}}]})
    aliased = load_plan({"steps": [{"step_id": "a", "tool_name": "t", "parameters": {"x": 1},
                                    "type": "call_tool"}]})  # fmt: skip
    assert aliased.hash == canonical.hash


def test_canonical_json_is_sorted_compact_and_unicode() -> None:
    """Canonical JSON sorts keys, has no spaces and keeps non-ASCII text as is."""
    plan = load_plan({"goal": "café", "steps": [{"tool": "t", "id": "a"}]})
    assert plan.canonical_json() == '{"goal":"café","steps":[{"id":"a","tool":"t"}]}'


def test_plans_are_frozen(onboarding: Plan) -> None:
    """Nothing can change a validated plan in place."""
    with pytest.raises(pydantic.ValidationError):
        onboarding.goal = "other"  # type: ignore[misc]
    with pytest.raises(pydantic.ValidationError):
        onboarding.steps[0].tool = "other"  # type: ignore[misc]


def test_by_id_and_step_lookup(onboarding: Plan) -> None:
    """``plan.step(id)`` finds a step; ``by_id`` maps every id."""
    assert onboarding.step("welcome").depends_on == ("account", "subscription")
    assert list(onboarding.by_id) == ["account", "subscription", "welcome"]
    assert isinstance(onboarding.step("account"), Step)
