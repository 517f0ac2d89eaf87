"""The dashboard's HTML: small server-rendered shells that ``static/dashboard.js`` brings alive.

Data for the script travels in a ``<script type="application/json">`` block (never executed,
so the Content-Security-Policy can forbid inline scripts); every text is HTML-escaped.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any

from planrail._json import encodable
from planrail.engine.gate import REPLACES, REPLANNED_AS, replaced_note
from planrail.web.paths import run_path
from planrail.web.views import UNKNOWN, status_colors

__all__ = ["approval_page", "not_found", "run_list", "run_page"]


def _data(value: Any) -> str:
    text = json.dumps(encodable(value), ensure_ascii=False, default=str)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _shell(title: str, csrf: str, body: str, data: dict[str, Any], page: str) -> str:
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="csrf-token" content="{escape(csrf)}">
<title>{escape(title)} · planrail</title>
<link rel="stylesheet" href="/static/dashboard.css">
</head><body data-page="{escape(page)}">
<header><a class="brand" href="/">planrail</a><span class="title">{escape(title)}</span>
<span id="conn" class="conn">connecting…</span></header>
<div id="banner" class="banner" hidden>disconnected — retrying…</div>
<main>{body}</main>
<script type="application/json" id="page-data">{_data(data)}</script>
<script src="/static/dashboard.js"></script>
</body></html>
"""


def run_list(csrf: str, filters: dict[str, str]) -> str:
    """The run list: filter buttons and a table the script fills and refreshes."""
    buttons = ['<button type="button" class="filter active" data-filter="">all</button>']
    buttons += [
        f'<button type="button" class="filter" data-filter="{escape(k)}">{escape(v)}</button>'
        for k, v in filters.items()
    ]
    body = f"""
<nav class="filters">{"".join(buttons)}</nav>
<table id="runs" class="runs"><thead><tr><th>run</th><th>status</th><th>goal</th>
<th>started</th><th>duration</th><th>steps</th><th>in doubt</th></tr></thead>
<tbody></tbody></table>
<p id="empty" class="muted" hidden>no runs</p>"""
    return _shell("runs", csrf, body, {"colors": status_colors()}, "list")


def _no_resume(info: dict[str, Any]) -> str | None:
    """Why the run cannot be resumed from here, or None."""
    newer = info.get(REPLANNED_AS)
    if newer:
        return f"resume disabled: {replaced_note(newer)}; resume {newer}"
    if not info["can_resume"]:
        return "resume disabled: start `planrail ui` with --tools/--catalog to run steps from here"
    return None


def _actions(info: dict[str, Any]) -> str:
    why = _no_resume(info)
    resume_note = "" if why is None else f'<span class="muted" id="no-resume">{escape(why)}</span>'
    approval = escape(run_path(info["run_id"], "/approval"))
    return f"""<div class="actions">
<a class="button" id="approval-link" href="{approval}">approval</a>
<button type="button" id="cancel" data-action="cancel">cancel run</button>
<button type="button" id="resume" data-action="resume"
 {"" if why is None else "disabled"}>resume</button>{resume_note}
<span id="action-msg" class="msg" role="status"></span></div>"""


def _run_link(run_id: str) -> str:
    return f'<a href="{escape(run_path(run_id))}"><code>{escape(run_id)}</code></a>'


def _versions(info: dict[str, Any]) -> str:
    """The plan versions the store links this run to: the one that replaced it (resume that
    one) and the one it replaced."""
    newer, older = info.get(REPLANNED_AS), info.get(REPLACES)
    lines = []
    if newer:
        lines.append(
            f'<div id="replaced" class="replaced">{replaced_note(_run_link(newer))}: nothing'
            f" of this run runs again; resume {_run_link(newer)}</div>"
        )
    if older:
        lines.append(f'<div id="replaces" class="muted">replan of {_run_link(older)}</div>')
    return "".join(lines)


def _legend() -> str:
    items = [
        f'<span class="legend-item" data-legend="{escape(status)}">{escape(status)}</span>'
        for status in status_colors()
        if status != "none"
    ]
    return f'<span class="legend">{"".join(items)}</span>'


