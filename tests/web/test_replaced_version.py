"""A run replaced by a replan is shown so, from the one stored fact (its record's
``replanned_as``, :func:`planrail.engine.gate.replaced_by`): the run list row and the run page
say "replaced by RUN-r1" with a link to it, the run JSON carries ``replanned_as``, and resume,
retry and resolve are disabled on it with the reason — the actions the server refuses on it.
The replan's page says which version it replaced, when the store says so.

The replaced run is made by the real API: an :class:`~planrail.agent.Agent` with a scripted
model whose first plan fails and whose replan is stored as ``RUN-r1``
(:func:`.conftest.replanned_run`)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from starlette.testclient import TestClient

from planrail.engine.gate import REPLACES, mark_replanned
from planrail.runs import prepare
from planrail.store import Store, open_store
from planrail.web import Dashboard, Guard, create_app
from planrail.web.views import previous_version

from .conftest import Served, registry, replanned_run

TOKEN = "tok-REPLACED-version-0123"
PORT = 8798
BASE = f"http://127.0.0.1:{PORT}"
ODD = 'ops/7 <b>&"'
"""A run id a page must escape and a link must percent-encode."""


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with open_store(f"sqlite:///{tmp_path / 'runs.db'}") as opened:
        yield opened


@pytest.fixture
def client(store: Store) -> TestClient:
    """A signed-in client of a dashboard that has the tools (resume is possible in general)."""
    dash = Dashboard(store=store, guard=Guard(TOKEN, PORT), registry=registry(), can_resume=True)
    client = TestClient(
        create_app(dash), base_url=BASE, follow_redirects=False, raise_server_exceptions=False
    )
    assert client.get(f"/?token={TOKEN}").status_code == 303
    client.headers.update({"origin": BASE, "x-csrf-token": dash.guard.csrf})
    return client


def _path(run_id: str, suffix: str = "") -> str:
    return f"/runs/{quote(run_id, safe='')}{suffix}"


def _stored_newer(store: Store, run_id: str) -> Any:
    """What the store holds of the version that replaced ``run_id`` (None: nothing)."""
    run = store.get_run(run_id)
    assert run is not None
    return run.metadata.get("replanned_as")


def _rows(client: TestClient, flt: str = "") -> dict[str, dict[str, Any]]:
    answer = client.get("/api/runs" + (f"?filter={flt}" if flt else ""))
    assert answer.status_code == 200, answer.text
    return {r["run_id"]: r for r in answer.json()["runs"]}


def _info(client: TestClient, run_id: str) -> dict[str, Any]:
    answer = client.get("/api" + _path(run_id))
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


def _page(client: TestClient, run_id: str) -> str:
    answer = client.get(_path(run_id))
    assert answer.status_code == 200, answer.text
    return answer.text


def _element(html: str, element_id: str) -> str | None:
    """The HTML inside the element with that id (a ``div``, ``span`` or ``button``), or None."""
    found = re.search(rf'<(\w+)[^>]*\bid="{element_id}"[^>]*>(.*?)</\1>', html, re.S)
    return None if found is None else found[2]


def _text(fragment: str) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", "", fragment)).split())


def _links(fragment: str) -> list[str]:
    return [unescape(h) for h in re.findall(r'href="([^"]*)"', fragment)]


def _resume_button(html: str) -> str:
    found = re.search(r'<button[^>]*\bid="resume"[^>]*>', html)
    assert found is not None
    return found[0]


def _page_data(html: str) -> dict[str, Any]:
    found = re.search(r'<script type="application/json" id="page-data">(.*?)</script>', html, re.S)
    assert found is not None
    data: dict[str, Any] = json.loads(found[1])
    return data


def test_the_run_list_and_the_run_json_name_the_version_that_replaced_it(
    store: Store, client: TestClient
) -> None:
    """The row and the JSON of ``rp`` carry ``replanned_as`` as stored; ``rp-r1``'s carry none
    (it was not replaced), and its JSON says it replaced ``rp``."""
    replanned_run(store, "rp")
    assert _stored_newer(store, "rp") == "rp-r1"
    assert _stored_newer(store, "rp-r1") is None
    rows = _rows(client)
    assert (rows["rp"]["status"], rows["rp"]["replanned_as"]) == ("failed", "rp-r1")
    assert rows["rp-r1"]["replanned_as"] is None
    assert _rows(client, "failed")["rp"]["replanned_as"] == "rp-r1"
    info = _info(client, "rp")
    assert (info["status"], info["replanned_as"], info["replaces"]) == ("failed", "rp-r1", None)
    info = _info(client, "rp-r1")
    assert (info["replanned_as"], info["replaces"]) == (None, "rp")


def test_the_page_of_a_replaced_run_says_so_and_disables_what_the_server_refuses(
    store: Store, client: TestClient
) -> None:
    """``rp``'s page: "replaced by rp-r1" linking to ``rp-r1``'s page, resume disabled with
    the reason, the drawer's retry and resolve given the reason to disable them; the server
    refuses each of those actions (409, naming ``rp-r1``) and nothing of ``rp`` changes."""
    replanned_run(store, "rp")
    html = _page(client, "rp")
    replaced = _element(html, "replaced")
    assert replaced is not None, "the page does not say the run was replaced"
    assert "replaced by rp-r1" in _text(replaced)
    assert "resume rp-r1" in _text(replaced)
    assert set(_links(replaced)) == {"/runs/rp-r1"}
    assert client.get("/runs/rp-r1").status_code == 200
    assert "disabled" in _resume_button(html)
    why = _element(html, "no-resume")
    assert why is not None
    assert "replaced by rp-r1" in _text(why)
    no_step_action = _page_data(html)["no_step_action"]
    assert "replaced by rp-r1" in no_step_action
    assert _element(html, "replaces") is None

    before = store.get_run("rp"), store.get_steps("rp"), len(store.events("rp"))
    for where in ("/resume", "/steps/mail/retry"):
        answer = client.post("/api" + _path("rp", where), json={})
        assert answer.status_code == 409, answer.text
        error = answer.json()["error"]
        assert (error["type"], "rp-r1" in error["message"]) == ("RunReplannedError", True)
    answer = client.post("/api/runs/rp/steps/mail/resolve", json={"decision": "retry"})
    assert answer.status_code == 409, answer.text
    assert (store.get_run("rp"), store.get_steps("rp"), len(store.events("rp"))) == before


def test_the_replans_page_says_which_version_it_replaced_and_can_be_resumed(
    store: Store, client: TestClient
) -> None:
    """``rp-r1``'s page is not marked replaced: resume is enabled (the dashboard has the
    tools), no reason is given for the drawer; it says it is a replan of ``rp`` (a link)."""
    replanned_run(store, "rp")
    html = _page(client, "rp-r1")
    assert _element(html, "replaced") is None
    assert _element(html, "no-resume") is None
    assert "disabled" not in _resume_button(html)
    assert _page_data(html)["no_step_action"] is None
    replaces = _element(html, "replaces")
    assert replaces is not None
    assert (_text(replaces), _links(replaces)) == ("replan of rp", ["/runs/rp"])


def test_a_waiting_version_a_later_replan_replaced_cannot_be_approved(
    store: Store, client: TestClient
) -> None:
    """``rp-r1`` waits for approval, and a later replan (``rp-r2``) replaced it: no resume runs
    it, so approving it is refused (409, naming ``rp-r2``) and nothing of it changes; its
    approval page shows no approve button but says so, linking to ``rp-r2``'s approval page;
    refusing it (closing the request) is still allowed."""
    replanned_run(store, "rp")
    mark_replanned(store, "rp-r1", "rp-r2")
    html = client.get(_path("rp-r1", "/approval")).text
    assert re.search(r'<button[^>]*\bid="approve"', html) is None
    replaced = _element(html, "replaced")
    assert replaced is not None, "the approval page does not say the run was replaced"
    assert "replaced by rp-r2" in _text(replaced)
    assert _links(replaced) == ["/runs/rp-r2/approval"]
    assert re.search(r'<button[^>]*\bid="refuse"', html) is not None

    before = store.get_run("rp-r1"), store.get_steps("rp-r1"), len(store.events("rp-r1"))
    for body in ({}, {"run": True}):
        answer = client.post("/api" + _path("rp-r1", "/approve"), json=body)
        assert answer.status_code == 409, answer.text
        error = answer.json()["error"]
        assert (error["type"], "rp-r2" in error["message"]) == ("RunReplannedError", True)
    assert (store.get_run("rp-r1"), store.get_steps("rp-r1"), len(store.events("rp-r1"))) == (
        before
    )
    answer = client.post("/api" + _path("rp-r1", "/refuse"), json={})
    assert answer.status_code == 200, answer.text
    refused = store.get_run("rp-r1")
    assert refused is not None
    assert (refused.status, refused.approval) == ("cancelled", None)


def _quick_run(store: Store, run_id: str, n: int = 1, **options: Any) -> None:
    """Run ``run_id`` of a one-step plan (``quick`` with ``n``) into ``store``: it succeeds."""
    plan = {"goal": "g", "steps": [{"id": "a", "tool": "quick", "args": {"n": n}}]}
    execution = prepare(plan, registry(), store=store, run_id=run_id, **options)
    assert asyncio.run(execution.run()).status == "succeeded"


def test_an_id_alone_does_not_make_a_replan(store: Store, client: TestClient) -> None:
    """``solo-r1`` beside ``solo``, neither stored as replaced: nothing is said of either —
    the run-id convention is read only where the store marks the version before replaced."""
    for run_id in ("solo", "solo-r1"):
        _quick_run(store, run_id)
        assert _stored_newer(store, run_id) is None
    for run_id in ("solo", "solo-r1"):
        info = _info(client, run_id)
        assert (info["replanned_as"], info["replaces"]) == (None, None)
        html = _page(client, run_id)
        assert (_element(html, "replaced"), _element(html, "replaces")) == (None, None)
        assert _rows(client)[run_id]["replanned_as"] is None


def test_an_odd_run_id_is_escaped_on_the_page_and_encoded_in_the_link(
    store: Store, client: TestClient
) -> None:
    replanned_run(store, ODD)
    newer = f"{ODD}-r1"
    assert _stored_newer(store, ODD) == newer
    html = _page(client, ODD)
    replaced = _element(html, "replaced")
    assert replaced is not None
    assert "<b>" not in replaced
    assert f"replaced by {newer}" in _text(replaced)
    assert set(_links(replaced)) == {_path(newer)}
    assert client.get(_path(newer)).status_code == 200
    replaces = _element(_page(client, newer), "replaces")
    assert replaces is not None
    assert _links(replaces) == [_path(ODD)]


def test_a_replan_is_named_by_its_record_whatever_the_run_ids(
    store: Store, client: TestClient
) -> None:
    """A version run as ``retry on tuesday`` with ``replaces="nightly/7"`` (what an agent's
    replan passes), its older version marked replaced as the agent marks it: ids that follow
    no convention, yet its JSON and page name ``nightly/7`` (a link) from its record
    (``replaces``), and ``nightly/7`` is its previous version (the approval page's diff)."""
    older, newer = "nightly/7", "retry on tuesday"
    _quick_run(store, older)
    mark_replanned(store, older, newer)
    _quick_run(store, newer, n=2, replaces=older)
    stored = store.get_run(newer)
    assert stored is not None
    assert stored.metadata.get(REPLACES) == older
    assert _info(client, newer)["replaces"] == older
    replaces = _element(_page(client, newer), "replaces")
    assert replaces is not None
    assert (_text(replaces), _links(replaces)) == (f"replan of {older}", [_path(older)])
    assert _info(client, older)["replanned_as"] == newer
    before = previous_version(store, stored)
    assert before is not None
    assert before.run_id == older


def test_a_record_written_before_the_fact_is_read_by_the_run_id_convention(
    store: Store, client: TestClient
) -> None:
    """The agent's replan ``rp-r1`` stores ``replaces: rp``; with that key taken out of its
    record (as planrail wrote records before it stored the fact) its page still says
    "replan of rp": ``rp`` is the version before by the convention, marked replaced by it."""
    replanned_run(store, "rp")
    stored = store.get_run("rp-r1")
    assert stored is not None
    assert stored.metadata.get(REPLACES) == "rp"
    kept = {k: v for k, v in stored.metadata.items() if k != REPLACES}
    store.commit(run=dataclasses.replace(stored, metadata=kept))
    assert _info(client, "rp-r1")["replaces"] == "rp"
    replaces = _element(_page(client, "rp-r1"), "replaces")
    assert replaces is not None
    assert (_text(replaces), _links(replaces)) == ("replan of rp", ["/runs/rp"])


# ------------------------------------------------------------------ in a browser


def test_in_a_browser_the_replaced_run_links_to_its_replan_and_its_actions_are_disabled(
    served: Served, page: Any
) -> None:
    """The run list marks ``rb`` "replaced by rb-r1"; its link opens ``rb-r1``'s page, which
    says it is a replan of ``rb``; on ``rb``'s page resume is disabled, and the drawer of its
    failed step shows "retry this step" disabled, with the reason. Nothing is recorded."""
    replanned_run(served.store, "rb")
    assert _stored_newer(served.store, "rb") == "rb-r1"
    events = len(served.store.events("rb"))
    page.goto(served.url("/"))
    mark = page.wait_for_selector('#runs tr[data-run="rb"] .replaced')
    assert " ".join(mark.text_content().split()) == "(replaced by rb-r1)"
    assert page.get_attribute('#runs tr[data-run="rb"]', "data-replaced-by") == "rb-r1"
    assert page.query_selector('#runs tr[data-run="rb-r1"] .replaced') is None
    page.click('#runs tr[data-run="rb"] .replaced a')
    page.wait_for_url("**/runs/rb-r1")
    assert page.text_content("#replaces").strip() == "replan of rb"
    assert not page.is_disabled("#resume")

    page.goto(served.url("/runs/rb", token=False))
    assert "replaced by rb-r1" in page.text_content("#replaced")
    assert page.is_disabled("#resume")
    assert "replaced by rb-r1" in page.text_content("#no-resume")
    page.click('#graph g.step[data-step="mail"]')
    page.wait_for_selector("#drawer:not([hidden]) #retry-step")
    assert page.is_disabled("#retry-step")
    assert "replaced by rb-r1" in page.text_content("#no-step-action")
    assert len(served.store.events("rb")) == events
