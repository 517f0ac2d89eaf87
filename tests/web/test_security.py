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


def _session(port: int = PORT) -> str:
    guard = Guard(TOKEN, port)
    return f"{guard.cookie_name}={guard.session}"


@pytest.mark.parametrize(
    "before",
    ['prefs={"theme":"dark"}', "a b=1", "x=[1]", "x=\\", 'x=a"b', "x=é", "", "bare"],
)
def test_another_apps_cookie_does_not_sign_the_user_out(store: Store, before: str) -> None:
    """Cookies of other apps on this host come in the same header, in any order and any form
    (``http.cookies`` stopped at the first it could not parse: 401 for ever after)."""
    client = _client(store)
    for header in (
        f"{before}; {_session()}",
        f"{before};; {_session()}",
        f"{_session()}; {before}",
    ):
        sent = {"cookie": header.encode("latin-1")}  # as a browser sends bytes
        assert client.get("/api/runs", headers=sent).status_code == 200, header
    alone = {"cookie": f"{before}; x=1".encode("latin-1")}
    assert client.get("/api/runs", headers=alone).status_code == 401


def test_two_dashboards_on_one_host_keep_their_own_sessions(store: Store) -> None:
    """A browser sends a host's cookies to every port: the session cookie is named after its
    port, so signing in to a second dashboard does not replace the first one's."""
    first = _client(store)
    assert first.get(f"/?token={TOKEN}").status_code == 303
    other = Guard("another-token-0123456789", 8766)
    cookie = first.cookies.get(Guard(TOKEN, PORT).cookie_name)
    assert other.cookie_name != Guard(TOKEN, PORT).cookie_name
    both = f"{other.cookie_name}={other.session}; {Guard(TOKEN, PORT).cookie_name}={cookie}"
    assert first.get("/api/runs", headers={"cookie": both}).status_code == 200
    wrong = f"{Guard(TOKEN, PORT).cookie_name}={other.session}"
    assert first.get("/api/runs", headers={"cookie": wrong}).status_code == 401


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1:\u00b2", "127.0.0.1:\u00b9\u00b2", "127.0.0.1:" + "1" * 5000],
)
def test_a_host_header_with_an_odd_port_is_a_400(host: str) -> None:
    """A port of non-ASCII digits ('²'.isdigit() is true), of 5,000 digits (past int()'s
    limit) or of six characters is no port of this server: refused (was a 500)."""
    guard = Guard(TOKEN, PORT)
    assert guard.host_ok(host) is False
    assert guard.host_ok(f"127.0.0.1:{PORT}") is True


@pytest.mark.parametrize("origin", ["http://[::1", "http://127.0.0.1:\u00b2", "http://[zz]:1/"])
def test_an_origin_that_is_no_url_is_refused(store: Store, origin: str) -> None:
    """An Origin or Referer that urlsplit cannot read is not this server: 403 (was a 500)."""
    _deferred(store, SECRET_PLAN, "waiting")
    client = _signed_in(store)
    csrf = _csrf(client)
    for header in ("origin", "referer"):
        answer = client.post(
            "/api/runs/waiting/refuse",
            headers={header: origin.encode("latin-1"), "x-csrf-token": csrf},
        )
        assert answer.status_code == 403
    assert store.get_run("waiting").status == "awaiting_approval"  # type: ignore[union-attr]


def test_signing_in_redirects_to_the_same_path_and_never_to_another_site(store: Store) -> None:
    """The redirect after the token keeps the path as sent (a run id's %2F too) and turns a
    path of two leading slashes (another site, to a browser) into one."""
    client = _client(store)
    for path, location in (
        ("//evil.example/x", "/evil.example/x"),
        ("/runs/a%2Fb", "/runs/a%2Fb"),
        ("/runs/a%2Fb/approval", "/runs/a%2Fb/approval"),
    ):
        answer = client.get(f"{BASE}{path}?token={TOKEN}&x=1")
        assert answer.status_code == 303
        assert answer.headers["location"] == f"{location}?x=1"


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
    cookie = f"{served.server.dash.guard.cookie_name}={served.server.dash.guard.session}"
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


def _actor(store: Store, **kw: Any) -> tuple[TestClient, dict[str, str]]:
    client = _client(store, **kw)
    assert client.get(f"/?token={TOKEN}").status_code == 303
    return client, {"origin": BASE, "x-csrf-token": _csrf(client)}


def test_a_body_over_the_limit_is_a_413_and_is_not_read_whole(store: Store) -> None:
    """An action's body past MAX_BODY_BYTES is refused (413), by its Content-Length or as it
    arrives, and nothing changes; one just under it is read (a 400 body was parsed whole)."""
    from planrail.web.app import MAX_BODY_BYTES

    _deferred(store, SECRET_PLAN, "waiting")
    client, headers = _actor(store)
    url = "/api/runs/waiting/refuse"
    big = b'{"reason": "' + b"a" * MAX_BODY_BYTES + b'"}'

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        for at in range(0, len(big), 65536):
            yield big[at : at + 65536]

    assert client.post(url, headers=headers, content=big).status_code == 413
    assert client.post(url, headers=headers, content=chunks()).status_code == 413
    assert store.get_run("waiting").status == "awaiting_approval"  # type: ignore[union-attr]
    fits = b'{"reason": "' + b"a" * (MAX_BODY_BYTES - 20) + b'"}'
    assert client.post(url, headers=headers, content=fits).status_code == 200


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ({"reason": {"nested": [1, 2]}}, "'reason' must be text, not dict"),
        ({"reason": 5}, "'reason' must be text, not int"),
        ({"run": "false"}, "'run' must be true or false, not str"),
    ],
)
def test_an_action_field_of_the_wrong_kind_is_a_400(
    store: Store, body: dict[str, Any], said: str
) -> None:
    """A refusal's reason is text (a dict was stored as its Python repr) and an approval's
    ``run`` a boolean (``"false"`` approved and ran): refused, nothing changed."""
    _deferred(store, SECRET_PLAN, "waiting")
    client, headers = _actor(store)
    action = "approve" if "run" in body else "refuse"
    answer = client.post(f"/api/runs/waiting/{action}", headers=headers, json=body)
    assert answer.status_code == 400
    assert answer.json()["error"]["message"] == said
    assert store.get_run("waiting").status == "awaiting_approval"  # type: ignore[union-attr]
    assert not [e for e in store.events("waiting") if e.type == "operator_action"]


