"""A corpus of odd tool outputs through every store: each is either stored as documented
(``docs/execution.md``, *Outputs are strict JSON*) or fails its step with an ``OutputError``
naming the path; never ``null`` for a dependent, never a traceback, never a lost outcome of
another step; ``planrail run --json`` output always parses with a strict parser."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import json
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest

import planrail
from planrail.engine.checkpoint import load_result
from planrail.engine.executor import Execution

from .conftest import Opener


class Custom:
    """An object pydantic cannot serialise."""


@dataclasses.dataclass
class Point:
    x: float
    y: float


def _cycle() -> dict[str, Any]:
    d: dict[str, Any] = {"a": 1}
    d["self"] = d
    return d


FAILS: dict[str, tuple[Any, str]] = {
    "nan": ({"score": float("nan")}, "$.score: NaN"),
    "inf": ({"score": float("inf")}, "$.score: Infinity"),
    "-inf": ([1.0, float("-inf")], "$[1]: -Infinity"),
    "nested-nan": ({"rows": [{"v": 1}, {"v": float("nan")}]}, "$.rows[1].v: NaN"),
    "non-str-key": ({1: "one"}, "the key 1 is a int"),
    "tuple-key": ({"m": {(1, 2): 3}}, "$.m: the key (1, 2)"),
    "cycle": (_cycle(), "$.self: the value contains itself"),
    "bytes": ({"blob": b"\x00\x01"}, "$.blob: bytes"),
    "set": ({"tags": {"a", "b"}}, "$.tags: a set has no order"),
    "nan-in-dataclass": (Point(1.0, float("nan")), "$.y: NaN"),
    "custom": ({"obj": Custom()}, "does not fit its return type"),
    "lone-surrogate": ({"s": ["ok", "x\ud800"]}, "$.s[1]: the string holds a lone surrogate"),
    "surrogate-key": ({"k\udcff": 1}, "$: the key 'k\\udcff' holds a lone surrogate"),
    "surrogate-text": ("x\udfff", "$: the string holds a lone surrogate ('\\udfff')"),
}
"""name -> (the value a tool returns, what the step's error must say)."""

STORED: dict[str, tuple[Any, Any]] = {
    "huge-int": ({"n": 10**40}, {"n": 10**40}),
    "datetime": (
        {"at": datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)},
        {"at": "2026-01-02T03:04:05Z"},
    ),
    "decimal": ({"price": decimal.Decimal("1.10")}, {"price": "1.10"}),
    "uuid": (
        {"id": uuid.UUID("12345678-1234-5678-1234-567812345678")},
        {"id": "12345678-1234-5678-1234-567812345678"},
    ),
    "tuple": ({"pair": (1, 2)}, {"pair": [1, 2]}),
    "dataclass": (Point(1.5, 2.0), {"x": 1.5, "y": 2.0}),
    "unicode": ({"s": "\u2028 \U0001f600 \x00"}, {"s": "\u2028 \U0001f600 \x00"}),
}
"""name -> (the value a tool returns, what is stored and handed to dependents)."""


def _plan(tools: list[planrail.Tool]) -> planrail.Plan:
    return planrail.validate(
        {
            "goal": "odd outputs",
            "steps": [
                {"id": "odd", "tool": "odd", "args": {}},
                {"id": "use", "tool": "echo", "args": {"v": "${odd}"}, "depends_on": ["odd"]},
                {"id": "other", "tool": "echo", "args": {"v": 1}},
            ],
        },
        tools,
    ).raise_for_errors()


def _tools(value: Any) -> list[planrail.Tool]:
    @planrail.tool(name="odd", side_effects="none")
    async def odd() -> Any:
        """Returns the odd value."""
        return value

    @planrail.tool(side_effects="none")
    async def echo(v: Any) -> Any:
        """Returns its argument."""
        return v

    return [odd, echo]


