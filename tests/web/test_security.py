"""The dashboard's guard, over HTTP: token and cookie, CSRF and same-origin, Host, secrets.

These use Starlette's test client against the app (no browser), and a real server for the
event stream; none of them needs Chromium.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

import planrail
from planrail.engine.approval import defer
from planrail.store import Store, open_store
from planrail.web import Dashboard, Guard, create_app

from .conftest import Served, registry

PORT = 8765
BASE = f"http://127.0.0.1:{PORT}"
TOKEN = "tok-SECURITY-test-0123"
SECRET = "sk-live-DASHBOARD-0123456789"  # what the test tool `vault` returns
SECRET_PLAN = {
    "goal": "mail with a credential",
    "steps": [
        {"id": "vault", "tool": "vault", "args": {"name": "mailer"}},
        {
            "id": "mail",
            "tool": "send",
            "args": {"to": "ops@example.com", "api_key": "${vault.key}"},
            "depends_on": ["vault"],
        },
    ],
}
LITERAL_SECRET = "sk-literal-IN-THE-PLAN-987654"
LITERAL_PLAN = {
    "goal": "a key written in the plan",
    "steps": [{"id": "mail", "tool": "send", "args": {"to": "a@b.c", "api_key": LITERAL_SECRET}}],
}


@pytest.fixture
def store() -> Iterator[Store]:
    with open_store("memory://") as s:
        yield s


def _client(store: Store, **kw: Any) -> TestClient:
    dash = Dashboard(store=store, guard=Guard(TOKEN, PORT), registry=registry(), **kw)
    return TestClient(create_app(dash), base_url=BASE, follow_redirects=False)


def _signed_in(store: Store) -> TestClient:
    client = _client(store)
    answer = client.get(f"/?token={TOKEN}")
    assert answer.status_code == 303
    return client


def _csrf(client: TestClient) -> str:
    html = client.get("/").text
    return html.split('name="csrf-token" content="', 1)[1].split('"', 1)[0]


def _deferred(store: Store, plan: dict[str, Any], run_id: str) -> None:
    execution = planrail.runs.prepare(plan, registry(), store=store, approver=defer, run_id=run_id)
    assert asyncio.run(execution.run()).status == "awaiting_approval"


def test_without_the_token_every_page_and_api_is_401(store: Store) -> None:
    """No cookie and no token: pages, JSON and the event stream all answer 401."""
    client = _client(store)
    for path in ("/", "/runs/x", "/api/runs", "/api/runs/x/events", "/static/dashboard.js"):
        assert client.get(path).status_code == 401, path
    assert client.get("/?token=wrong").status_code == 401


def test_the_token_sets_an_httponly_samesite_cookie_and_is_dropped_from_the_url(
    store: Store,
) -> None:
    """Opening the printed URL sets an HttpOnly, SameSite=Strict cookie (not the token itself)
    and redirects to the page without the token."""
    client = _client(store)
    answer = client.get(f"/runs/abc?token={TOKEN}")
    assert answer.status_code == 303
    assert answer.headers["location"] == "/runs/abc"
    cookie = answer.headers["set-cookie"]
    assert "HttpOnly" in cookie
    assert "SameSite=Strict" in cookie
    assert TOKEN not in cookie
    assert client.get("/api/runs").status_code == 200


def test_a_foreign_host_is_refused_even_with_the_cookie(store: Store) -> None:
    """DNS rebinding: a request naming another Host (or another port) gets 400."""
    client = _signed_in(store)
    assert client.get("/api/runs", headers={"host": "evil.example:8765"}).status_code == 400
    assert client.get("/api/runs", headers={"host": "127.0.0.1:9999"}).status_code == 400
    assert client.get("/api/runs", headers={"host": "localhost:8765"}).status_code == 200


def test_a_state_change_needs_the_csrf_token_and_the_same_origin(store: Store) -> None:
    """POST without the CSRF header, with a wrong one, or from another origin: 403, and the
    run is untouched; with both it goes through the operator action."""
    _deferred(store, SECRET_PLAN, "waiting")
    client = _signed_in(store)
    url = "/api/runs/waiting/refuse"
    same = {"origin": BASE}
    assert client.post(url, headers=same).status_code == 403
    assert client.post(url, headers={**same, "x-csrf-token": "nope"}).status_code == 403
    csrf = _csrf(client)
    foreign = {"origin": "http://evil.example", "x-csrf-token": csrf}
    assert client.post(url, headers=foreign).status_code == 403
    assert client.post(url, headers={"x-csrf-token": csrf}).status_code == 403  # no origin
    assert store.get_run("waiting").status == "awaiting_approval"  # type: ignore[union-attr]
    answer = client.post(url, headers={**same, "x-csrf-token": csrf})
    assert answer.status_code == 200
    assert store.get_run("waiting").status == "cancelled"  # type: ignore[union-attr]
    events = [e for e in store.events("waiting") if e.type == "operator_action"]
    assert events[-1].data["action"] == "refuse"


def test_an_action_that_does_not_apply_is_a_409_with_the_error(store: Store) -> None:
    """Approving a run that is not waiting answers 409 with {type, message, retryable}."""
    planrail.run(
        {"goal": "g", "steps": [{"id": "q", "tool": "quick", "args": {"n": 1}}]},
        registry(),
        store=store,
        run_id="done",
    )
    client = _signed_in(store)
    headers = {"origin": BASE, "x-csrf-token": _csrf(client)}
    answer = client.post("/api/runs/done/approve", headers=headers)
    assert answer.status_code == 409
    assert set(answer.json()["error"]) == {"type", "message", "retryable"}


def test_resume_without_tools_is_refused_with_a_clear_message(store: Store) -> None:
    """A dashboard started without --tools cannot resume: the button is disabled and the
    action answers 409 saying what to pass."""
    _deferred(store, SECRET_PLAN, "waiting")
    client = _client(store, can_resume=False)
    client.get(f"/?token={TOKEN}")
    assert "resume disabled" in client.get("/runs/waiting").text
    headers = {"origin": BASE, "x-csrf-token": _csrf(client)}
    answer = client.post("/api/runs/waiting/resume", headers=headers)
    assert answer.status_code == 409
    assert "--tools" in answer.json()["error"]["message"]


def test_a_secret_never_appears_in_a_page_or_json(store: Store) -> None:
    """A secret read from a tool (passed into a secret parameter) and one written in the plan
    appear in no page, JSON answer or step drawer: both are masked as the store and CLI do."""
    planrail.run(SECRET_PLAN, registry(), store=store, run_id="ran", approve=True)
    _deferred(store, LITERAL_PLAN, "literal")
    client = _signed_in(store)
    paths = ["/", "/api/runs"]
    for rid, steps in (("ran", ("vault", "mail")), ("literal", ("mail",))):
        paths += [f"/runs/{rid}", f"/runs/{rid}/approval", f"/api/runs/{rid}"]
        paths += [f"/api/runs/{rid}/timeline.svg"]
        paths += [f"/api/runs/{rid}/steps/{s}" for s in steps]
    for path in paths:
        body = client.get(path).text
        assert SECRET not in body, path
        assert LITERAL_SECRET not in body, path
    assert "***" in client.get("/api/runs/ran/steps/mail").text
    assert "***" in client.get("/runs/literal/approval").text


def _sse(served: Served, run_id: str, headers: dict[str, str]) -> list[str]:
    """The lines of the event stream up to (and with) the run's final status."""
    cookie = f"planrail_session={served.server.dash.guard.session}"
    lines: list[str] = []
    url = served.url(f"/api/runs/{run_id}/events", token=False)
    with (
        httpx.Client(timeout=30) as http,
        http.stream("GET", url, headers={"cookie": cookie, **headers}) as answer,
    ):
        assert answer.status_code == 200
        for line in answer.iter_lines():
            lines.append(line)
            if lines[-2:-1] == ["event: run"] and '"status":"succeeded"' in line:
                break
    return lines