def test_unknown_actions_steps_and_runs_are_404(store: Store) -> None:
    """What does not exist is a 404, not a 409 (which says an action does not apply now) nor
    a 200 describing a step no plan has."""
    _deferred(store, SECRET_PLAN, "waiting")
    client, headers = _actor(store)
    for url in (
        "/api/runs/waiting/bogus",
        "/api/runs/nonexistent/bogus",
        "/api/runs/nonexistent/resume",
        "/api/runs/waiting/steps/nope/resolve",
        "/api/runs/waiting/steps/nope/retry",
        "/api/runs/waiting/steps/vault/bogus",
    ):
        assert client.post(url, headers=headers, json={}).status_code == 404, url
    assert client.get("/api/runs/waiting/steps/nope").status_code == 404
    assert "has no step 'nope'" in client.get("/api/runs/waiting/steps/nope").text
    assert client.get("/api/runs/waiting/steps/vault").status_code == 200


@pytest.mark.parametrize("name", ["%00.js", "a" * 300 + ".js", "..%2Fapp.py", "x.css"])
def test_a_static_file_that_is_not_shipped_is_a_404(store: Store, name: str) -> None:
    """Only the shipped files are served; any other name is a 404 (a NUL byte or a name too
    long for the file system was a 500)."""
    client, _ = _actor(store)
    assert client.get(f"/static/{name}").status_code == 404
    assert client.get("/static/dashboard.js").status_code == 200


def test_resume_of_a_run_another_process_drives_is_a_409_at_once(store: Store) -> None:
    """A live lease of another runner: the resume is refused before it is said to start (it
    answered "started", and the refusal went to the server's log)."""
    import time

    _deferred(store, SECRET_PLAN, "held")
    planrail.engine.operations.approve(store, "held")
    assert store.acquire_lease("held", "elsewhere:1:tag", ttl=600, now=time.time())
    client, headers = _actor(store, can_resume=True)
    answer = client.post("/api/runs/held/resume", headers=headers)
    assert answer.status_code == 409
    assert answer.json()["error"]["type"] == "RunBusyError"
    assert "being run by elsewhere:1:tag" in answer.json()["error"]["message"]


def test_approve_and_run_says_the_approval_happened_when_the_run_cannot_start(
    store: Store,
) -> None:
    """Approve with ``run: true`` on a dashboard without tools: refused before the approval
    (the run stays waiting). With tools but a run another process holds: approved (200), and
    the answer says why it did not start (it was a 409 after the approval was recorded)."""
    _deferred(store, SECRET_PLAN, "w")
    without, headers = _actor(store, can_resume=False)
    answer = without.post("/api/runs/w/approve", headers=headers, json={"run": True})
    assert answer.status_code == 409
    assert store.get_run("w").status == "awaiting_approval"  # type: ignore[union-attr]
    client, headers = _actor(store, can_resume=True)
    _deferred(store, LITERAL_PLAN, "literal")  # its resume is refused: a secret in the plan
    answer = client.post("/api/runs/literal/approve", headers=headers, json={"run": True})
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "pending"
    assert "secret" in answer.json()["resume_error"]["message"]
    assert "resume" not in answer.json()


def test_resumes_asked_at_once_start_one_run(served: Served) -> None:
    """Six resumes of one approved run at once: one starts it, the others are told it is under
    way (409); all six answered "started" and the dashboard then lost track of its runner."""
    plan = {"goal": "g", "steps": [{"id": "w", "tool": "wait_for", "args": {"step": "w"}}]}
    waiting = planrail.runs.prepare(
        plan, registry(), store=served.store, approver=defer, run_id="once"
    )
    assert asyncio.run(waiting.run()).status == "awaiting_approval"
    planrail.engine.operations.approve(served.store, "once")
    dash = served.server.dash
    cookie = {"cookie": f"{dash.guard.cookie_name}={dash.guard.session}"}
    headers = {
        **cookie,
        "origin": served.url("", token=False).rstrip("/"),
        "x-csrf-token": dash.guard.csrf,
    }
    url = served.url("/api/runs/once/resume", token=False)
    with httpx.Client(timeout=30) as http, ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(lambda _: http.post(url, headers=headers), range(6)))
    codes = sorted(a.status_code for a in answers)
    assert codes == [200, 409, 409, 409, 409, 409], [a.text for a in answers]
    with httpx.Client(timeout=30) as http:
        info = http.get(served.url("/api/runs/once", token=False), headers=cookie).json()
    assert info["resuming"] is True
    served.open_gate("w")
    dash.runners["once"].join(timeout=60)
    record = served.store.get_steps("once")["w"]
    assert (record.status, record.attempts) == ("succeeded", 1)


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
