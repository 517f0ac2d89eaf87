"""The dashboard answers whatever text a run holds: a step error quoting bytes that are not
Unicode (a lone surrogate), from a live run or a record stored with one, is shown as its
escape — never a 500 (``UnicodeEncodeError`` encoding the answer)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

import planrail
from bad_text_records import RUN_ID, SHOWN_ERROR, SHOWN_OUTPUT, store_raw_surrogates
from planrail.store import Store, open_store
from planrail.web import Dashboard, Guard, create_app

PORT = 8765
BASE = f"http://127.0.0.1:{PORT}"
TOKEN = "tok-BAD-TEXT-test-0123"


@planrail.tool(side_effects="none")
def undecodable(name: str) -> str:
    """Fails quoting a file name Python decoded with ``surrogateescape``."""
    raise OSError(f"cannot read /data/{name}\udcff.txt")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with open_store(f"sqlite:///{tmp_path / 'runs.db'}") as s:
        yield s


def _signed_in(store: Store) -> TestClient:
    dash = Dashboard(store=store, guard=Guard(TOKEN, PORT))
    client = TestClient(create_app(dash), base_url=BASE, follow_redirects=False)
    assert client.get(f"/?token={TOKEN}").status_code == 303
    return client


def _pages(run_id: str) -> list[str]:
    return ["/api/runs", f"/api/runs/{run_id}", f"/api/runs/{run_id}/steps/a", f"/runs/{run_id}"]


def test_a_step_error_quoting_undecodable_bytes_is_shown(store: Store) -> None:
    """The run's record holds the error's text as its escape; every page and answer about it
    is served (the step drawer's JSON was a 500)."""
    plan = {"steps": [{"id": "a", "tool": "undecodable", "args": {"name": "caf"}}]}
    result = planrail.run(plan, [undecodable], store=store, run_id="live")
    assert result.status == "failed"
    client = _signed_in(store)
    for path in _pages("live"):
        assert client.get(path).status_code == 200, path
    drawer = client.get("/api/runs/live/steps/a").json()
    assert drawer["error"]["message"] == "cannot read /data/caf\\udcff.txt"


def test_a_record_holding_a_lone_surrogate_is_shown_escaped(store: Store) -> None:
    """A record a store kept with a lone surrogate in it (its error, its output, a key): the
    dashboard answers with each written as its escape."""
    store_raw_surrogates(store, "undecodable")
    client = _signed_in(store)
    for path in _pages(RUN_ID):
        assert client.get(path).status_code == 200, path
    drawer = client.get(f"/api/runs/{RUN_ID}/steps/a").json()
    assert drawer["error"]["message"] == SHOWN_ERROR
    assert drawer["output"] == SHOWN_OUTPUT
    assert client.get(f"/api/runs/{RUN_ID}").json()["error"]["message"] == SHOWN_ERROR
    page = client.get(f"/runs/{RUN_ID}").text
    assert json.dumps(SHOWN_ERROR) in page  # in the page's JSON data block
