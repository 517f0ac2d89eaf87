"""The dashboard in a real headless Chromium (Debian's, driven by Playwright).

Each test drives the page as a person would and waits on conditions only (no fixed sleeps);
runs are started from other processes (``planrail run`` / ``planrail cancel`` subprocesses) or
stored by ``planrail.runs.prepare`` so the dashboard sees them only through the store.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import quote

import planrail
from planrail.engine.approval import defer
from planrail.store.base import RunRecord

from .conftest import TOOLS, Served, registry, replanned_run, screenshot, traced_run

CHAIN = {
    "goal": "watch a chain of steps live",
    "steps": [
        {"id": "a", "tool": "wait_for", "args": {"step": "a"}},
        {"id": "b", "tool": "wait_for", "args": {"step": "b"}, "depends_on": ["a"]},
        {"id": "c", "tool": "wait_for", "args": {"step": "c"}, "depends_on": ["b"]},
    ],
}


def _plan_file(tmp: Path, plan: dict[str, Any], name: str = "plan.json") -> Path:
    path = tmp / name
    path.write_text(json.dumps(plan))
    return path


def _node(page: Any, step: str, status: str) -> None:
    """Wait until the graph node of ``step`` shows ``status``."""
    page.wait_for_selector(f'#graph g.step[data-step="{step}"][data-status="{status}"]')


def _run_status(page: Any, status: str) -> None:
    page.wait_for_selector(f'body[data-run-status="{status}"]')


def test_watch_a_run_from_another_process_change_state_live(served: Served, page: Any) -> None:
    """A run started by `planrail run` in another process appears in the run list, and its
    graph nodes turn running → succeeded on the open run page without a reload."""
    page.goto(served.url("/"))
    plan = _plan_file(served.tmp, CHAIN)
    proc = served.planrail(
        "run",
        str(plan),
        "--tools",
        TOOLS,
        "--run-id",
        "live-1",
        "--quiet",
        "--yes",
    )
    try:
        page.wait_for_selector('#runs tr[data-run="live-1"]')
        screenshot(page, "run-list")
        loads = []
        page.on("load", lambda _p: loads.append(1))
        page.click('#runs tr[data-run="live-1"] a')
        page.wait_for_url("**/runs/live-1")
        loads.clear()
        _node(page, "a", "running")
        _node(page, "b", "pending")
        served.open_gate("a")
        _node(page, "a", "succeeded")
        _node(page, "b", "running")
        screenshot(page, "run-live")
        served.open_gate("b")
        served.open_gate("c")
        _node(page, "c", "succeeded")
        _run_status(page, "succeeded")
        assert loads == []  # no reload: the events arrived over SSE
        page.wait_for_selector("#timeline g.gantt-row.critical")
        page.click('#graph g.step[data-step="b"]')
        page.wait_for_selector('#drawer:not([hidden]) [data-field="idempotency key"]')
        assert "wait_for" in page.inner_text("#drawer")
        assert page.inner_text('[data-field="OpenTelemetry trace id"]') == "not recorded"
        screenshot(page, "step-drawer")
    finally:
        served.open_gate("a")
        served.open_gate("b")
        served.open_gate("c")
        _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()


MAIL = {
    "goal": "mail the weekly report",
    "steps": [
        {"id": "count", "tool": "quick", "args": {"n": 41}},
        {
            "id": "mail",
            "tool": "notify",
            "args": {"to": "ops@example.com", "text": "${count}"},
            "depends_on": ["count"],
        },
    ],
}


def test_approve_a_waiting_plan_and_see_it_run(served: Served, page: Any) -> None:
    """A run stored awaiting approval (prepare with approver=defer) shows its argument values,
    where each comes from and the plan hash; "approve and run" approves it
    through the operator action and resumes it, and the run page shows it succeed."""
    execution = planrail.runs.prepare(
        MAIL, registry(), store=served.store, approver=defer, run_id="approve-1"
    )
    result = asyncio.run(execution.run())
    assert result.status == "awaiting_approval"
    plan_hash = served.store.get_run("approve-1").plan_hash  # type: ignore[union-attr]
    page.goto(served.url("/"))
    page.click('button.filter[data-filter="awaiting"]')
    page.wait_for_selector('#runs tr[data-run="approve-1"]')
    page.goto(served.url("/runs/approve-1/approval", token=False))
    assert page.inner_text("#plan-hash") == plan_hash
    row = page.inner_text('tr[data-step="mail"]')
    assert "ops@example.com" in row
    assert "needs approval" in row
    assert "to: written in the plan" in row
    assert "text: output of tool quick (untrusted)" in row  # the CLI's approval screen, as data
    assert "untrusted-derived" in row
    screenshot(page, "approval")
    page.click("#approve")
    page.wait_for_url("**/runs/approve-1")
    _run_status(page, "succeeded")
    _node(page, "mail", "succeeded")
    actions = [e.data.get("action") for e in served.store.events("approve-1")]
    assert "approve" in actions


def test_a_run_whose_id_holds_a_slash_is_reached_and_approved_by_its_links(
    served: Served, page: Any
) -> None:
    """``weekly/mail?1``: the run list's link, the run page's approval link, "approve and
    run" and the live run page all reach that run (its id is one encoded path segment)."""
    rid = "weekly/mail?1"
    execution = planrail.runs.prepare(
        MAIL, registry(), store=served.store, approver=defer, run_id=rid
    )
    assert asyncio.run(execution.run()).status == "awaiting_approval"
    run_path = "/runs/" + quote(rid, safe="")
    page.goto(served.url("/"))
    page.click(f'#runs tr[data-run="{rid}"] a')
    page.wait_for_url(lambda url: url.endswith(run_path))
    page.click("#approval-link")
    page.wait_for_url(lambda url: url.endswith(run_path + "/approval"))
    assert "ops@example.com" in page.inner_text('tr[data-step="mail"]')
    page.click("#approve")
    page.wait_for_url(lambda url: url.endswith(run_path))
    _run_status(page, "succeeded")
    _node(page, "mail", "succeeded")
    assert served.store.get_run(rid).status == "succeeded"  # type: ignore[union-attr]


