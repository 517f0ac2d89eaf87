"""Trace files: written as JSON Lines, replayed into the same view the store gives, secrets
redacted, robust to appends, several runs and a torn last line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planrail.engine.events import Event, EventType
from planrail.observe.trace import TraceError, TraceWriter, read_trace
from planrail.observe.view import RunView, looks_secret, redact
from planrail.store import open_store

from .helpers import RUN, ev, make_execution, run

E = EventType


def traced_run(tmp_path: Path, **options: object) -> tuple[Path, RunView]:
    """Run the all-outcomes plan into a SQLite store with a trace; return the trace path and
    the view from the store."""
    path = tmp_path / "run.jsonl"
    store = open_store(f"sqlite:///{tmp_path / 'store.db'}")
    execution = make_execution(store=store, **options)
    TraceWriter(path).attach(execution)
    run(execution)
    view = RunView.from_store(store, RUN)
    assert view is not None
    return path, view


def test_replayed_trace_equals_the_store(tmp_path: Path) -> None:
    """Everything ``show`` uses — result, plan, events, inputs, keys — is the same from both."""
    path, stored = traced_run(tmp_path)
    replayed = read_trace(path)
    assert replayed.result.to_dict() == stored.result.to_dict()
    assert replayed.summary() == stored.summary()
    assert replayed.plan == stored.plan
    assert replayed.events == stored.events
    assert replayed.args == stored.args
    assert replayed.keys == stored.keys
    for sid in stored.result.steps:
        assert replayed.step_detail(sid) == stored.step_detail(sid)


def test_trace_lines_have_kinds_in_order(tmp_path: Path) -> None:
    """A ``run`` header first, a ``result`` line last, events and step records between."""
    path, _ = traced_run(tmp_path)
    kinds = [json.loads(line)["kind"] for line in path.read_text().splitlines()]
    assert kinds[0] == "run"
    assert kinds[-1] == "result"
    assert set(kinds[1:-1]) == {"event", "step"}


def test_secrets_never_reach_the_trace_in_clear(tmp_path: Path) -> None:
    """The secret parameter's value is in neither the plan nor the inputs of the trace."""
    path, _ = traced_run(tmp_path)
    assert "hunter2" not in path.read_text()
    view = read_trace(path)
    assert view.args["auth"] == {"user": "alice", "password": "***"}


def test_events_only_trace_rebuilds_statuses(tmp_path: Path) -> None:
    """Without an execution, the reader rebuilds statuses, attempts, errors and usage."""
    path = tmp_path / "events.jsonl"
    with TraceWriter(path) as writer:
        result = run(make_execution(observers=[writer]))
    view = read_trace(path)
    for sid, r in result.steps.items():
        got = view.result.steps[sid]
        assert (got.status, got.attempts, got.error, got.reason, got.usage) == (
            r.status,
            r.attempts,
            r.error,
            r.reason,
            r.usage,
        )
    assert view.result.status == result.status


def test_appended_executions_and_other_runs(tmp_path: Path) -> None:
    """Two runs in one file: each is read back on its own; the last is the default."""
    path = tmp_path / "t.jsonl"
    with TraceWriter(path) as w:
        for e in (
            ev(E.RUN_STARTED, 0.0),
            ev(E.STEP_STARTED, 0.0, "a", 1),
            ev(E.STEP_SUCCEEDED, 1.0, "a", 1),
        ):
            w.on_event(e)
    with TraceWriter(path) as w:
        w.on_event(ev(E.RUN_FINISHED, 2.0, status="succeeded"))
        w.on_event(Event(E.RUN_STARTED, "other", 5.0))
    mine = read_trace(path, RUN)
    assert mine.result.status == "succeeded"
    assert mine.result.steps["a"].finished_at == 1.0
    assert read_trace(path).run_id == "other"
    with pytest.raises(TraceError, match="no run 'nope'"):
        read_trace(path, "nope")