@pytest.mark.parametrize("name", sorted(FAILS))
async def test_an_output_strict_json_cannot_hold_fails_its_step_naming_the_path(
    open_store: Opener, name: str
) -> None:
    """The step fails with OutputError naming the place; its dependent is skipped (never fed
    ``null``); the unrelated step's outcome is kept; the store holds no trace of the value and
    the stored result equals the returned one."""
    value, said = FAILS[name]
    tools = _tools(value)
    store = open_store()
    result = await Execution(_plan(tools), tools, store=store, run_id=f"odd-{name}").run()

    odd = result.steps["odd"]
    assert odd.status == "failed"
    assert odd.error is not None
    assert odd.error["type"] == "OutputError"
    assert said in odd.error["message"]
    assert result.steps["use"].status == "skipped"
    assert result.steps["other"].status == "succeeded"
    stored = load_result(store, f"odd-{name}")
    assert stored.steps["odd"].status == "failed"
    assert stored.steps["other"].status == "succeeded"
    assert stored.steps["odd"].output is None


async def test_a_str_tool_returning_a_lone_surrogate_fails_its_step(open_store: Opener) -> None:
    """A tool declared ``-> str`` (whose plain strings skip conversion) is checked too: its
    step fails with OutputError, nothing reaches the store or a dependent."""

    @planrail.tool(name="odd", side_effects="none")
    async def odd() -> str:
        """Returns text that is not Unicode."""
        return "caf\udce9"

    @planrail.tool(side_effects="none")
    async def echo(v: Any) -> Any:
        """Returns its argument."""
        return v

    tools = [odd, echo]
    store = open_store()
    result = await Execution(_plan(tools), tools, store=store, run_id="odd-str").run()
    assert result.steps["odd"].error is not None
    assert result.steps["odd"].error["type"] == "OutputError"
    assert "lone surrogate" in result.steps["odd"].error["message"]
    assert result.steps["use"].status == "skipped"
    assert load_result(store, "odd-str").steps["other"].status == "succeeded"


@pytest.mark.parametrize("name", sorted(STORED))
async def test_an_output_pydantic_converts_is_stored_as_documented(
    open_store: Opener, name: str
) -> None:
    """Values with a documented JSON form are converted once, stored so, and handed to the
    dependent exactly as stored (a resume would see the same)."""
    value, expected = STORED[name]
    tools = _tools(value)
    store = open_store()
    result = await Execution(_plan(tools), tools, store=store, run_id=f"ok-{name}").run()

    assert result.status == "succeeded"
    assert result.steps["odd"].output == expected
    assert result.steps["use"].output == expected
    assert load_result(store, f"ok-{name}").steps["odd"].output == expected


TOOLS_FILE = textwrap.dedent(
    """
    import planrail

    @planrail.tool(side_effects="none")
    def score() -> dict:
        '''A score that is not a number.'''
        return {"score": float("nan"), "inf": float("inf")}

    @planrail.tool(side_effects="none")
    def fine() -> float:
        '''A plain number.'''
        return 1.5
    """
)


def _strict(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise ValueError(f"not strict JSON: {name}")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize(
    "store", ["memory://", "sqlite", pytest.param("pg", marks=pytest.mark.postgres)]
)
def test_run_json_is_strict_json_when_a_tool_returns_nan(
    tmp_path: Path, store: str, request: pytest.FixtureRequest
) -> None:
    """``planrail run --json`` with a tool returning NaN under ``-> dict``: exit 1, the step
    failed naming ``$.score`` (not turned into null), the other step's output kept, and stdout
    parses with a parser that refuses NaN/Infinity; no traceback."""
    (tmp_path / "tools.py").write_text(TOOLS_FILE)
    plan = {
        "goal": "nan",
        "steps": [
            {"id": "s", "tool": "score", "args": {}},
            {"id": "f", "tool": "fine", "args": {}},
        ],
    }
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    url = {"sqlite": f"sqlite:///{tmp_path / 'runs.db'}"}.get(store, store)
    if store == "pg":
        url = request.getfixturevalue("pg_url")
    planrail_bin = Path(sys.executable).with_name("planrail")
    proc = subprocess.run(
        [str(planrail_bin), "run", "plan.json", "-t", "tools.py", "--json", "--store", url],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    result = _strict(proc.stdout)
    steps = {s["id"]: s for s in result["steps"]}
    assert steps["s"]["status"] == "failed"
    assert "$.score: NaN" in steps["s"]["error"]["message"]
    assert steps["f"]["output"] == 1.5