def test_the_event_stream_carries_no_secret_and_resumes_after_last_event_id(
    served: Served,
) -> None:
    """The SSE stream of a run with secrets holds ids, types and statuses only; reconnecting
    with Last-Event-ID: N continues at seq N+1, with no gap and no repeat."""
    with ThreadPoolExecutor(1) as pool:
        pool.submit(
            planrail.run, SECRET_PLAN, registry(), store=served.store, run_id="s", approve=True
        ).result(timeout=60)
    whole = _sse(served, "s", {})
    assert not any(SECRET in line for line in whole)
    ids = [int(line[4:]) for line in whole if line.startswith("id: ")]
    assert ids == list(range(1, len(ids) + 1))
    later = _sse(served, "s", {"last-event-id": str(ids[2])})
    again = [int(line[4:]) for line in later if line.startswith("id: ")]
    assert again == ids[3:]


def test_an_event_stream_after_any_number_is_served(served: Served) -> None:
    """A Last-Event-ID past what a store's integers hold (``2**63``) streams nothing more than
    the run's status; it is not a server error."""
    with ThreadPoolExecutor(1) as pool:
        pool.submit(
            planrail.run, SECRET_PLAN, registry(), store=served.store, run_id="s", approve=True
        ).result(timeout=60)
    lines = _sse(served, "s", {"last-event-id": str(10**30)})
    assert not [line for line in lines if line.startswith("id: ")]
    assert '"status":"succeeded"' in lines[-1]


