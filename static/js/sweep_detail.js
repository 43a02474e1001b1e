// Sweep page: draws the figures orchestrator/web/charts.py built, sorts the configurations table by the
// clicked heading, and follows the runs live: the sweep's socket (orchestrator/live/sweeps.py) says
// when a run changed, and the page fetches the progress, the rows and the figures again from the
// access-checked live.json (at most one request in flight; changes meanwhile make one more).
(function () {
  "use strict";
  // Each chart downloads as PNG (plotly's camera) and as SVG.
  const SVG_BUTTON = {
    name: "download-svg", title: "Download plot as SVG", icon: window.Plotly ? Plotly.Icons.disk : undefined,
    click: (gd) => Plotly.downloadImage(gd, { format: "svg", filename: gd.id || "chart", width: 1000, height: 500 }),
  };
  const CONFIG = { displaylogo: false, responsive: true, modeBarButtonsToAdd: [SVG_BUTTON] };
  const $ = (id) => document.getElementById(id);
  const table = $("sweep-table");
  const live = JSON.parse($("sweep-live").textContent);
  const conn = $("sweep-conn");
  let sorted = null; // [heading index, descending] the reader chose: kept across refreshes

  function draw(figures, pending) {
    if (!window.Plotly) return;
    for (const [id, fig] of Object.entries(figures)) {
      const div = $(id);
      if (!div) continue;
      div.hidden = false;
      Plotly.react(div, fig.data, fig.layout, CONFIG);
    }
    const waiting = $("sweep-parallel-pending");
    if (waiting) {
      waiting.hidden = !pending;
      waiting.textContent = pending || "";
      if (!figures["sweep-parallel"] && $("sweep-parallel")) $("sweep-parallel").hidden = true;
    }
  }
  draw(JSON.parse($("sweep-figures").textContent), null);

  if (table) {
    table.querySelectorAll("th").forEach((th, index) => {
      th.style.cursor = "pointer";
      th.addEventListener("click", () => {
        const descending = th.dataset.order !== "desc";
        sorted = [index, descending];
        sortBy(index, descending);
      });
    });
  }

  function sortBy(index, descending) {
    const ths = table.querySelectorAll("th");
    ths.forEach((h) => delete h.dataset.order);
    ths[index].dataset.order = descending ? "desc" : "asc";
    const numeric = ths[index].dataset.type === "num";
    const key = (row) => row.children[index].dataset.value;
    const rows = Array.from(table.tBodies[0].rows);
    rows.sort((a, b) => {
      const [x, y] = [key(a), key(b)];
      if (numeric) {
        // Runs with no value yet go last whichever way the column is sorted.
        if (x === "" || y === "") return (x === "") - (y === "");
        return descending ? y - x : x - y;
      }
      return descending ? y.localeCompare(x) : x.localeCompare(y);
    });
    rows.forEach((row) => table.tBodies[0].appendChild(row));
  }

  let busy = false, again = false, socket = null;
  async function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    try {
      const response = await fetch(live.refresh, { credentials: "same-origin" });
      if (response.ok) {
        const body = await response.json();
        $("sweep-progress").innerHTML = body.progress;
        table.tBodies[0].innerHTML = body.rows;
        if ($("sweep-search")) $("sweep-search").innerHTML = body.search;
        if (sorted) sortBy(...sorted);
        draw(body.figures, body.parallel_pending);
        if (!body.active) $("cancel-sweep")?.closest("form")?.remove();
        document.body.dataset.sweepRefreshed = String(Number(document.body.dataset.sweepRefreshed || 0) + 1);
      }
    } catch (e) { /* offline for a moment: the next event or reconnection fetches again */ }
    busy = false;
    if (again) { again = false; refresh(); }
  }

  if (window.FedWebLive) {
    socket = FedWebLive.connect({
      url: live.socket,
      onMessage: (m) => { if (m.type === "sweep_changed") refresh(); },
      onState: (s) => { if (conn) { conn.textContent = s; conn.dataset.state = s; } },
    });
  }
  window.FedWebSweep = { refresh, socket };
})();