def test_torn_last_line_is_ignored_but_corruption_is_not(tmp_path: Path) -> None:
    """A run killed mid-write leaves a partial last line: the rest is still read. A bad line
    elsewhere is an error naming the line."""
    path = tmp_path / "t.jsonl"
    head = json.dumps({"kind": "run", "run_id": RUN, "at": 0.0})
    path.write_text(head + "\n" + '{"kind": "event", "ty')
    assert read_trace(path).run_id == RUN
    path.write_text('{"kind": "ev\n' + head + "\n")
    with pytest.raises(TraceError, match=r"t\.jsonl:1: not a JSON line"):
        read_trace(path)
    with pytest.raises(TraceError, match="cannot read"):
        read_trace(tmp_path / "missing.jsonl")


def test_a_trace_file_that_is_not_text_or_never_ends_is_a_trace_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bytes that are not UTF-8 were a UnicodeDecodeError traceback out of ``planrail show
    --trace``, and ``/dev/zero`` was read until memory ran out (5 GB in 15 s)."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"kind": "run"}\n\xff\xfe\n')
    with pytest.raises(TraceError, match=r"t\.jsonl: not UTF-8 text \(byte 16\)"):
        read_trace(path)
    endless = Path("/dev/zero")
    if endless.exists():
        monkeypatch.setattr("planrail.observe.trace.MAX_TRACE_BYTES", 10_000)
        with pytest.raises(TraceError, match="the trace file is more than 10,000 bytes"):
            read_trace(endless)


def test_a_failing_trace_file_stops_the_trace_not_the_run(caplog: pytest.LogCaptureFixture) -> None:
    """A write error is logged once on the ``planrail`` logger; the run finishes."""

    class Full:
        def write(self, text: str) -> int:
            raise OSError(28, "No space left on device")

        def flush(self) -> None:
            return None

    execution = make_execution()
    writer = TraceWriter(Full(), execution)  # type: ignore[arg-type]
    execution.observers.append(writer)
    with caplog.at_level("WARNING", logger="planrail"):
        result = run(execution)
    assert result.steps["retry"].status == "succeeded"
    assert len([r for r in caplog.records if "trace file" in r.getMessage()]) == 1


def test_redact_and_secret_names() -> None:
    """Declared names and secret-looking names are redacted at any depth; others are kept."""
    value = {"user": "a", "pw": "x", "nested": [{"api_key": "k", "max_tokens": 5}]}
    assert redact(value, {"pw"}) == {
        "user": "a",
        "pw": "***",
        "nested": [{"api_key": "***", "max_tokens": 5}],
    }
    assert value["pw"] == "x"
    assert [
        n for n in ("access_token", "password", "Authorization", "tokens") if looks_secret(n)
    ] == [
        "access_token",
        "password",
        "Authorization",
    ]


def test_a_resumed_run_appends_to_its_trace(tmp_path: Path) -> None:
    """``run`` then ``resume`` with the same trace file replay to the store's final view."""
    import planrail
    from planrail.engine.executor import Execution

    from .helpers import PLAN_DOC, llm_handler, make_plan, make_tools

    path, _ = traced_run(tmp_path)
    tools = [t for t in make_tools() if t.name != "boom"]

    @planrail.tool(side_effects="none", name="boom")
    def fixed(x: int) -> dict[str, int]:
        return {"y": x}

    tools.append(fixed)
    store = open_store(f"sqlite:///{tmp_path / 'store.db'}")
    execution = Execution(
        make_plan(tools), tools, run_id=RUN, store=store, handlers={"llm_call": llm_handler}
    )
    TraceWriter(path).attach(execution)
    result = run(execution)
    assert result.status == "succeeded"
    assert len(PLAN_DOC["steps"]) == len(result.steps)
    stored = RunView.from_store(store, RUN)
    assert stored is not None
    replayed = read_trace(path)
    assert replayed.result.to_dict() == stored.result.to_dict() == result.to_dict()
    assert replayed.events == stored.events
    assert [e["type"] for e in replayed.events].count("step_restored") == 3