@pytest.mark.parametrize(
    "body",
    [b"\xff\xfe{}", b'{"reason": NaN}', b"[" * 100_000, b'{"reason": "x"'],
    ids=["not-utf8", "nan", "deep", "cut"],
)
def test_a_body_that_is_not_json_is_a_400_and_changes_nothing(store: Store, body: bytes) -> None:
    _deferred(store, SECRET_PLAN, "waiting")
    client = _signed_in(store)
    headers = {"origin": BASE, "x-csrf-token": _csrf(client), "content-type": "application/json"}
    answer = client.post("/api/runs/waiting/refuse", headers=headers, content=body)
    assert answer.status_code == 400
    assert answer.json()["error"]["message"] == "the body is not JSON"
    assert store.get_run("waiting").status == "awaiting_approval"  # type: ignore[union-attr]


def test_a_reason_that_is_not_unicode_text_is_refused_with_a_409(store: Store) -> None:
    """``{"reason": "\\ud800"}`` is JSON, but its text no store could keep: the operation
    refuses it before writing anything (the memory store here would have kept it)."""
    _deferred(store, SECRET_PLAN, "waiting")
    client = _signed_in(store)
    headers = {"origin": BASE, "x-csrf-token": _csrf(client), "content-type": "application/json"}
    answer = client.post(
        "/api/runs/waiting/refuse", headers=headers, content=b'{"reason": "no \\ud800"}'
    )
    assert answer.status_code == 409
    assert "reason given holds a lone surrogate" in answer.json()["error"]["message"]
    assert store.get_run("waiting").status == "awaiting_approval"  # type: ignore[union-attr]
    assert not [e for e in store.events("waiting") if e.type == "operator_action"]


def test_retry_a_failed_step_and_resolve_decisions_go_through_the_operations(
    store: Store,
) -> None:
    """ "retry this step" reopens a failed step (pending, an operator_action event); resolving a
    step that is not in doubt is refused with the library's message."""
    plan = {"goal": "g", "steps": [{"id": "x", "tool": "boom", "args": {"n": 1}}]}
    assert planrail.run(plan, registry(), store=store, run_id="f").status == "failed"
    client = _signed_in(store)
    headers = {"origin": BASE, "x-csrf-token": _csrf(client)}
    answer = client.post("/api/runs/f/steps/x/retry", headers=headers)
    assert answer.status_code == 200
    assert store.get_steps("f")["x"].status == "pending"
    assert [e.data["action"] for e in store.events("f") if e.type == "operator_action"] == ["retry"]
    refused = client.post(
        "/api/runs/f/steps/x/resolve", headers=headers, json={"decision": "failed"}
    )
    assert refused.status_code == 409
    assert "not in doubt" in refused.json()["error"]["message"]


def test_the_run_page_draws_the_plans_stages_as_groups(store: Store) -> None:
    """A plan cut into stages shows each stage as a labelled group around its steps on the
    run page's graph (the SVG frames of ``observe.layout``), with its sub-goal."""
    plan = {
        "goal": "two stages",
        "stages": [
            {"id": "gather", "goal": "collect the numbers", "steps": ["a"]},
            {"id": "report", "goal": "tell the user", "steps": ["b"]},
        ],
        "steps": [
            {"id": "a", "tool": "quick", "args": {"n": 1}},
            {"id": "b", "tool": "quick", "args": {"n": "${a}"}, "depends_on": ["a"]},
        ],
    }
    result = asyncio.run(planrail.arun(plan, registry(), store=store, run_id="staged"))
    assert result.status == "succeeded"
    page = _signed_in(store).get("/runs/staged").text
    assert "gather: collect the numbers" in page
    assert "report: tell the user" in page