def run_page(csrf: str, info: dict[str, Any], svg: str, gantt: str) -> str:
    """A run: header, actions, the live graph, the timeline and the step drawer."""
    head = svg.split("?>", 1)[1] if svg.startswith("<?xml") else svg
    body = f"""
<section class="run-head">
<h1>{escape(info["goal"] or info["run_id"])}</h1>
<div>run <code>{escape(info["run_id"])}</code> · status
<span id="run-status" class="status s-{escape(info["status"])}">{escape(info["status"])}</span>
· plan <code title="{escape(info["plan_hash"])}">{escape(info["plan_hash"][:19])}…</code></div>
{_versions(info)}{_actions(info)}
</section>
<section class="graph-tools"><button type="button" id="zoom-out">−</button>
<button type="button" id="zoom-in">+</button><button type="button" id="zoom-fit">fit</button>
<input id="find" type="search" placeholder="find a step…" aria-label="find a step">
<span id="counts" class="muted"></span>{_legend()}</section>
<section id="graph" class="graph">{head}</section>
<h2>timeline <span class="muted">(★ critical path)</span></h2>
<section id="timeline" class="timeline">{gantt}</section>
<aside id="drawer" class="drawer" hidden><button type="button" id="drawer-close">×</button>
<div id="drawer-body"></div></aside>"""
    newer = info.get(REPLANNED_AS)
    # the drawer's retry and resolve are disabled with this reason (the script reads it)
    no_step_action = None if not newer else f"{replaced_note(newer)}; retry or resume {newer}"
    data = {"run": info, "colors": status_colors(), "no_step_action": no_step_action}
    return _shell(f"run {info['run_id']}", csrf, body, data, "run")


def _value(value: Any) -> str:
    return escape(json.dumps(encodable(value), ensure_ascii=False, indent=1, default=str))


def approval_page(csrf: str, view: dict[str, Any], can_resume: bool) -> str:
    """A stored plan waiting for approval: every step, its argument values and where each comes
    from, the hash the approval binds; approve (and run) or refuse."""
    rows = []
    for s in view["steps"]:
        sources = "".join(
            f"<li><b>{escape(name)}</b>: {escape(', '.join(src))}</li>"
            for name, src in s["provenance"].items()
        )
        mark = {True: "needs approval", None: "not known"}.get(s["needs_approval"], "")
        change = s.get("change")
        badge = (
            f' <span class="change change-{escape(change)}">{escape(change)}</span>'
            if change in ("added", "changed")
            else ""
        )
        rows.append(
            f'<tr data-step="{escape(s["step"])}" data-change="{escape(change or "")}">'
            f"<td><code>{escape(s['step'])}</code>{badge}</td>"
            f"<td>{escape(s['calls'])}</td><td class='fx fx-{escape(s['side_effects'])}'>"
            f"{_effects(s['side_effects'])}</td><td>{escape(mark)}</td>"
            f"<td><pre>{_value(s['args'])}</pre></td><td><ul>{sources}</ul></td></tr>"
        )
    waiting = view["status"] == "awaiting_approval"
    newer = view[REPLANNED_AS]
    run_label = "approve and run" if can_resume else "approve"
    refuse = '<button type="button" id="refuse" data-action="refuse">refuse</button>'
    if waiting and newer is not None:  # no resume runs it: only its request can be closed
        buttons = (
            f'<span class="muted" id="replaced">this run was {escape(replaced_note(newer))}:'
            f' approve <a href="{escape(run_path(newer, "/approval"))}"><code>'
            f"{escape(newer)}</code></a> instead</span>{refuse}"
        )
    elif waiting:
        buttons = (
            f'<button type="button" id="approve" data-action="approve">{run_label}</button>'
            f"\n{refuse}"
        )
    else:
        buttons = f'<span class="muted">this run is {escape(view["status"])}, not waiting</span>'
    body = f"""
<section class="run-head"><h1>approve: {escape(view["goal"] or view["run_id"])}</h1>
<div>run <a href="{escape(run_path(view["run_id"]))}"><code>{escape(view["run_id"])}</code></a>
· status <span id="run-status" class="status s-{escape(view["status"])}">
{escape(view["status"])}</span></div>
<div>plan hash <code id="plan-hash">{escape(view["plan_hash"])}</code></div>
<div>{len(view["to_approve"])} step(s) {_known(view)}change the world or ask for approval:
{escape(", ".join(view["to_approve"]))}</div>{_unknown(view)}
<div class="actions">{buttons}<span id="action-msg" class="msg" role="status"></span></div>
</section>
{_warnings(view["warnings"])}{_diff(view["diff"])}
<table class="approval"><thead><tr><th>step</th><th>calls</th><th>side effects</th><th></th>
<th>arguments</th><th>where each value comes from</th></tr></thead>
<tbody>{"".join(rows)}</tbody></table>"""
    data = {"run": {"run_id": view["run_id"], "can_resume": can_resume}}
    return _shell(f"approve {view['run_id']}", csrf, body, data, "approval")


