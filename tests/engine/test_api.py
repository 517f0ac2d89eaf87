"""``planrail.run`` / ``planrail.arun`` / ``prepare``: validate, then execute by dependency."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

import planrail
from planrail.runs import build as api

from .graphs import DIAMOND
from .probes import Recorder, probe_plan


@planrail.tool(side_effects="none")
def add(a: int, b: int) -> int:
    """Adds two numbers."""
    return a + b


PLAN = {
    "goal": "arithmetic",
    "steps": [
        {"id": "x", "tool": "add", "args": {"a": 1, "b": 2}},
        {"id": "y", "tool": "add", "args": {"a": 10, "b": 20}},
        {"id": "z", "tool": "add", "args": {"a": "${x}", "b": "${y}"}, "depends_on": ["x", "y"]},
    ],
    "output": {"total": "${z}"},
}


def test_public_names_are_the_one_run_path() -> None:
    """``planrail.run``, ``planrail.arun`` and ``planrail.prepare`` are the run path's functions."""
    assert planrail.run is api.run
    assert planrail.arun is api.arun
    assert planrail.prepare is api.prepare


def test_run_executes_a_plan_dict_synchronously() -> None:
    """``planrail.run`` validates and runs a plan given as a dict and returns its result, with
    the plan's output resolved from the real outputs."""
    result = planrail.run(PLAN, [add])
    assert result.succeeded
    assert result.output == {"total": 33}
    assert [s["status"] for s in result.to_dict()["steps"]] == ["succeeded"] * 3


async def test_arun_executes_a_plan_file_inside_a_running_loop(tmp_path: Path) -> None:
    """``planrail.arun`` takes a path to a JSON plan (as ``str`` or ``Path``) and can be awaited
    from async code."""
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(PLAN))
    for source in (str(path), path):
        result = await planrail.arun(source, [add], max_concurrency=1)
        assert result.output == {"total": 33}


def test_an_invalid_plan_raises_and_runs_nothing() -> None:
    """An invalid plan raises :class:`planrail.PlanValidationError` carrying every issue, and
    no tool is called."""
    rec = Recorder()
    plan = probe_plan(DIAMOND)
    plan["steps"][3]["depends_on"] = ["b"]  # d references c without declaring it
    plan["steps"].append({"id": "ghost", "tool": "nope"})
    with pytest.raises(planrail.PlanValidationError) as info:
        planrail.run(plan, [rec.tool()])
    codes = {issue.code for issue in info.value.issues}
    assert {"undeclared_dependency", "unknown_tool"} <= codes
    assert rec.calls == []


def test_a_failed_step_does_not_raise() -> None:
    """A step failing is a result, not an exception: ``status`` is ``failed``."""
    rec = Recorder()
    result = planrail.run(probe_plan(DIAMOND, duration=0, fail={"b"}), [rec.tool()])
    assert result.status == "failed"
    assert not result.succeeded
    assert result.steps["d"].status == "skipped"


@pytest.mark.parametrize(
    ("plan", "kind"), [(None, "null"), (5, "a number"), ([PLAN], "a list"), ("[1]", "a list")]
)
def test_a_plan_that_is_not_an_object_is_a_parse_error(plan: object, kind: str) -> None:
    """Not a plan at all (``None``, a number, a list, JSON text of one): the plan is invalid,
    ``parse_error`` saying what was given, as for a file holding one — not a ``TypeError`` from
    inside the loader."""
    report = planrail.validate(plan)  # type: ignore[arg-type]
    assert [(i.code, i.path) for i in report.errors] == [("parse_error", "$")]
    assert report.errors[0].message.endswith(f"not {kind}")
    with pytest.raises(planrail.PlanValidationError, match=f"not {kind}"):
        planrail.run(plan, [add])  # type: ignore[arg-type]


def test_tools_that_are_not_a_list_of_tools_say_so() -> None:
    """One tool where a list is expected, or something else: a ``TypeError`` that says what to
    pass, before anything runs."""
    with pytest.raises(TypeError, match=r"pass \[add\], not the tool"):
        planrail.run(PLAN, add)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="an iterable of tools"):
        planrail.run(PLAN, 5)  # type: ignore[arg-type]


