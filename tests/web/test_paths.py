"""A run id is free text: its pages, JSON, stream and actions are reached by its links,
whatever it holds (``/``, ``?``, ``#``, ``%``, spaces, non-ASCII)."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from html import escape, unescape
from urllib.parse import quote

import httpx
import pytest

import planrail
from planrail.store import Store

from .conftest import Served, registry
from .test_security import SECRET_PLAN, _csrf, _deferred, _signed_in, store  # noqa: F401

BASE = "http://127.0.0.1:8765"
PLAN = {"goal": "g", "steps": [{"id": "q", "tool": "quick", "args": {"n": 1}}]}
IDS = ["nightly/2026-12-03", "x/approval", "q?x#1", "100%41", "sp ace", "é\\ü", "a%2Fb"]


def _href(html: str, anchor_id: str | None = None) -> str:
    """The href of the link with ``anchor_id`` (or of the first link to a run)."""
    if anchor_id is not None:
        found = re.search(rf'id="{anchor_id}" href="([^"]*)"', html)
    else:
        found = re.search(r'<a href="(/runs/[^"]*)"', html)
    assert found is not None, html[:2000]
    return unescape(found.group(1))


@pytest.mark.parametrize("rid", IDS)
def test_a_run_ids_pages_and_json_are_reached_by_its_links(store: Store, rid: str) -> None:  # noqa: F811
    assert planrail.run(PLAN, registry(), store=store, run_id=rid).status == "succeeded"
    client = _signed_in(store)
    one = quote(rid, safe="")
    answer = client.get(f"/api/runs/{one}")
    assert answer.status_code == 200
    assert answer.json()["run_id"] == rid
    page = client.get(f"/runs/{one}")
    assert page.status_code == 200
    approval = client.get(_href(page.text, "approval-link"))  # the page's own link
    assert approval.status_code == 200
    back = client.get(_href(approval.text))  # and the approval page's link back to the run
    assert back.status_code == 200
    assert f"run <code>{escape(rid)}</code>" in back.text
    assert client.get(f"/api/runs/{one}/timeline.svg").status_code == 200
    step = client.get(f"/api/runs/{one}/steps/q")
    assert step.status_code == 200
    assert step.json()["status"] == "succeeded"


@pytest.mark.parametrize("rid", ["nightly/3", "100%41"])
def test_an_action_reaches_the_run_its_id_names(store: Store, rid: str) -> None:  # noqa: F811
    """Refusing ``nightly/3`` refuses that run, and not a run named by a part of its id."""
    _deferred(store, SECRET_PLAN, rid)
    _deferred(store, SECRET_PLAN, "nightly")
    _deferred(store, SECRET_PLAN, "100A")
    client = _signed_in(store)
    headers = {"origin": BASE, "x-csrf-token": _csrf(client)}
    answer = client.post(f"/api/runs/{quote(rid, safe='')}/refuse", headers=headers)
    assert answer.status_code == 200, answer.text
    assert store.get_run(rid).status == "cancelled"  # type: ignore[union-attr]
    assert store.get_run("nightly").status == "awaiting_approval"  # type: ignore[union-attr]
    assert store.get_run("100A").status == "awaiting_approval"  # type: ignore[union-attr]
    missing = client.get(f"/api/runs/{quote(rid + '/none', safe='')}")
    assert missing.status_code == 404
    assert rid + "/none" in missing.json()["error"]["message"]


def test_over_a_real_server_the_id_is_one_segment(served: Served) -> None:
    """uvicorn hands the app the decoded path; the run, its page and its event stream are
    still those of ``nightly/3``."""
    rid = "nightly/3"
    with ThreadPoolExecutor(1) as pool:
        pool.submit(planrail.run, PLAN, registry(), store=served.store, run_id=rid).result(60)
    one = quote(rid, safe="")
    guard = served.server.dash.guard
    cookie = {"cookie": f"{guard.cookie_name}={guard.session}"}
    with httpx.Client(timeout=30) as http:
        answer = http.get(served.url(f"/api/runs/{one}", token=False), headers=cookie)
        assert answer.status_code == 200
        assert answer.json()["run_id"] == rid
        page = http.get(served.url(f"/runs/{one}", token=False), headers=cookie)
        assert page.status_code == 200
        lines: list[str] = []
        url = served.url(f"/api/runs/{one}/events", token=False)
        with http.stream("GET", url, headers=cookie) as stream:
            assert stream.status_code == 200
            for line in stream.iter_lines():
                lines.append(line)
                if lines[-2:-1] == ["event: run"]:
                    break
    assert '"status":"succeeded"' in lines[-1]
    assert any(line.startswith("id: ") for line in lines)
