"""The dashboard on a 1,000-step run: page load, and whether the live stream keeps up.

    python -m bench.dashboard [--steps 1000] [--width 50]

Needs the ``[web]`` extra, ``playwright`` (Python) and Debian's ``/usr/bin/chromium`` (never a
downloaded browser build). One SQLite store; the dashboard is served on 127.0.0.1 in a thread.

1. **Page load**: a finished run of ``--steps`` keyed steps (layers of ``--width``) is opened in
   headless Chromium; reported: server time for the HTML, and the browser's navigation timing
   (``domContentLoaded`` and ``load``), median of 5 loads.
2. **Live**: the page is opened on a fresh run of the same plan, then the run executes in another
   thread (every step's start and end committed to the store). Reported: the store's event
   rate, and the lag between the run's last event being committed and the page having applied
   it (its ``lastSeq``), plus whether every node ended ``succeeded`` on the page.

Writes ``bench/results/dashboard.json``. A measurement, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

import planrail
from planrail.plan.tools import ToolRegistry
from planrail.store import open_store
from planrail.testing.browser import CHROMIUM, CHROMIUM_ARGS
from planrail.web import Dashboard, DashboardServer, Guard, new_token
from planrail.web.server import free_port

RESULTS = Path(__file__).resolve().parent / "results" / "dashboard.json"


@planrail.tool(side_effects="keyed", requires_approval=False)
async def work(i: int) -> int:
    """A keyed step that takes a millisecond (its start is committed before the call)."""
    await asyncio.sleep(0.001)
    return i


def plan_of(steps: int, width: int) -> dict[str, Any]:
    out = []
    for i in range(steps):
        deps = [f"s{i - width}"] if i >= width else []
        out.append({"id": f"s{i}", "tool": "work", "args": {"i": i}, "depends_on": deps})
    return {"goal": f"{steps} steps in layers of {width}", "steps": out}


def _run(plan: dict[str, Any], store: Any, run_id: str) -> None:
    registry = ToolRegistry.of([work])
    planrail.run(plan, registry, store=store, run_id=run_id, max_concurrency=64)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--width", type=int, default=50)
    ns = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    plan = plan_of(ns.steps, ns.width)
    tmp = Path(tempfile.mkdtemp(prefix="planrail-bench-ui-"))
    store = open_store(f"sqlite:///{tmp / 'store.db'}")
    t0 = time.perf_counter()
    _in_thread(lambda: _run(plan, store, "done"))
    run_s = time.perf_counter() - t0
    port = free_port()
    dash = Dashboard(store=store, guard=Guard(new_token(), port), poll_interval=0.1)
    result: dict[str, Any] = {"steps": ns.steps, "width": ns.width, "run_alone_s": run_s}
    with DashboardServer(dash, "127.0.0.1", port) as server:
        cookie = {"cookie": f"planrail_session={dash.guard.session}"}
        html_s = []
        with httpx.Client() as http:
            for _ in range(5):
                t = time.perf_counter()
                http.get(server.url("/runs/done", token=False), headers=cookie).raise_for_status()
                html_s.append(time.perf_counter() - t)
        result["html_server_s"] = statistics.median(html_s)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 860})
            page.goto(server.url("/"))
            dcl, load = [], []
            for _ in range(5):
                page.goto(server.url("/runs/done", token=False), wait_until="load")
                nav = page.evaluate(
                    "(() => { const n = performance.getEntriesByType('navigation')[0];"
                    " return [n.domContentLoadedEventEnd, n.loadEventEnd]; })()"
                )
                dcl.append(nav[0] / 1000)
                load.append(nav[1] / 1000)
            result["page_dom_content_loaded_s"] = statistics.median(dcl)
            result["page_load_s"] = statistics.median(load)
            result["html_bytes"] = len(page.content())

            # live: open the page on a run that has not started, then run it
            runner = threading.Thread(target=_run, args=(plan, store, "live"))
            t0 = time.perf_counter()
            runner.start()
            while store.get_run("live") is None:
                time.sleep(0.005)
            page.goto(server.url("/runs/live", token=False), wait_until="load")
            runner.join()
            run_end = time.perf_counter()
            events = store.events("live")
            last = events[-1].seq
            page.wait_for_function(
                f"Number(document.body.dataset.lastSeq || 0) >= {last}", timeout=120_000
            )
            caught_up = time.perf_counter()
            done = page.evaluate(
                "document.querySelectorAll('#graph g.step[data-status=\"succeeded\"]').length"
            )
            browser.close()
        span = events[-1].at - events[0].at
        result.update(
            {
                "live_run_s": run_end - t0,
                "events": len(events),
                "event_rate_per_s": len(events) / span if span > 0 else None,
                "catch_up_after_last_event_s": caught_up - run_end,
                "nodes_succeeded_on_page": done,
            }
        )
    store.close()
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    for k, v in result.items():
        print(f"{k:32} {v:.3f}" if isinstance(v, float) else f"{k:32} {v}")


def _in_thread(fn: Any) -> None:
    t = threading.Thread(target=fn)
    t.start()
    t.join()


if __name__ == "__main__":
    main()
