// Compare: the curves of several experiments overlaid, one colour per experiment.
(function () {
  "use strict";
  const el = document.getElementById("series-data");
  if (!el) return;
  const series = JSON.parse(el.textContent);
  const PALETTE = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#db2777", "#4b5563"];
  const CONFIG = { displaylogo: false, responsive: true };

  function pts(rounds, key, scale) {
    const kept = rounds.filter((r) => r[key] !== null && r[key] !== undefined);
    return { x: kept.map((r) => r.round), y: kept.map((r) => r[key] / (scale || 1)) };
  }
  function trace(s, i, key, opts) {
    const label = `${s.name} #${s.id}`;
    return Object.assign({ name: label, legendgroup: String(s.id), mode: "lines", line: { color: PALETTE[i % PALETTE.length], width: 2 } },
      pts(s.rounds, key), opts || {});
  }
  function layout(y, extra) {
    return Object.assign({ margin: { l: 56, r: 20, t: 34, b: 40 }, hovermode: "x unified", legend: { orientation: "h", x: 0, y: 1.02, yanchor: "bottom" },
      xaxis: { title: { text: "round" } }, yaxis: { title: { text: y }, rangemode: "tozero" } }, extra || {});
  }
  const dotted = (i) => ({ line: { color: PALETTE[i % PALETTE.length], dash: "dot", width: 1.5 }, showlegend: false });

  const loss = [], acc = [], mem = [], bw = [];
  series.forEach((s, i) => {
    loss.push(trace(s, i, "test_loss"), trace(s, i, "train_loss", dotted(i)));
    acc.push(trace(s, i, "test_accuracy"));
    mem.push(trace(s, i, "rss_mb"));
    if (s.rounds.some((r) => r.vram_peak_mb !== null)) mem.push(trace(s, i, "vram_peak_mb", dotted(i)));
    let total = 0;
    bw.push(Object.assign(trace(s, i, "bytes_up"), { y: s.rounds.map((r) => (total += (r.bytes_up + r.bytes_down) / 1e6)), x: s.rounds.map((r) => r.round) }));
  });
  Plotly.newPlot("cmp-loss", loss, layout("loss"), CONFIG);
  Plotly.newPlot("cmp-accuracy", acc, layout("accuracy", { yaxis: { title: { text: "accuracy" }, range: [0, 1] } }), CONFIG);
  Plotly.newPlot("cmp-memory", mem, layout("MB"), CONFIG);
  Plotly.newPlot("cmp-bandwidth", bw, layout("MB total"), CONFIG);
})();
