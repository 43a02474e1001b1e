// Compare: the figures orchestrator/web/charts.py built (one colour and dash per experiment), drawn with
// the shared chart controls of static/js/charts.js.
(function () {
  "use strict";
  const el = document.getElementById("charts-data");
  if (!el || !window.FedWebCharts) return;
  window.FedWebCompare = { charts: FedWebCharts.init(JSON.parse(el.textContent)) };
})();
