"""What the dashboard computes from a store: run rows, the critical path, the timeline, the
live messages, the approval page's data; and the `planrail ui` command's refusals."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from typer.testing import CliRunner

from planrail.cli import app
from planrail.engine import operations
from planrail.engine.approval import approval_record
from planrail.engine.events import EventType
from planrail.engine.gate import mark_replanned
from planrail.plan.tools import ToolRegistry
from planrail.store import Store, open_store
from planrail.store.base import Event, RunRecord, StepRecord
from planrail.web import views
from planrail.web.gantt import gantt_svg
from planrail.web.pages import approval_page
from planrail.web.views import (
    Masker,
    approval_view,
    critical_path,
    event_message,
    previous_version,
    requested_steps,
    run_row,
    run_rows,
    step_detail,
    timeline,
)

from .conftest import registry, replanned_run, traced_run

PLAN = {
    "goal": "diamond",
    "steps": [
        {"id": "a", "tool": "quick", "args": {"n": 1}},
        {"id": "slow", "tool": "quick", "args": {"n": "${a}"}, "depends_on": ["a"]},
        {"id": "fast", "tool": "quick", "args": {"n": "${a}"}, "depends_on": ["a"]},
        {"id": "z", "tool": "quick", "args": {"n": "${slow}"}, "depends_on": ["slow", "fast"]},
    ],
}


def _run(status: str = "succeeded") -> RunRecord:
    return RunRecord(
        run_id="r", plan=PLAN, plan_hash="h", status=status, created_at=100.0, updated_at=110.0
    )


def _step(sid: str, start: float, end: float | None, status: str = "succeeded") -> StepRecord:
    history: list[dict[str, Any]] = [{"attempt": 1, "started_at": 5.0, "duration": 0.5}]
    if sid == "slow":
        history = [
            {"attempt": 1, "started_at": 5.0, "duration": 1.0, "error": {"message": "boom"}},
            {"attempt": 2, "started_at": 7.0, "duration": 1.0, "delay": 1.0},
        ]
    return StepRecord(
        run_id="r",
        step_id=sid,
        status=status,
        idempotency_key=f"r:{sid}",
        started_at=start,
        finished_at=end,
        attempt_history=history,
    )


STEPS = {
    "a": _step("a", 101.0, 102.0),
    "slow": _step("slow", 102.0, 105.0),
    "fast": _step("fast", 102.0, 102.5),
    "z": _step("z", 105.0, 106.0),
}


def test_the_critical_path_follows_the_dependency_that_finished_last() -> None:
    """From the last step back through the latest-finishing dependency: a → slow → z."""
    assert critical_path(_run(), STEPS) == ["a", "slow", "z"]
    assert critical_path(_run(), {}) == []


def test_the_timeline_places_attempts_from_the_steps_wall_start() -> None:
    """Attempt times are monotonic; they are placed from the step's recorded start, and the
    SVG marks the critical path."""
    tl = timeline(_run(), STEPS, now=200.0)
    slow = next(r for r in tl["rows"] if r["step"] == "slow")
    assert [(a["start"], a["end"], a["ok"]) for a in slow["attempts"]] == [
        (102.0, 103.0, False),
        (104.0, 105.0, True),
    ]
    assert slow["attempts"][1]["delay"] == 1.0
    svg = gantt_svg(tl)
    assert svg.count('class="gantt-row critical"') == 3
    assert "★ slow" in svg


def test_a_run_row_has_duration_and_in_doubt_count() -> None:
    """A finished run's duration is first start to last finish; in-doubt steps are counted."""
    steps = {**STEPS, "z": _step("z", 105.0, 106.0, status="in_doubt")}
    row = run_row(_run("failed"), steps, now=500.0)
    assert row["duration"] == 5.0
    assert row["in_doubt"] == 1
    assert row["goal"] == "diamond"
    running = run_row(_run("running"), STEPS, now=111.0)
    assert running["duration"] == 10.0  # still going: up to now


def _stored(store: Store, run_id: str, at: float, step_status: str = "succeeded") -> None:
    run = RunRecord(
        run_id=run_id, plan=PLAN, plan_hash="h", status="failed", created_at=at, updated_at=at
    )
    step = StepRecord(run_id=run_id, step_id="a", status=step_status, idempotency_key="k")
    store.commit(run=run, steps=[step])


