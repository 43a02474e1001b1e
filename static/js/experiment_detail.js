// The experiment dashboard: draws the figures orchestrator/web/charts.py rendered into the page (through
// static/js/charts.js), then appends each live round's points. The offline report inlines this same file; without a ws_url it
// only draws.
(function () {
  "use strict";
  const FINISHED = ["completed", "cancelled", "failed", "crashed"];
  const $ = (id) => document.getElementById(id);

  const page = JSON.parse($("page-data").textContent);
  const charts = JSON.parse($("charts-data").textContent);
  // seconds: Σ round time of the `timed` rounds (an external run may report no round time at all).
  const progress = { last: charts.last_round, rounds: charts.rounds, seconds: charts.round_seconds, timed: charts.timed_rounds };

  // -- charts: drawn by static/js/charts.js, extended by the rounds that arrive live ---------------
  const drawn = window.FedWebCharts ? FedWebCharts.init(charts) : null;

  let pending = [];
  function appendRounds() {
    const batch = pending;
    pending = [];
    if (drawn) drawn.append(batch);
  }
  function addRound(m) {
    if (m.round <= progress.last) return false; // the socket resumes after the last round drawn
    progress.last = m.round;
    progress.rounds += 1;
    if (m.round_seconds !== null && m.round_seconds !== undefined) { progress.seconds += m.round_seconds; progress.timed += 1; }
    if (!pending.length) requestAnimationFrame(appendRounds);
    pending.push(m);
    return true;
  }

  // The summary block follows the live rounds too: each is folded in by the rules the server sends
  // (page data `summary`: orchestrator/experiments/summaries.py METRICS, from the declared round
  // fields), starting from the values it computed for the rounds already drawn.
  const summary = page.summary || { metrics: [], values: {} };
  const FOLD = {
    last: (old, v) => v,
    max: (old, v) => (old === null || old === undefined ? v : Math.max(old, v)),
    min: (old, v) => (old === null || old === undefined ? v : Math.min(old, v)),
    sum: (old, v) => (old || 0) + v,
    count: (old) => (old || 0) + 1,
  };
  function updateSummary(m) {
    for (const s of summary.metrics) {
      const v = window.FedWebCharts ? FedWebCharts.value({ keys: s.keys }, m) : null;
      if (v === null) continue;
      summary.values[s.key] = FOLD[s.aggregate](summary.values[s.key], v);
      setSummary(s.key, `${(summary.values[s.key] / s.scale).toFixed(s.digits)}${s.unit}`);
    }
  }
  function setSummary(key, text) {
    const el = document.querySelector(`#summary [data-col="${key}"] b`);
    if (el) el.textContent = text;
  }

  // The server runs the leak heuristic (orchestrator/experiments/leak.py) and sends its verdict with the round.
  function showLeak(warnings) {
    const badge = $("leak-badge");
    if (!badge || !warnings) return;
    badge.hidden = warnings.length === 0;
    badge.title = warnings.join(" · ");
  }

  // -- status line, table, log ----------------------------------------------------------------------
  function setText(id, text) { const el = $(id); if (el) el.textContent = text; }

  function duration(seconds) {
    if (seconds === null || !isFinite(seconds)) return "–";
    seconds = Math.max(0, Math.round(seconds));
    const h = Math.floor(seconds / 3600), m = Math.floor((seconds % 3600) / 60), s = seconds % 60;
    return h ? `${h}h ${m}m` : m ? `${m}m ${s}s` : `${s}s`;
  }

  // Status events carry what the status line shows (the share page's carry no worker).
  function updateStatus(ev) {
    if (ev) {
      Object.assign(page, { status: ev.status, current_round: ev.current_round, started: ev.started, finished: ev.finished });
      if (ev.error) { const el = $("error"); if (el) { el.textContent = ev.error; el.hidden = false; } }
      if (ev.worker) setText("st-worker", ev.worker);
      showWaiting(ev.waiting);
    }
    const badge = $("status-badge");
    if (badge) { badge.textContent = page.status; badge.className = `badge ${page.status}`; }
    setText("st-round", Math.max(page.current_round || 0, progress.last));
    document.querySelectorAll("form[data-when]").forEach((f) => {
      f.hidden = !f.dataset.when.split(" ").includes(page.status);
    });
    tick();
  }

  // Elapsed is wall-clock time (pauses and queueing included, as its label says); "Training" is what
  // the rounds themselves took. The ETA is per round: their measured time when they report one, else
  // (a script that reports no round time) the wall clock per round so far, marked "≈".
  function tick() {
    let elapsed = null;
    if (page.started) {
      const end = page.finished ? new Date(page.finished) : new Date();
      elapsed = (end - new Date(page.started)) / 1000;
      setText("st-elapsed", duration(elapsed));
    }
    setText("st-training", progress.timed ? duration(progress.seconds) : "–");
    const left = page.total_rounds - progress.last;
    if (!["queued", "running"].includes(page.status) || !progress.rounds || left <= 0) {
      setText("st-eta", page.status === "completed" ? "done" : "–");
    } else if (progress.timed) {
      setText("st-eta", duration((progress.seconds / progress.timed) * left));
    } else {
      setText("st-eta", elapsed !== null && progress.last ? `≈ ${duration((elapsed / progress.last) * left)}` : "–");
    }
  }

  // "Queue gpu · depth 2 · waiting for a worker serving gpu" while no live worker can take the run.
  function showWaiting(waiting) {
    const el = $("st-waiting");
    if (!el) return;
    el.hidden = !waiting;
    el.textContent = waiting ? waiting.text : "";
  }

  const fmt = (v, digits) => (v === null || v === undefined ? "–" : Number(v).toFixed(digits));
  function addTableRow(m) {
    const body = document.querySelector("#rounds-table tbody");
    if (!body) return;
    // The columns come from the server (orchestrator/experiments/rounds.py TABLE_COLUMNS), as the rows it rendered.
    const one = (v, c) =>
      c.digits === null ? ([null, undefined, ""].includes(v) ? "–" : v) : fmt(v === null || v === undefined ? null : v / c.scale, c.digits);
    // A distributed round's per-rank values are lists: one value per rank, rank 0 first.
    const cells = page.table_columns.map((c) => (Array.isArray(m[c.field]) ? m[c.field].map((v) => one(v, c)).join(", ") : one(m[c.field], c)));
    const tr = document.createElement("tr");
    for (const c of cells) { const td = document.createElement("td"); td.className = "num"; td.textContent = c; tr.appendChild(td); }
    body.insertBefore(tr, body.firstChild);
  }

  function addLog(ev) {
    const log = $("log");
    if (!log) return;
    const div = document.createElement("div");
    div.className = ev.level;
    const time = document.createElement("time");
    time.textContent = new Date(ev.time).toTimeString().slice(0, 8);
    div.append(time, ev.message);
    const atBottom = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
    log.appendChild(div);
    if (atBottom) log.scrollTop = log.scrollHeight;
  }

  // -- live -----------------------------------------------------------------------------------------
  function onMessage(ev) {
    if (ev.type === "round") {
      if (addRound(ev.metrics)) { addTableRow(ev.metrics); updateSummary(ev.metrics); setText("st-device", ev.metrics.device); }
      if (window.FedWebCustomMetrics) FedWebCustomMetrics.add(ev.metrics); // external runs' own scalars
      showLeak(ev.leak_warnings);
      updateStatus();
    } else if (ev.type === "status") {
      updateStatus(ev);
      // Close only once the run has settled: a cancel is announced while its last round may still be
      // training, and that round's event comes after it.
      if (ev.final && socket) socket.close();
    } else if (ev.type === "log") {
      addLog(ev);
    }
  }

  updateStatus();
  const log = $("log");
  if (log) log.scrollTop = log.scrollHeight;
  let socket = null;
  if (page.ws_url && window.FedWebLive && !FINISHED.includes(page.status)) {
    const conn = $("conn");
    socket = FedWebLive.connect({
      url: page.ws_url, after: () => progress.last, onMessage,
      onState: (s) => {
        if (!conn) return;
        conn.textContent = { live: "live", down: "reconnecting…", closed: "finished", forbidden: "access lost" }[s] || s;
        conn.className = `conn ${s}`;
      },
    });
    setInterval(tick, 1000);
  }
  window.FedWebDashboard = { progress, onMessage, charts: drawn };
})();