UNSAFE = {
    "goal": "send one message that cannot be repeated",
    "steps": [{"id": "w", "tool": "unsafe_wait", "args": {"step": "w"}}],
}


def _open_run(page: Any, served: Served, run_id: str) -> None:
    """From the run list, once the run shows up there, to its page."""
    page.goto(served.url("/"))
    page.click(f'#runs tr[data-run="{run_id}"] a')
    page.wait_for_url(f"**/runs/{run_id}")


def _start_unsafe(served: Served, run_id: str) -> Any:
    plan = _plan_file(served.tmp, UNSAFE, f"{run_id}.json")
    return served.planrail("run", str(plan), "--tools", TOOLS, "--run-id", run_id, "--yes", "-q")


def test_cancel_a_running_run_from_the_page(served: Served, page: Any) -> None:
    """ "cancel run" on a run another process drives asks that runner to stop (the operator
    action): its unsafe call under way becomes in doubt and the run ends cancelled, live; the
    run list's "in doubt" filter then shows it."""
    proc = _start_unsafe(served, "cancel-1")
    try:
        _open_run(page, served, "cancel-1")
        _node(page, "w", "running")
        page.click("#cancel")
        page.wait_for_selector("#action-msg:has-text('requested')")
        _node(page, "w", "in_doubt")
        _run_status(page, "cancelled")
        screenshot(page, "cancelled")
    finally:
        served.open_gate("w")
        proc.communicate(timeout=60)
    page.goto(served.url("/", token=False))
    page.click('button.filter[data-filter="in_doubt"]')
    page.wait_for_selector('#runs tr[data-run="cancel-1"] td.doubt:has-text("1")')
    by = [e.data.get("by") for e in served.store.events("cancel-1") if e.type == "operator_action"]
    assert by
    assert "dashboard" in str(by[0])