def test_the_in_doubt_filter_reaches_runs_older_than_the_newest_200() -> None:
    """A run with an in-doubt step behind 200 newer runs is listed (the list used to take the
    200 newest runs first and filter them after: none); the filter keeps ``limit`` rows, newest
    first, and looks no further back than ``IN_DOUBT_SCAN`` runs."""
    with open_store("memory://") as store:
        _stored(store, "old", 1.0, "in_doubt")
        _stored(store, "older", 0.5, "in_doubt")
        for i in range(200):
            _stored(store, f"new{i:03d}", 10.0 + i)
        rows = run_rows(store, "in_doubt", now=500.0)
        assert [r["run_id"] for r in rows] == ["old", "older"]
        assert rows[0]["in_doubt"] == 1
        assert [r["run_id"] for r in run_rows(store, "in_doubt", 500.0, limit=1)] == ["old"]
        assert len(run_rows(store, None, now=500.0)) == 200
        assert len(run_rows(store, "failed", now=500.0)) == 200


def test_the_in_doubt_filter_scans_a_bounded_number_of_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The scan is capped (each run's step records are read): a run past the cap is not
    listed, as docs/dashboard.md says."""
    monkeypatch.setattr(views, "IN_DOUBT_SCAN", 5)
    with open_store("memory://") as store:
        _stored(store, "past", 1.0, "in_doubt")
        for i in range(5):
            _stored(store, f"new{i}", 10.0 + i)
        assert run_rows(store, "in_doubt", now=500.0, limit=3) == []
        _stored(store, "recent", 20.0, "in_doubt")
        assert [r["run_id"] for r in run_rows(store, "in_doubt", 500.0, limit=3)] == ["recent"]


def test_a_live_message_carries_no_event_data() -> None:
    """A server-sent message names the event, its step and the step's new status; the event's
    data (arguments, outputs, messages) is never copied into it."""
    event = Event(
        run_id="r", type=EventType.STEP_FAILED, at=1.0, seq=7, step_id="a", data={"x": "SECRET"}
    )
    message = event_message(event)
    assert message == {"seq": 7, "type": "step_failed", "at": 1.0, "step": "a", "status": "failed"}
    action = Event(
        run_id="r", type="operator_action", at=2.0, seq=8, step_id="z", data={"action": "resolve"}
    )
    assert event_message(action, STEPS)["status"] == "succeeded"


def test_the_approval_view_lists_values_sources_and_the_hash() -> None:
    """Every step with its side effects, whether it needs approval, its arguments and where
    each comes from; the hash is the stored one."""
    view = approval_view(_run("awaiting_approval"), registry())
    assert view["plan_hash"] == "h"
    z = next(s for s in view["steps"] if s["step"] == "z")
    assert z["provenance"] == {
        "n": ["output of tool quick (untrusted)", "untrusted-derived: look hard at it"]
    }
    assert z["side_effects"] == "none"
    assert view["to_approve"] == []


def test_without_tools_the_approval_page_does_not_call_steps_unsafe() -> None:
    """``planrail ui`` without ``--tools``: a step whose tool the dashboard lacks has side
    effects "unknown", not "unsafe"; which steps need approval is what the run recorded when
    it asked (its ``approval_requested`` event), else not known — never all of them."""
    with open_store("memory://") as store:
        replanned_run(store, "nt")  # nt-r1 waits: only ``mail`` (notify, keyed) needs approval
        replan = store.get_run("nt-r1")
        assert replan is not None
        blind = approval_view(replan, ToolRegistry())
        assert {s["side_effects"] for s in blind["steps"]} == {"unknown"}
        assert requested_steps(store, replan) == ["mail"]
        recorded = approval_view(replan, ToolRegistry(), None, requested_steps(store, replan))
        known = approval_view(replan, registry())
    for view in (recorded, blind):
        assert {s["side_effects"] for s in view["steps"]} == {"unknown"}
        assert view["unknown_effects"] == ["count", "mail", "summary"]
    assert {s["step"]: s["needs_approval"] for s in recorded["steps"]} == {
        "count": False,
        "mail": True,
        "summary": False,
    }
    assert recorded["to_approve"] == ["mail"]
    assert {s["needs_approval"] for s in blind["steps"]} == {None}
    assert blind["to_approve"] == []
    html = approval_page("csrf", blind, can_resume=False)
    assert "unsafe" not in html
    assert "needs approval" not in html
    assert "tools not loaded: side effects unknown for count, mail, summary" in html
    assert "0 step(s) known to change the world" in html
    assert "the steps to approve are those the run recorded" in approval_page(
        "csrf", recorded, can_resume=False
    )
    # with the tools, the registry answers and nothing is unknown
    assert {s["step"]: s["side_effects"] for s in known["steps"]} == {
        "count": "none",
        "mail": "keyed",
        "summary": "none",
    }
    assert known["unknown_effects"] == []
    assert 'id="unknown-effects"' not in approval_page("csrf", known, can_resume=False)


def test_provenance_reads_the_same_on_the_approval_page_and_in_the_drawer() -> None:
    """A literal is "written in the plan" for read-only steps and in the step drawer too, as
    for side-effecting steps and on the CLI's approval screen; the internal ``user`` code is
    never shown."""
    plan = {
        "goal": "count, then tell ops",
        "steps": [
            {"id": "count", "tool": "quick", "args": {"n": 1}},
            {"id": "mail", "tool": "notify", "args": {"to": "ops@x.y", "text": "${count}"}},
        ],
    }
    run = RunRecord(
        run_id="p", plan=plan, plan_hash="h", status="awaiting_approval", created_at=1.0,
        updated_at=1.0,
    )  # fmt: skip
    for reg in (registry(), ToolRegistry()):
        view = approval_view(run, reg)
        page = {s["step"]: s["provenance"] for s in view["steps"]}
        assert page["count"] == {"n": ["written in the plan"]}
        assert page["mail"]["to"] == ["written in the plan"]
        for sid in ("count", "mail"):
            drawer = step_detail(run, None, sid, [], Masker(run, reg))
            assert drawer["provenance"] == page[sid]
        assert "'user'" not in str(page)


def test_the_approval_page_shows_the_plans_warnings_before_approving() -> None:
    """A placeholder in a world-changing step is shown on the approval page as ``planrail
    run`` prints it before asking (the page showed nothing of it); a secret written in the
    plan stays masked in the warnings too."""
    from planrail.web.pages import approval_page

    plan = {
        "goal": "mail someone",
        "steps": [
            {"id": "mail", "tool": "send", "args": {"to": "<RECIPIENT>", "api_key": "sk-9f8e7d"}}
        ],
    }
    run = RunRecord(
        run_id="w", plan=plan, plan_hash="h", status="awaiting_approval", created_at=1.0,
        updated_at=1.0,
    )  # fmt: skip
    view = approval_view(run, registry())
    assert [(w["code"], w["path"]) for w in view["warnings"]] == [
        ("placeholder_literal", "$.steps[0].args.to")
    ]
    html = approval_page("csrf", view, can_resume=True)
    assert 'id="warnings"' in html
    assert "<b>[placeholder_literal]</b> step <code>mail</code>" in html
    assert "sk-9f8e7d" not in html
    plain = {"goal": "g", "steps": [{"id": "a", "tool": "quick", "args": {"n": 1}}]}
    quiet = RunRecord(
        run_id="q", plan=plain, plan_hash="h", status="awaiting_approval", created_at=1.0,
        updated_at=1.0,
    )  # fmt: skip
    assert 'id="warnings"' not in approval_page("csrf", approval_view(quiet, registry()), True)


def test_the_step_drawer_data_carries_the_stored_opentelemetry_ids(otel: Any) -> None:
    """A run traced with OpenTelemetry: the drawer's data holds the exported spans' trace id
    and the id of the step's own span; an untraced run's holds none."""
    with open_store("memory://") as store:
        traced_run(store, otel, "traced")
        run = store.get_run("traced")
        assert run is not None
        detail = step_detail(
            run,
            store.get_steps("traced")["again"],
            "again",
            store.events("traced"),
            Masker(run, registry()),
        )
        span = otel.by_name("planrail.step again").context
        assert detail["trace"] == {
            "trace_id": format(span.trace_id, "032x"),
            "span_id": format(span.span_id, "016x"),
        }
        plain = step_detail(_run(), STEPS["a"], "a", [], Masker(_run(), registry()))
        assert plain["trace"] is None


def test_a_replans_approval_view_shows_what_changed_since_the_approved_version() -> None:
    """An agent's replan, stored as RUN-r1: its approval view diffs it against the stored
    version before it — step added, removed and changed, each changed argument's before and
    after — and marks each step; the first version has no diff."""
    with open_store("memory://") as store:
        replanned_run(store, "rp")
        first, replan = store.get_run("rp"), store.get_run("rp-r1")
        assert first is not None
        assert replan is not None
        assert previous_version(store, replan) == first
        assert previous_version(store, first) is None
        view = approval_view(replan, registry(), previous_version(store, replan))
        assert approval_view(first, registry())["diff"] is None
    diff = view["diff"]
    assert diff["previous_run"] == "rp"
    assert diff["previous_hash"] == first.plan_hash
    assert (diff["added"], diff["removed"], diff["changed"]) == (["summary"], ["after"], ["mail"])
    assert diff["args"]["mail"] == {
        "(calls)": {"before": "boom", "after": "notify"},
        "n": {"before": "${count}", "after": None},
        "text": {"before": None, "after": "${count}"},
        "to": {"before": None, "after": "ops@example.com"},
    }
    assert {s["step"]: s["change"] for s in view["steps"]} == {
        "count": "same",
        "mail": "changed",
        "summary": "added",
    }


def test_a_replans_diff_masks_secret_arguments() -> None:
    """A secret argument that changed between versions shows as masked on both sides, as on
    the CLI's approval screen, never in clear."""

    def version(run_id: str, key: str, to: str) -> RunRecord:
        step = {"id": "mail", "tool": "send", "args": {"to": to, "api_key": key}}
        return RunRecord(
            run_id=run_id,
            plan={"goal": "g", "steps": [step]},
            plan_hash=run_id,
            status="awaiting_approval",
            created_at=1.0,
            updated_at=1.0,
        )

    old, new = version("s", "sk-OLD-secret-1", "a@b.c"), version("s-r1", "sk-NEW-secret-2", "d@e.f")
    view = approval_view(new, registry(), old)
    assert view["diff"]["changed"] == ["mail"]
    assert view["diff"]["args"]["mail"]["to"] == {"before": "a@b.c", "after": "d@e.f"}
    text = str(view)
    assert "sk-OLD" not in text
    assert "sk-NEW" not in text


def test_only_the_version_before_with_the_same_goal_is_a_replans_previous() -> None:
    """A record without the stored 'replaces' fact: X-r2's previous version is X-r1 and X-r1's
    is X, each marked replaced by the next; a run of another goal under such an id, one whose
    version before is not stored, or one not marked replaced by it (an id alone proves
    nothing) has none."""

    def stored(run_id: str, goal: str) -> RunRecord:
        plan = {**PLAN, "goal": goal}
        return RunRecord(
            run_id=run_id,
            plan=plan,
            plan_hash=run_id,
            status="failed",
            created_at=1.0,
            updated_at=1.0,
            approval=approval_record(run_id, "operator", 1.0),
        )

    with open_store("memory://") as store:
        for run_id, goal in (("x", "g"), ("x-r1", "g"), ("x-r2", "g"), ("w", "g")):
            store.create_run(stored(run_id, goal))
        store.create_run(stored("y", "another goal"))
        for older, newer in (("x", "x-r1"), ("x-r1", "x-r2"), ("y", "y-r1")):
            mark_replanned(store, older, newer)
        assert previous_version(store, stored("x-r2", "g")).run_id == "x-r1"  # type: ignore[union-attr]
        assert previous_version(store, stored("x-r1", "g")).run_id == "x"  # type: ignore[union-attr]
        assert previous_version(store, stored("y-r1", "g")) is None
        assert previous_version(store, stored("z-r1", "g")) is None
        assert previous_version(store, stored("x-r0", "g")) is None
        assert previous_version(store, stored("w-r1", "g")) is None  # w not marked replaced


def test_a_replans_previous_version_must_have_been_approved() -> None:
    """X-r1's page says "changed since the approved version" only when X was approved: X still
    awaiting approval (or refused) is no previous version; approved by an operator it is, and
    so is a version that needed no approval and ran (its log has ``run_started``)."""
    first = {
        "goal": "tell ops",
        "steps": [{"id": "mail", "tool": "notify", "args": {"to": "a@b.c", "text": 1}}],
    }
    second = {
        "goal": "tell ops",
        "steps": [{"id": "mail", "tool": "notify", "args": {"to": "d@e.f", "text": 1}}],
    }

    def waiting(run_id: str, plan: dict[str, Any]) -> RunRecord:
        return RunRecord(
            run_id=run_id, plan=plan, plan_hash=run_id, status="awaiting_approval",
            created_at=1.0, updated_at=1.0,
        )  # fmt: skip

    with open_store("memory://") as store:
        store.create_run(waiting("x", first))
        mark_replanned(store, "x", "x-r1")  # marked: "never approved" is the reason below
        replan = waiting("x-r1", second)
        store.create_run(replan)
        assert previous_version(store, replan) is None
        view = approval_view(replan, registry(), previous_version(store, replan))
        assert view["diff"] is None
        assert "changed since the approved version" not in approval_page("csrf", view, True)
        operations.refuse(store, "x")
        assert previous_version(store, replan) is None  # refused: never approved

        store.create_run(waiting("y", first))
        operations.approve(store, "y")
        mark_replanned(store, "y", "y-r1")
        store.create_run(waiting("y-r1", second))
        y_replan = store.get_run("y-r1")
        assert y_replan is not None
        assert previous_version(store, y_replan) == store.get_run("y")
        view = approval_view(y_replan, registry(), previous_version(store, y_replan))
        assert view["diff"]["previous_run"] == "y"
        assert "changed since the approved version" in approval_page("csrf", view, True)

        ran = RunRecord(
            run_id="z", plan=first, plan_hash="z", status="failed", created_at=1.0,
            updated_at=1.0,
        )  # fmt: skip
        started = Event(run_id="z", type=EventType.RUN_STARTED, at=1.0)
        store.commit(run=ran, events=[started])
        mark_replanned(store, "z", "z-r1")
        marked = store.get_run("z")
        assert marked is not None
        assert previous_version(store, waiting("z-r1", second)) == marked


def test_a_replans_previous_version_is_read_from_the_store_once() -> None:
    """An older record's version before is found by the run-id convention and its mark, read
    once: the lookup that checks the mark is the one the diff uses."""
    reads: list[str] = []

    class Counting:
        def __init__(self, inner: Store) -> None:
            self.inner = inner

        def get_run(self, run_id: str) -> RunRecord | None:
            reads.append(run_id)
            return self.inner.get_run(run_id)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

    with open_store("memory://") as store:
        first = RunRecord(
            run_id="v", plan=PLAN, plan_hash="v", status="failed", created_at=1.0,
            updated_at=1.0, approval=approval_record("v", "operator", 1.0),
        )  # fmt: skip
        store.create_run(first)
        mark_replanned(store, "v", "v-r1")
        replan = dataclasses.replace(first, run_id="v-r1", plan_hash="v-r1", approval=None)
        before = previous_version(Counting(store), replan)  # type: ignore[arg-type]
    assert before is not None
    assert before.run_id == "v"
    assert reads == ["v"]


def test_ui_on_all_interfaces_needs_an_explicit_token() -> None:
    """`planrail ui --host 0.0.0.0` without --token exits 2 saying why."""
    result = CliRunner().invoke(app, ["ui", "--host", "0.0.0.0", "--store", "memory://"])
    assert result.exit_code == 2
    assert "--token" in result.output


@pytest.mark.parametrize("host", ["999.1.1.1", "no such host.invalid", ""])
def test_ui_says_first_that_an_address_does_not_resolve(host: str) -> None:
    """An address that cannot be listened on is the error (exit 2), not the missing token that
    any address but a loopback one asks for."""
    result = CliRunner().invoke(app, ["ui", "--host", host, "--store", "memory://"])
    assert result.exit_code == 2
    said = " ".join(result.output.split())
    assert f"cannot listen on {host}:8765" in said
    assert "--token" not in said


@pytest.mark.parametrize("token", ["abc", "", "sixteen chars ok?", "a&b=cdefghijklmnopq"])
def test_ui_refuses_a_token_short_or_not_url_safe(token: str) -> None:
    """A given token is the key to every operator action and is printed in the URL: at
    least 16 URL-safe characters (``abc`` was taken, and ``a&b=…`` broke the printed URL)."""
    result = CliRunner().invoke(app, ["ui", "--store", "memory://", "--token", token])
    assert result.exit_code == 2
    assert "--token must be at least 16 characters" in " ".join(result.output.split())
