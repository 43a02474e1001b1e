// Sweep page: draws the figures orchestrator/charts.py built, sorts the configurations table by the
// clicked heading, and reloads while runs are going (asking the access-checked statuses endpoint).
(function () {
  "use strict";
  const CONFIG = { displaylogo: false, responsive: true };
  const figures = document.getElementById("sweep-figures");
  if (figures && window.Plotly) {
    for (const [id, fig] of Object.entries(JSON.parse(figures.textContent))) {
      const div = document.getElementById(id);
      if (div) Plotly.newPlot(div, fig.data, fig.layout, CONFIG);
    }
  }

  const table = document.getElementById("sweep-table");
  if (table) {
    table.querySelectorAll("th").forEach((th, index) => {
      th.style.cursor = "pointer";
      th.addEventListener("click", () => sortBy(th, index));
    });
  }

  function sortBy(th, index) {
    const descending = th.dataset.order !== "desc";
    table.querySelectorAll("th").forEach((h) => delete h.dataset.order);
    th.dataset.order = descending ? "desc" : "asc";
    const numeric = th.dataset.type === "num";
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

  const ids = JSON.parse(document.getElementById("sweep-ids").textContent);
  const active = JSON.parse(document.getElementById("sweep-active").textContent);
  if (!active || !ids) return;
  let last = null;
  async function poll() {
    try {
      const response = await fetch(`/experiments/statuses.json?ids=${ids}`, { credentials: "same-origin" });
      if (response.ok) {
        const body = await response.json();
        const now = JSON.stringify(Object.entries(body.experiments).map(([id, e]) => [id, e.status, e.current_round]));
        if (last !== null && now !== last) return window.location.reload();
        last = now;
      }
    } catch (e) { /* offline for a moment: try again */ }
    setTimeout(poll, 3000);
  }
  poll();
})();
