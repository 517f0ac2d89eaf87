"""Canary secrets never appear in clear in the store file, the trace file, the logs, the events
or the error messages — however carelessly the tools handle them."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Any

import pydantic
import pytest

from planrail.engine.executor import Execution
from planrail.plan.define import tool
from planrail.plan.secrets import REDACTED, SECRET, Redactor, is_secret_type, secret_params_of
from planrail.plan.tools import ToolSpec
from planrail.store import open_store

from .kit import (
    CANARY_FETCHED,
    CANARY_LITERAL,
    CANARY_VAULT,
    SecretWorld,
    plan_of,
    secret_plan,
)

CANARIES = (CANARY_LITERAL, CANARY_VAULT, CANARY_FETCHED)


def _files_under(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())


def _assert_no_canary(where: str, blob: str | bytes) -> None:
    for canary in CANARIES:
        needle: Any = canary.encode() if isinstance(blob, bytes) else canary
        assert needle not in blob, f"{canary} found in {where}"


@pytest.mark.parametrize("fail", [False, True])
async def test_canaries_stay_out_of_store_trace_logs_and_events(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, fail: bool
) -> None:
    """Three secrets flow through a run — a plan literal in a secret parameter, a
    ``sensitivity="secret"`` tool's output, and an ordinary tool's field passed into a secret
    parameter — while the tools log them, echo them and raise with them. The tools receive the
    real values; none of them appears in the SQLite files, the trace file, the log records or
    the events."""
    from planrail.observe.trace import TraceWriter

    world = SecretWorld()
    reg = world.registry()
    plan = plan_of(secret_plan(fail=fail), reg)
    store_dir = tmp_path / "store"
    store = open_store(f"sqlite:///{store_dir / 'runs.db'}")
    events: list[Any] = []

    class Spy:
        def on_event(self, event: Any) -> None:
            events.append(event.to_dict())

    execution = Execution(
        plan,
        reg,
        store=store,
        run_id="run_canary",
        observers=[Spy()],
        approval={"plan_hash": plan.hash, "by": "test"},
        approve=True,
    )
    trace = TraceWriter(tmp_path / "trace.jsonl").attach(execution)
    with caplog.at_level(logging.DEBUG, logger="planrail"):
        result = await execution.run()
        logging.getLogger("planrail").error("late log line mentioning %s", CANARY_VAULT)
    trace.close()
    store.close()

    assert sorted(world.seen) == sorted(CANARIES)  # the tools did get the real values
    assert result.steps["a"].status == "succeeded"
    if fail:
        assert result.steps["c"].status == "failed"
        assert REDACTED in (result.steps["c"].error or {})["message"]
    _assert_no_canary("the store files", _files_under(store_dir))
    _assert_no_canary("the trace file", (tmp_path / "trace.jsonl").read_bytes())
    _assert_no_canary("the log records", caplog.text)
    _assert_no_canary("the events", repr(events))
    _assert_no_canary("the step errors", repr([s.error for s in result.steps.values()]))
    assert "calling the API with" in caplog.text  # the log lines are there, scrubbed


async def test_the_stored_records_show_where_secrets_were(tmp_path: Path) -> None:
    """Secret parameters are stored as ``***``, and so are the producer fields that fed them;
    everything else is kept."""
    world = SecretWorld()
    reg = world.registry()
    plan = plan_of(secret_plan(), reg)
    store = open_store(f"sqlite:///{tmp_path / 'runs.db'}")
    await Execution(plan, reg, store=store, run_id="run_rec", approve=True).run()
    steps = store.get_steps("run_rec")
    run = store.get_run("run_rec")
    store.close()
    assert steps["a"].args == {"token": REDACTED, "query": "weather"}
    assert steps["c"].args == {"key": REDACTED, "fail": False}
    assert steps["v"].output == REDACTED
    assert steps["cfg"].output == {"api_key": REDACTED, "region": "eu-west-1"}
    assert steps["c"].output == {"echo": f"key={REDACTED}"}
    assert run is not None
    assert run.plan["steps"][4]["args"]["key"] == REDACTED
    assert run.plan_hash == plan.hash  # the hash is of the real plan


def test_secret_parameters_are_found_from_annotations_and_schemas() -> None:
    """``SecretStr``, ``Annotated[str, SECRET]`` and optional secrets are detected at ``@tool``
    time; catalog tools are detected from ``format: password`` / ``writeOnly``."""

    @tool
    def t(
        a: pydantic.SecretStr,
        b: Annotated[str, SECRET],
        c: pydantic.SecretStr | None = None,
        d: str = "",
    ) -> str:
        return ""

    assert t.spec.secret_params == frozenset({"a", "b", "c"})
    assert is_secret_type(pydantic.SecretBytes)
    assert not is_secret_type(str)
    spec = ToolSpec(
        "remote",
        input_schema={
            "type": "object",
            "properties": {
                "pw": {"type": "string", "format": "password"},
                "key": {"type": "string", "writeOnly": True},
                "q": {"type": "string"},
            },
        },
    )
    assert secret_params_of(spec) == frozenset({"pw", "key"})


def test_short_secrets_are_redacted_in_place_but_not_hunted_in_text() -> None:
    """A secret shorter than four characters is replaced where it sits, not scrubbed from every
    other string (that would wreck records and protect nothing)."""
    reg = SecretWorld().registry()
    plan = plan_of({"steps": [{"id": "c", "tool": "leaky", "args": {"key": "abc"}}]}, reg)
    red = Redactor.for_plan(plan, reg)
    assert red is not None
    assert red.args("c", {"key": "abc"}) == {"key": REDACTED}
    assert red.text("abcdef") == "abcdef"


def test_a_plan_without_secret_tools_pays_nothing() -> None:
    """No tool with secrets in the plan: no redactor, nothing done on the hot path."""

    @tool(side_effects="none")
    def plain(x: str) -> str:
        return x

    from planrail.plan.tools import ToolRegistry

    reg = ToolRegistry([plain])
    plan = plan_of({"steps": [{"id": "p", "tool": "plain", "args": {"x": "y"}}]}, reg)
    assert Redactor.for_plan(plan, reg) is None
    assert Execution(plan, reg, approve=True).redactor is None
