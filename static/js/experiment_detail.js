// The experiment dashboard: charts from the rounds rendered into the page, then live rounds over
// the WebSocket. The static HTML report inlines this same file; without a ws_url it only draws.
(function () {
  "use strict";
  const COLORS = {
    train: "#2563eb", test: "#dc2626", accuracy: "#16a34a",
    rss: "#0891b2", allocated: "#7c3aed", reserved: "#a78bfa", peak: "#db2777",
    up: "#ea580c", down: "#2563eb", formula: "#6b7280", cumulative: "#111827",
    time: "#0f766e", rate: "#9333ea",
  };
  const FINISHED = ["completed", "cancelled", "failed"];
  const MB = 1e6;

  // -- memory-leak heuristic: mirrors orchestrator/leak.py (keep the two in step) -----------------
  const LEAK = { warmup: 3, minPoints: 10, window: 30, minSlopeMb: 1.0, minGrowth: 0.05 };
  function leakCheck(values) {
    const ys = values.slice(LEAK.warmup).filter((v) => v !== null && v !== undefined).slice(-LEAK.window);
    if (ys.length < LEAK.minPoints) return { leak: false, slope: null, growth: null };
    const n = ys.length, meanX = (n - 1) / 2, meanY = ys.reduce((a, b) => a + b, 0) / n;
    let sxx = 0, sxy = 0;
    ys.forEach((y, i) => { sxx += (i - meanX) ** 2; sxy += (i - meanX) * (y - meanY); });
    const slope = sxy / sxx, start = meanY - slope * meanX;
    const growth = start > 0 ? (slope * (n - 1)) / start : 0;
    return { leak: slope > LEAK.minSlopeMb && growth > LEAK.minGrowth, slope, growth };
  }

  // -- state ----------------------------------------------------------------------------------------
  const page = JSON.parse(document.getElementById("page-data").textContent);
  const rounds = [];
  const seen = new Set();

  function addRound(m) {
    if (seen.has(m.round)) return false; // history and live events may overlap: one point per round
    seen.add(m.round);
    rounds.push(m);
    if (rounds.length > 1 && rounds[rounds.length - 2].round > m.round) rounds.sort((a, b) => a.round - b.round);
    return true;
  }
  const lastRound = () => (rounds.length ? rounds[rounds.length - 1].round : 0);

  // -- charts ---------------------------------------------------------------------------------------
  const col = (key, scale) => rounds.map((r) => (r[key] === null || r[key] === undefined ? null : r[key] / (scale || 1)));
  const xs = () => rounds.map((r) => r.round);
  function line(name, key, color, extra) {
    return Object.assign({ name, x: xs(), y: col(key), mode: "lines+markers", line: { color, width: 2 }, marker: { size: 5 } }, extra || {});
  }
  function present(key) { return rounds.some((r) => r[key] !== null && r[key] !== undefined); }
  function only(key, trace) {
    // Keep just the rounds that have the value (evaluation may skip rounds): one point per value.
    const keep = rounds.map((r) => r[key] !== null && r[key] !== undefined);
    trace.x = trace.x.filter((_, i) => keep[i]);
    trace.y = trace.y.filter((_, i) => keep[i]);
    return trace;
  }
  function cumulative(values) { let s = 0; return values.map((v) => (s += v || 0)); }

  function layout(yTitle, extra) {
    return Object.assign({
      margin: { l: 56, r: 56, t: 34, b: 40 }, hovermode: "x unified",
      legend: { orientation: "h", x: 0, y: 1.02, yanchor: "bottom" }, font: { size: 12 },
      xaxis: { title: { text: "round" }, rangemode: "tozero", gridcolor: "#eef0f3" },
      yaxis: { title: { text: yTitle }, gridcolor: "#eef0f3", rangemode: "tozero" },
      paper_bgcolor: "#fff", plot_bgcolor: "#fff",
    }, extra || {});
  }
  const CONFIG = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["lasso2d", "select2d"] };

  function charts() {
    const memory = [line("host RSS", "rss_mb", COLORS.rss)];
    if (present("vram_allocated_mb")) {
      memory.push(line("VRAM allocated", "vram_allocated_mb", COLORS.allocated));
      memory.push(line("VRAM reserved", "vram_reserved_mb", COLORS.reserved, { line: { color: COLORS.reserved, dash: "dot" } }));
      memory.push(line("VRAM peak", "vram_peak_mb", COLORS.peak));
    }
    const up = col("bytes_up", MB), down = col("bytes_down", MB), formula = col("bytes_formula", MB);
    const measured = rounds.map((r, i) => (up[i] || 0) + (down[i] || 0));
    const rate = rounds.map((r) => (r.round_seconds > 0 ? r.completed / r.round_seconds : null));
    return {
      "chart-loss": [[only("train_loss", line("train loss", "train_loss", COLORS.train)),
        only("test_loss", line("test loss", "test_loss", COLORS.test))], layout("loss")],
      "chart-accuracy": [[only("test_accuracy", line("test accuracy", "test_accuracy", COLORS.accuracy))],
        layout("accuracy", { yaxis: { title: { text: "accuracy" }, range: [0, 1], gridcolor: "#eef0f3" } })],
      "chart-memory": [memory, layout("MB")],
      "chart-bandwidth": [[
        { type: "bar", name: "up", x: xs(), y: up, marker: { color: COLORS.up } },
        { type: "bar", name: "down", x: xs(), y: down, marker: { color: COLORS.down } },
        { name: "fp32 formula", x: xs(), y: formula, mode: "lines", line: { color: COLORS.formula, dash: "dash" } },
        { name: "Σ measured", x: xs(), y: cumulative(measured), yaxis: "y2", mode: "lines", line: { color: COLORS.cumulative } },
        { name: "Σ formula", x: xs(), y: cumulative(formula), yaxis: "y2", mode: "lines", line: { color: COLORS.formula, dash: "dot" } },
      ], layout("MB per round (bars, dashed)", { barmode: "group", yaxis2: { title: { text: "MB since round 1 (Σ)" }, overlaying: "y", side: "right", rangemode: "tozero", showgrid: false } })],
      "chart-time": [[
        line("round seconds", "round_seconds", COLORS.time),
        { name: "clients / s", x: xs(), y: rate, yaxis: "y2", mode: "lines+markers", line: { color: COLORS.rate }, marker: { size: 5 } },
      ], layout("seconds", { yaxis2: { title: { text: "clients / s" }, overlaying: "y", side: "right", rangemode: "tozero", showgrid: false } })],
    };
  }

  let pending = false;
  function draw() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      for (const [id, [traces, lay]] of Object.entries(charts())) {
        const div = document.getElementById(id);
        if (div && window.Plotly) Plotly.react(div, traces, lay, CONFIG);
      }
      updateLeakBadge();
    });
  }

  function updateLeakBadge() {
    const badge = document.getElementById("leak-badge");
    if (!badge) return;
    const warnings = [["host RSS", "rss_mb"], ["VRAM peak", "vram_peak_mb"]]
      .map(([label, key]) => [label, leakCheck(col(key))])
      .filter(([, c]) => c.leak)
      .map(([label, c]) => `${label} grows ${c.slope.toFixed(1)} MB per round (${Math.round(c.growth * 100)}%)`);
    badge.hidden = warnings.length === 0;
    if (warnings.length) badge.title = warnings.join(" · ");
  }

  // -- status line, table, log ----------------------------------------------------------------------
  const $ = (id) => document.getElementById(id);
  function setText(id, text) { const el = $(id); if (el) el.textContent = text; }

  function duration(seconds) {
    if (seconds === null || !isFinite(seconds)) return "–";
    seconds = Math.max(0, Math.round(seconds));
    const h = Math.floor(seconds / 3600), m = Math.floor((seconds % 3600) / 60), s = seconds % 60;
    return h ? `${h}h ${m}m` : m ? `${m}m ${s}s` : `${s}s`;
  }

  function updateStatus(ev) {
    if (ev) {
      page.status = ev.status;
      page.current_round = ev.current_round;
      if (FINISHED.includes(ev.status) && !page.finished) page.finished = new Date().toISOString();
      if (ev.error) { const el = $("error"); if (el) { el.textContent = ev.error; el.hidden = false; } }
    }
    const badge = $("status-badge");
    if (badge) { badge.textContent = page.status; badge.className = `badge ${page.status}`; }
    setText("st-round", Math.max(page.current_round || 0, lastRound()));
    document.querySelectorAll("form[data-when]").forEach((f) => {
      f.hidden = !f.dataset.when.split(" ").includes(page.status);
    });
    tick();
  }

  function tick() {
    if (page.started) {
      const end = page.finished ? new Date(page.finished) : new Date();
      setText("st-elapsed", duration((end - new Date(page.started)) / 1000));
    }
    const active = ["queued", "running"].includes(page.status);
    if (active && rounds.length) {
      const mean = rounds.reduce((a, r) => a + r.round_seconds, 0) / rounds.length;
      setText("st-eta", duration(mean * (page.total_rounds - lastRound())));
    } else {
      setText("st-eta", page.status === "completed" ? "done" : "–");
    }
  }

  // Status events carry no worker or start time: read them once per status change.
  async function refreshDetails() {
    if (!page.statuses_url) return;
    try {
      const res = await fetch(page.statuses_url, { headers: { Accept: "application/json" } });
      if (!res.ok) return;
      const row = (await res.json()).experiments[String(page.id)];
      if (!row) return;
      showWaiting(row.waiting);
      if (row.worker) setText("st-worker", row.worker);
      if (row.started) page.started = row.started;
      if (row.finished) page.finished = row.finished;
      tick();
    } catch (err) { /* the next status change tries again */ }
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
    // The columns come from the server (orchestrator/rounds.py TABLE_COLUMNS), as the rows it rendered.
    const cells = page.table_columns.map((c) =>
      c.digits === null ? (m[c.field] ?? "–") : fmt(m[c.field] === null ? null : m[c.field] / c.scale, c.digits));
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
      if (addRound(ev.metrics)) { addTableRow(ev.metrics); setText("st-device", ev.metrics.device); draw(); }
      updateStatus();
    } else if (ev.type === "status") {
      updateStatus(ev);
      refreshDetails();
      // Close only once the run has settled: a cancel is announced while its last round may still be
      // training, and that round's event comes after it.
      if (ev.final && socket) socket.close();
    } else if (ev.type === "log") {
      addLog(ev);
    }
  }

  JSON.parse(document.getElementById("rounds-data").textContent).forEach(addRound);
  draw();
  updateStatus();
  const log = $("log");
  if (log) log.scrollTop = log.scrollHeight;
  let socket = null;
  if (page.ws_url && window.FedWebLive && !FINISHED.includes(page.status)) {
    const conn = $("conn");
    socket = FedWebLive.connect({
      url: page.ws_url, after: lastRound, onMessage,
      onState: (s) => {
        if (!conn) return;
        conn.textContent = { live: "live", down: "reconnecting…", closed: "finished", forbidden: "access lost" }[s] || s;
        conn.className = `conn ${s}`;
      },
    });
    setInterval(tick, 1000);
  }
  window.FedWebDashboard = { leakCheck, rounds, onMessage };
})();