def test_resolve_an_in_doubt_step_then_resume(served: Served, page: Any) -> None:
    """A step left in doubt by `planrail cancel` from another process is resolved in the step
    drawer ("succeeded" with its output); the node turns succeeded live and resume finishes the
    run."""
    proc = _start_unsafe(served, "doubt-1")
    try:
        _open_run(page, served, "doubt-1")
        _node(page, "w", "running")
        canceller = served.planrail("cancel", "doubt-1")
        canceller.communicate(timeout=60)
        assert canceller.returncode == 0
        _node(page, "w", "in_doubt")
    finally:
        proc.communicate(timeout=60)
    page.click('#graph g.step[data-step="w"]')
    page.wait_for_selector("#resolve")
    page.fill("#resolve-output", '{"step": "w", "sent": "yes"}')
    screenshot(page, "resolve")
    page.click('#resolve button[data-decision="succeeded"]')
    _node(page, "w", "succeeded")
    page.click("#resume")
    _run_status(page, "succeeded")
    assert served.store.get_steps("doubt-1")["w"].output == {"step": "w", "sent": "yes"}


def test_the_page_says_disconnected_when_the_stream_drops(served: Served, page: Any) -> None:
    """When the server goes away the run page shows the "disconnected" banner (the browser
    keeps retrying the stream by itself)."""
    served.store.create_run(
        RunRecord(
            run_id="idle",
            plan=CHAIN,
            plan_hash="h",
            status="pending",
            created_at=1.0,
            updated_at=1.0,
        )
    )
    page.goto(served.url("/runs/idle"))
    page.wait_for_selector("#conn.ok")
    assert page.is_hidden("#banner")
    served.server.stop()
    page.wait_for_selector("#banner:not([hidden])")
    assert page.inner_text("#conn") == "disconnected"


def test_the_page_stops_following_a_run_that_leaves_the_store(served: Served, page: Any) -> None:
    """A run removed from the store while its page is open: the stream says ``gone`` and the
    page stops following it (no reconnect every second to be told so again) and says why."""
    _stored_run(served, "leaving")
    page.goto(served.url("/runs/leaving"))
    page.wait_for_selector("#conn.ok")
    db = sqlite3.connect(served.tmp / "store.db")
    with db:
        db.execute("PRAGMA foreign_keys = ON")
        db.execute("DELETE FROM runs WHERE run_id = ?", ("leaving",))
    db.close()
    page.wait_for_selector("body[data-run-status=gone]")
    assert page.inner_text("#conn") == "gone"
    assert "no longer in the store" in page.inner_text("#banner")
    assert page.is_visible("#banner")


def test_the_step_drawer_shows_the_opentelemetry_trace_and_span_ids(
    served: Served, page: Any, otel: Any
) -> None:
    """A run traced with OpenTelemetry (the SDK exporting to memory): the step drawer and its
    JSON show the trace id of the exported spans and the id of the step's own span."""
    traced_run(served.store, otel, "traced-1")
    span = otel.by_name("planrail.step count").context
    trace_id, span_id = format(span.trace_id, "032x"), format(span.span_id, "016x")
    page.goto(served.url("/runs/traced-1"))
    page.click('#graph g.step[data-step="count"]')
    page.wait_for_selector('#drawer:not([hidden]) [data-field="span id"]')
    assert page.inner_text('[data-field="OpenTelemetry trace id"]') == trace_id
    assert page.inner_text('[data-field="span id"]') == span_id
    detail = page.evaluate("fetch('/api/runs/traced-1/steps/count').then((r) => r.json())")
    assert detail["trace"] == {"trace_id": trace_id, "span_id": span_id}
    page.eval_on_selector("#drawer", "(d) => { d.scrollTop = d.scrollHeight; }")
    screenshot(page, "step-drawer-otel")