def test_a_store_url_where_a_store_is_expected_says_how_to_open_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``store="runs.db"``: a ``TypeError`` naming ``open_store``, and no file is made."""
    monkeypatch.chdir(tmp_path)
    for store in ("runs.db", "sqlite:///runs.db", tmp_path / "runs.db"):
        with pytest.raises(TypeError, match="open_store"):
            planrail.prepare(PLAN, [add], store=store)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="open_store"):  # resume reads the store first
            api.resume("r1", [add], store=store)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


async def test_run_inside_a_running_loop_says_to_await_arun(
    recwarn: pytest.WarningsRecorder,
) -> None:
    """``planrail.run`` inside a coroutine: a ``RuntimeError`` naming ``arun``, and no
    "coroutine was never awaited" warning (nothing was started)."""
    with pytest.raises(RuntimeError, match=r"await planrail\.arun"):
        planrail.run(PLAN, [add])
    assert not [w for w in recwarn if "never awaited" in str(w.message)]


def test_a_run_id_that_is_not_unicode_text_is_refused_before_anything_runs(
    tmp_path: Path,
) -> None:
    """``run_id`` from undecodable command-line bytes (a lone surrogate): no store could keep
    it, so the execution is refused when it is built, with a message that can be printed;
    the store holds no run and the tool was not called."""
    rec = Recorder()
    with planrail.store.open_store(f"sqlite:///{tmp_path / 'runs.db'}") as store:
        with pytest.raises(planrail.errors.ExecutionError) as caught:
            planrail.run(probe_plan(DIAMOND), [rec.tool()], store=store, run_id="r\udcff")
        assert store.list_runs() == []
    assert "the run id holds a lone surrogate ('\\udcff')" in caught.value.message
    assert rec.calls == []


@pytest.mark.parametrize(
    ("run_id", "problem"),
    [
        ("", "is empty"),  # was: a fresh run under a generated id (an unset --run-id "$VAR")
        ("  ", "is blank"),
        ("a\nb", "holds a control character (U+000A)"),
        ("a\x1b[2Jb", "holds a control character (U+001B)"),
        ("x" * 257, "is 257 characters; at most 256 are allowed"),
        (".", "is '.', which a URL resolves away (no dashboard page could show it)"),
        ("..", "is '..', which a URL resolves away (no dashboard page could show it)"),
    ],
    ids=["empty", "blank", "newline", "escape", "too-long", "dot", "dot-dot"],
)
def test_a_run_id_no_run_should_have_is_refused_before_anything_runs(
    tmp_path: Path, run_id: str, problem: str
) -> None:
    rec = Recorder()
    with planrail.store.open_store(f"sqlite:///{tmp_path / 'runs.db'}") as store:
        with pytest.raises(planrail.errors.ExecutionError) as caught:
            planrail.run(probe_plan(DIAMOND), [rec.tool()], store=store, run_id=run_id)
        assert store.list_runs() == []
    assert caught.value.message == f"the run id {problem}"
    assert rec.calls == []


def test_a_run_stored_under_such_an_id_before_the_rule_is_still_resumed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rule is for new runs: one an earlier planrail stored as ``" "`` (simulated by
    switching the check off while it is created) is approved and run under its own id."""
    from planrail.engine import run_ids
    from planrail.engine.approval import defer

    saved: list[int] = []

    @planrail.tool(side_effects="keyed")
    def save(x: int) -> int:
        saved.append(x)
        return x

    plan = {"goal": "g", "steps": [{"id": "s", "tool": "save", "args": {"x": 1}}]}
    with planrail.store.open_store(f"sqlite:///{tmp_path / 'runs.db'}") as store:
        with monkeypatch.context() as earlier:
            earlier.setattr(run_ids, "run_id_problem", lambda run_id: None)
            waiting = planrail.prepare(plan, [save], store=store, run_id=" ", approver=defer)
            assert asyncio.run(waiting.run()).status == "awaiting_approval"
        assert saved == []
        assert planrail.run(plan, [save], store=store, run_id=" ", approve=True).run_id == " "
        assert store.get_run(" ").status == "succeeded"  # type: ignore[union-attr]
    assert saved == [1]


def test_any_other_text_is_a_run_id() -> None:
    """Free text otherwise: slashes, spaces inside, non-ASCII, 256 characters."""
    rec = Recorder()
    for run_id in ["nightly/2026-12-03", "a b", "é-ü", "x" * 256, "...", ".a", "./b"]:
        assert planrail.run(probe_plan(DIAMOND), [rec.tool()], run_id=run_id).run_id == run_id


class _NoEvents:
    pass


@pytest.mark.parametrize(
    ("options", "error", "said"),
    [
        ({"run_id": 123}, TypeError, "run_id must be a str, not int"),
        ({"max_concurrency": 0}, ValueError, "max_concurrency must be at least 1"),
        ({"max_concurrency": 1.5}, TypeError, "max_concurrency must be a whole number"),
        ({"max_concurrency": True}, TypeError, "max_concurrency must be a whole number"),
        ({"failure_mode": "stop"}, ValueError, "failure_mode must be 'continue' or 'fail_fast'"),
        ({"clock": None}, TypeError, "clock must have now(), monotonic() and sleep()"),
        ({"observers": [_NoEvents()]}, TypeError, "has no on_event(event) method"),
        ({"policy": "strict"}, TypeError, "policy must be a planrail.RunPolicy, not str"),
        ({"security": {"strict": True}}, TypeError, "security must be a planrail.SecurityPolicy"),
    ],
)
def test_an_option_of_the_wrong_kind_is_named_before_anything_runs(
    options: dict[str, object], error: type[Exception], said: str
) -> None:
    """``prepare``/``run``/``arun`` say which option is wrong (not an AttributeError from
    inside the run, not a run with 1.5 or True read as a number), and call nothing."""
    rec = Recorder()
    with pytest.raises(error) as caught:
        planrail.run(probe_plan(DIAMOND), [rec.tool()], **options)  # type: ignore[arg-type]
    assert said in str(caught.value)
    assert rec.calls == []
