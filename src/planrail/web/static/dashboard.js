// planrail dashboard: a small hand-written script, no build step, no dependencies.
// Pages are rendered by the server; this script refreshes the run list while it is visible,
// follows a run's server-sent events to recolour its graph, opens the step drawer and posts
// operator actions (with the CSRF token of the page).
"use strict";

(function () {
  const data = JSON.parse(document.getElementById("page-data").textContent || "{}");
  const csrf = document.querySelector('meta[name="csrf-token"]').content;
  const page = document.body.dataset.page;
  const banner = document.getElementById("banner");
  const conn = document.getElementById("conn");

  function connected(ok) {
    banner.hidden = ok;
    conn.textContent = ok ? "live" : "disconnected";
    conn.className = "conn " + (ok ? "ok" : "down");
  }

  function el(tag, attrs, text) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function when(ts) {
    return ts ? new Date(ts * 1000).toLocaleString() : "—";
  }

  function secs(s) {
    if (s === null || s === undefined) return "—";
    return s < 1 ? Math.round(s * 1000) + " ms" : s.toFixed(1) + " s";
  }

  async function post(url, body) {
    const res = await fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
      body: JSON.stringify(body || {}),
    });
    const answer = await res.json().catch(() => ({}));
    if (!res.ok) throw new Error((answer.error && answer.error.message) || res.statusText);
    return answer;
  }

  function say(text, bad) {
    const msg = document.getElementById("action-msg");
    if (!msg) return;
    msg.textContent = text;
    msg.className = "msg " + (bad ? "bad" : "good");
  }

  // ------------------------------------------------------------------ run list

  function runList() {
    let filter = "";
    let timer = null;
    const tbody = document.querySelector("#runs tbody");

    async function refresh() {
      try {
        const res = await fetch("/api/runs" + (filter ? "?filter=" + filter : ""));
        if (!res.ok) throw new Error(res.statusText);
        const { runs } = await res.json();
        connected(true);
        tbody.replaceChildren(
          ...runs.map((r) => {
            const tr = el("tr", { "data-run": r.run_id, class: "s-" + r.status });
            const link = el("a", { href: "/runs/" + encodeURIComponent(r.run_id) }, r.run_id);
            const first = el("td");
            first.append(link);
            const status = el("td", { class: "status s-" + r.status }, r.status);
            if (r.replanned_as) {
              // replaced by a replan: the version to look at (and resume) instead
              tr.dataset.replacedBy = r.replanned_as;
              const newer = el("span", { class: "replaced" }, " (replaced by ");
              newer.append(
                el("a", { href: "/runs/" + encodeURIComponent(r.replanned_as) }, r.replanned_as), ")");
              status.append(newer);
            }
            tr.append(
              first,
              status,
              el("td", {}, r.goal),
              el("td", {}, when(r.started_at || r.created_at)),
              el("td", {}, secs(r.duration)),
              el("td", {}, r.steps),
              el("td", { class: r.in_doubt ? "doubt" : "" }, r.in_doubt || ""),
            );
            return tr;
          }),
        );
        document.getElementById("empty").hidden = runs.length > 0;
      } catch (e) {
        connected(false);
      }
    }

    function schedule() {
      clearInterval(timer);
      timer = null;
      if (document.visibilityState === "visible") {
        refresh();
        timer = setInterval(refresh, 1500);
      }
    }

    document.addEventListener("visibilitychange", schedule);
    for (const b of document.querySelectorAll("button.filter")) {
      b.addEventListener("click", () => {
        filter = b.dataset.filter;
        for (const o of document.querySelectorAll("button.filter")) o.classList.remove("active");
        b.classList.add("active");
        refresh();
      });
    }
    schedule();
  }

  // ------------------------------------------------------------------ run page

  function runPage() {
    const run = data.run;
    const colors = data.colors;
    const statuses = Object.assign({}, run.steps);
    const graph = document.getElementById("graph");
    const svg = graph.querySelector("svg");
    const nodes = new Map();
    for (const g of graph.querySelectorAll("g.step")) nodes.set(g.dataset.step, g);
    let zoom = 1;

    function paint(step, status) {
      const g = nodes.get(step);
      if (!g) return;
      const [fill, stroke] = colors[status] || colors.none;
      const rect = g.querySelector("rect");
      rect.setAttribute("fill", fill);
      rect.setAttribute("stroke", stroke);
      g.dataset.status = status;
      g.querySelector("title").textContent = step + ": " + status;
    }

    function counts() {
      const c = {};
      for (const s of Object.values(statuses)) c[s] = (c[s] || 0) + 1;
      document.getElementById("counts").textContent = Object.entries(c)
        .map(([k, v]) => v + " " + k)
        .join(" · ");
    }

    function setRunStatus(status) {
      const node = document.getElementById("run-status");
      node.textContent = status;
      node.className = "status s-" + status;
      document.body.dataset.runStatus = status;
    }

    for (const [step, status] of Object.entries(statuses)) paint(step, status);
    for (const item of document.querySelectorAll(".legend-item")) {
      const [fill, stroke] = colors[item.dataset.legend];
      item.style.background = fill;
      item.style.borderColor = stroke;
    }
    counts();
    setRunStatus(run.status);

    // Redraw the timeline at most once a second while events arrive.
    let timelineDue = false;
    function timelineSoon() {
      if (timelineDue) return;
      timelineDue = true;
      setTimeout(async () => {
        timelineDue = false;
        const res = await fetch("/api/runs/" + encodeURIComponent(run.run_id) + "/timeline.svg");
        if (res.ok) document.getElementById("timeline").innerHTML = await res.text();
      }, 1000);
    }

    let pending = [];
    let frame = false;
    function flush() {
      frame = false;
      for (const m of pending) {
        if (m.step && m.status) {
          statuses[m.step] = m.status;
          paint(m.step, m.status);
        }
      }
      pending = [];
      counts();
      document.body.dataset.lastSeq = String(lastSeq);
      timelineSoon();
    }

    let lastSeq = run.last_seq;
    const url = "/api/runs/" + encodeURIComponent(run.run_id) + "/events?after=" + lastSeq;
    const source = new EventSource(url);
    source.onopen = () => connected(true);
    source.onerror = () => connected(false);
    source.addEventListener("step", (e) => {
      connected(true);
      const m = JSON.parse(e.data);
      lastSeq = m.seq;
      pending.push(m);
      if (!frame) {
        frame = true;
        requestAnimationFrame(flush);
      }
    });
    source.addEventListener("run", (e) => {
      connected(true);
      setRunStatus(JSON.parse(e.data).status);
      timelineSoon();
    });
    // The run is no longer in the store: reconnecting would only be told so again each second.
    source.addEventListener("gone", () => {
      source.close();
      source.onerror = null;
      banner.textContent = "this run is no longer in the store";
      banner.hidden = false;
      conn.textContent = "gone";
      conn.className = "conn down";
      document.body.dataset.runStatus = "gone";
    });

    // zoom and find: big plans stay usable
    function applyZoom() {
      svg.style.transform = "scale(" + zoom + ")";
      svg.style.transformOrigin = "0 0";
    }
    document.getElementById("zoom-in").onclick = () => { zoom = Math.min(zoom * 1.25, 4); applyZoom(); };
    document.getElementById("zoom-out").onclick = () => { zoom = Math.max(zoom / 1.25, 0.05); applyZoom(); };
    document.getElementById("zoom-fit").onclick = () => {
      const w = Number(svg.getAttribute("width")) || graph.clientWidth;
      zoom = Math.min(1, graph.clientWidth / w);
      applyZoom();
    };
    document.getElementById("find").addEventListener("change", (e) => {
      const g = nodes.get(e.target.value.trim());
      if (!g) return;
      for (const o of graph.querySelectorAll("g.step.found")) o.classList.remove("found");
      g.classList.add("found");
      g.scrollIntoView({ block: "center", inline: "center" });
      openDrawer(g.dataset.step);
    });

    // actions on the run
    for (const b of document.querySelectorAll(".actions button[data-action]")) {
      b.addEventListener("click", async () => {
        try {
          const answer = await post("/api/runs/" + encodeURIComponent(run.run_id) + "/" + b.dataset.action);
          say(b.dataset.action + ": " + (answer.outcome || answer.resume || "done"));
        } catch (err) {
          say(err.message, true);
        }
      });
    }

    // the step drawer
    const drawer = document.getElementById("drawer");
    const body = document.getElementById("drawer-body");
    document.getElementById("drawer-close").onclick = () => { drawer.hidden = true; };

    function field(name, value, pre) {
      const row = el("div", { class: "field" });
      row.append(el("h3", {}, name));
      const shown = typeof value === "string" ? value : JSON.stringify(value, null, 1);
      row.append(el(pre ? "pre" : "div", { "data-field": name }, shown === undefined ? "—" : shown));
      return row;
    }

    async function openDrawer(step) {
      const base = "/api/runs/" + encodeURIComponent(run.run_id) + "/steps/" + encodeURIComponent(step);
      const res = await fetch(base);
      if (!res.ok) return;
      const d = await res.json();
      body.replaceChildren(
        el("h2", {}, d.step),
        field("status", d.status),
        field("calls", d.calls),
        field("depends on", d.depends_on.join(", ") || "—"),
        field(d.args_resolved ? "resolved arguments" : "arguments (as planned; none recorded)", d.args, true),
        field("output", d.output, true),
        field("error", d.error, true),
        field("reason", d.reason || "—"),
        field("attempts", d.attempts),
        field(
          "attempts and delays",
          d.attempt_history.map((a) => "#" + a.attempt + " " + secs(a.end - a.start) +
            (a.delay ? " then wait " + secs(a.delay) : "") + (a.ok ? " ok" : " failed: " + a.error)).join("\n") || "—",
          true,
        ),
        field("idempotency key", d.idempotency_key || "—"),
        field("provenance", d.provenance, true),
        field("OpenTelemetry trace id", (d.trace && d.trace.trace_id) || "not recorded"),
        field("span id", (d.trace && d.trace.span_id) || "not recorded"),
      );
      if (d.status === "in_doubt") body.append(resolveForm(base));
      if (d.status === "failed") {
        const b = el("button", { type: "button", id: "retry-step" }, "retry this step");
        b.onclick = () => post(base + "/retry").then(() => say("retry recorded"), (e) => say(e.message, true));
        body.append(b);
      }
      // a run that may not run again (replaced by a replan): its step actions are disabled
      if (data.no_step_action && (d.status === "in_doubt" || d.status === "failed")) {
        for (const b of body.querySelectorAll("#retry-step, #resolve button")) b.disabled = true;
        body.append(el("p", { class: "muted", id: "no-step-action" }, "disabled: " + data.no_step_action));
      }
      drawer.hidden = false;
      drawer.dataset.step = step;
    }

    function resolveForm(base) {
      const form = el("div", { class: "resolve", id: "resolve" });
      form.append(el("h3", {}, "resolve: did the call happen?"));
      const output = el("textarea", { id: "resolve-output", placeholder: "its output as JSON (optional)" });
      form.append(output);
      for (const decision of ["succeeded", "failed", "retry"]) {
        const b = el("button", { type: "button", "data-decision": decision }, decision);
        b.onclick = async () => {
          let value = null;
          if (decision === "succeeded" && output.value.trim()) {
            try { value = JSON.parse(output.value); } catch (e) { say("output is not JSON", true); return; }
          }
          try {
            await post(base + "/resolve", { decision: decision, output: value });
            say("resolved: " + decision);
            openDrawer(drawer.dataset.step);
          } catch (err) {
            say(err.message, true);
          }
        };
        form.append(b);
      }
      return form;
    }

    for (const [step, g] of nodes) g.addEventListener("click", () => openDrawer(step));
    for (const row of document.querySelectorAll("#timeline")) {
      row.addEventListener("click", (e) => {
        const g = e.target.closest("g.gantt-row");
        if (g) openDrawer(g.dataset.step);
      });
    }
  }

  // ------------------------------------------------------------------ approval page

  function approvalPage() {
    const run = data.run;
    for (const b of document.querySelectorAll(".actions button[data-action]")) {
      b.addEventListener("click", async () => {
        const action = b.dataset.action;
        try {
          const answer = await post("/api/runs/" + encodeURIComponent(run.run_id) + "/" + action,
            action === "approve" ? { run: run.can_resume } : {});
          if (answer.resume_error) {
            say("approved, but the run did not start: " + answer.resume_error.message, true);
            return;
          }
          say(action + ": " + (answer.resume ? "approved, running" : answer.status));
          if (action === "approve" && answer.resume) {
            window.location.href = "/runs/" + encodeURIComponent(run.run_id);
          }
        } catch (err) {
          say(err.message, true);
        }
      });
    }
    connected(true);
  }

  if (page === "list") runList();
  else if (page === "run") runPage();
  else if (page === "approval") approvalPage();
})();