def test_a_replans_approval_page_shows_the_diff_against_the_approved_version(
    served: Served, page: Any
) -> None:
    """An agent's replan stored as RUN-r1 awaiting approval: its approval page shows what
    changed since the version approved before (step added, removed, changed, and the changed
    arguments before → after), marks the rows, and links to the version before."""
    replanned_run(served.store, "replan-1")
    first = served.store.get_run("replan-1")
    assert first is not None
    page.goto(served.url("/runs/replan-1-r1/approval"))
    page.wait_for_selector("#diff")
    assert page.inner_text("#diff-added") == "summary"
    assert page.inner_text("#diff-removed") == "after"
    assert page.inner_text("#diff-changed") == "mail"
    assert first.plan_hash[:19] in page.inner_text("#diff h2")
    to = page.inner_text('#diff tr[data-diff-step="mail"][data-diff-arg="to"]')
    assert "ops@example.com" in to
    calls = page.inner_text('#diff tr[data-diff-step="mail"][data-diff-arg="(calls)"]')
    assert "boom" in calls
    assert "notify" in calls
    assert page.query_selector('tr[data-step="summary"][data-change="added"] .change-added')
    assert page.query_selector('tr[data-step="mail"][data-change="changed"]') is not None
    screenshot(page, "approval-replan")
    page.click('#diff a[href="/runs/replan-1/approval"]')
    page.wait_for_url("**/runs/replan-1/approval")
    assert page.query_selector("#diff") is None  # the first version has nothing to diff


HIDDEN_TAB = """
(() => {
  // This page's visibility, as the test sets it; its interval timers on a virtual clock the
  // test advances (Playwright's own clock would be the whole shared browser context's); and a
  // count of the run list's requests.
  let visible = true;
  Object.defineProperty(Document.prototype, "visibilityState", {
    configurable: true, get: () => (visible ? "visible" : "hidden"),
  });
  Object.defineProperty(Document.prototype, "hidden", { configurable: true, get: () => !visible });
  let now = 0;
  let next = 1;
  const timers = new Map();
  window.setInterval = (fn, ms) => {
    timers.set(next, { fn, ms, due: now + ms });
    return next++;
  };
  window.clearInterval = (id) => { timers.delete(id); };
  window.__advance = (ms) => {
    const end = now + ms;
    for (;;) {
      const due = [...timers.values()].filter((t) => t.due <= end).sort((a, b) => a.due - b.due);
      if (!due.length) break;
      now = due[0].due;
      due[0].due += due[0].ms;
      due[0].fn();
    }
    now = end;
    return window.__runsFetches;
  };
  window.__runsFetches = 0;
  const fetch = window.fetch;
  window.fetch = function (url, ...rest) {
    if (String(url).startsWith("/api/runs")) window.__runsFetches += 1;
    return fetch.call(this, url, ...rest);
  };
  window.__setVisible = (v) => {
    visible = v;
    document.dispatchEvent(new Event("visibilitychange"));
    return window.__runsFetches;
  };
})();
"""


def _stored_run(served: Served, run_id: str) -> None:
    served.store.create_run(
        RunRecord(
            run_id=run_id,
            plan=CHAIN,
            plan_hash="h",
            status="pending",
            created_at=1.0,
            updated_at=1.0,
        )
    )


def test_the_run_list_refreshes_only_while_the_tab_is_visible(served: Served, page: Any) -> None:
    """In virtual time (the page's interval timers on a clock the test advances): while the tab
    is hidden a minute passes without one request for the run list, and a run stored meanwhile
    does not appear; shown again, the list is fetched at once (the run appears) and every 1.5 s
    after."""
    _stored_run(served, "seen-1")
    page.add_init_script(HIDDEN_TAB)
    page.goto(served.url("/"))
    page.wait_for_selector('#runs tr[data-run="seen-1"]')
    fetched = page.evaluate("window.__runsFetches")
    assert fetched == 1  # on load; the interval waits for the virtual clock
    assert page.evaluate("window.__setVisible(false)") == fetched
    _stored_run(served, "while-hidden")
    assert page.evaluate("window.__advance(60000)") == fetched  # not one request while hidden
    assert page.query_selector('#runs tr[data-run="while-hidden"]') is None
    assert page.evaluate("window.__setVisible(true)") == fetched + 1  # at once when shown
    page.wait_for_selector('#runs tr[data-run="while-hidden"]')
    assert page.evaluate("window.__advance(1600)") == fetched + 2
    assert page.evaluate("window.__advance(3000)") == fetched + 4
