// The "custom metrics" section of an external run's dashboard (orchestrator/external/charts.py):
// draws each group's chart, and extends it as round events bring their ``custom`` scalars.
(function () {
  const script = document.getElementById("custom-charts-data");
  if (!script || !window.Plotly) return;
  const charts = JSON.parse(script.textContent);
  const traceOf = {}; // metric name -> [chart id, trace index]
  for (const panel of charts.panels) {
    const figure = charts.figures[panel.id];
    // The dashboard's chart settings (charts.js is loaded first): PNG and SVG downloads.
    Plotly.newPlot(panel.id, figure.data, figure.layout, (window.FedWebCharts && FedWebCharts.CONFIG) || { displaylogo: false, responsive: true });
    panel.names.forEach((name, i) => { traceOf[name] = [panel.id, i]; });
  }
  window.FedWebCustomMetrics = {
    add(metrics) {
      const custom = (metrics && metrics.custom) || {};
      for (const [name, value] of Object.entries(custom)) {
        const where = traceOf[name];
        if (where) Plotly.extendTraces(where[0], { x: [[metrics.round]], y: [[value]] }, [where[1]]);
      }
    },
  };
})();
