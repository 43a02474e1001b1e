// Compare: draws the figures orchestrator/charts.py built, one colour per experiment.
(function () {
  "use strict";
  const el = document.getElementById("charts-data");
  if (!el || !window.Plotly) return;
  const CONFIG = { displaylogo: false, responsive: true };
  for (const [id, fig] of Object.entries(JSON.parse(el.textContent).figures)) {
    const div = document.getElementById(id);
    if (div) Plotly.newPlot(div, fig.data, fig.layout, CONFIG);
  }
})();