def _effects(side_effects: str) -> str:
    if side_effects == UNKNOWN:
        return "unknown <small>(tools not loaded)</small>"
    return escape(side_effects)


def _known(view: dict[str, Any]) -> str:
    """``known to``: without the tools or the run's record, the count is a lower bound."""
    return "known to " if view.get("unknown_effects") and not view.get("recorded") else ""


def _unknown(view: dict[str, Any]) -> str:
    """Says that the side effects of some steps are not known (the dashboard was started
    without their tools), and where the steps to approve come from then."""
    unknown = view.get("unknown_effects") or []
    if not unknown:
        return ""
    which = (
        "the steps to approve are those the run recorded when it asked for approval"
        if view.get("recorded")
        else "whether they need approval is not known either"
    )
    return (
        '<div id="unknown-effects" class="unknown-effects">tools not loaded: side effects'
        f" unknown for {escape(', '.join(unknown))}; {which}. Start <code>planrail ui"
        " --tools</code> to see them.</div>"
    )


def _warnings(warnings: list[dict[str, Any]]) -> str:
    """The plan's validation warnings (a placeholder such as ``<user_id>``, a lint), as
    ``planrail run`` prints them before asking: what may be a mistake, seen before approving."""
    if not warnings:
        return ""
    items = "".join(
        f'<li data-code="{escape(w["code"])}"><b>[{escape(w["code"])}]</b> '
        f"{_where(w['step'])} at <code>{escape(w['path'])}</code>: {escape(w['message'])}</li>"
        for w in warnings
    )
    count = f"{len(warnings)} warning{'' if len(warnings) == 1 else 's'}"
    return (
        f'<section id="warnings" class="warnings"><h2>{count}: the plan runs as written</h2>'
        f"<ul>{items}</ul></section>"
    )


def _where(step: str | None) -> str:
    return f"step <code>{escape(step)}</code>" if step else "plan"


def _diff(diff: dict[str, Any] | None) -> str:
    """A replan's changes since the version approved before it (nothing for a first plan)."""
    if diff is None:
        return ""
    prev = escape(diff["previous_run"])

    def steps(kind: str) -> str:
        found = diff[kind]
        items = "".join(f"<li><code>{escape(sid)}</code></li>" for sid in found)
        items = items or '<li class="muted">none</li>'
        return (
            f'<div class="diff-{kind}"><h3>{kind} ({len(found)})</h3>'
            f'<ul id="diff-{kind}">{items}</ul></div>'
        )

    changed_args = "".join(
        f'<tr data-diff-step="{escape(sid)}" data-diff-arg="{escape(name)}">'
        f"<td><code>{escape(sid)}</code></td><td>{escape(name)}</td>"
        f"<td><pre>{_value(values.get('before'))}</pre></td>"
        f"<td><pre>{_value(values.get('after'))}</pre></td></tr>"
        for sid, delta in diff["args"].items()
        for name, values in delta.items()
    )
    table = (
        '<table class="diff-args"><thead><tr><th>step</th><th>argument</th><th>before</th>'
        f"<th>after</th></tr></thead><tbody>{changed_args}</tbody></table>"
        if changed_args
        else ""
    )
    return f"""<section id="diff" class="diff"><h2>changed since the approved version
<code title="{escape(diff["previous_hash"])}">{escape(diff["previous_hash"][:19])}…</code>
(run <a href="{escape(run_path(diff["previous_run"], "/approval"))}"><code>{prev}</code></a>)</h2>
<div class="diff-lists">{steps("added")}{steps("removed")}{steps("changed")}</div>
{table}</section>"""


def not_found(message: str) -> str:
    return _shell("not found", "", f"<p>{escape(message)}</p>", {}, "none")
