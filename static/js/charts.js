// The chart controls shared by the dashboard, the compare page and the offline report. The figures
// come from orchestrator/charts.py; this file keeps each figure as the server sent it (x in rounds,
// raw y) and redraws it through the reader's choices: x-axis (round, wall-clock seconds, MB
// communicated), EMA smoothing with the raw points faint behind, linear or log y, zoom linked across
// the charts, bars turned into lines when they would be too thin, and CSV/PNG downloads.
(function () {
  "use strict";
  const CONFIG = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["lasso2d", "select2d"] };
  const X_TITLES = { round: "round", seconds: "wall-clock seconds (Σ round time)", mb: "MB communicated (up + down)" };
  const MIN_BAR_PX = 2; // narrower bars are unreadable: the trace is drawn as a line instead
  const $ = (id) => document.getElementById(id);

  function init(chartsData) {
    const base = {}; // chart id -> {data, layout} as the server built it, extended by live rounds
    const axes = {}; // run -> Map(round -> {seconds, mb}); totals: run -> {seconds, mb}
    const totals = {};
    const view = { x: "round", smoothing: 0, log: false };
    let linking = false;

    for (const [run, a] of Object.entries(chartsData.x_axes || {})) {
      const map = new Map();
      a.round.forEach((r, i) => map.set(r, { seconds: a.seconds[i], mb: a.mb[i] }));
      axes[run] = map;
      const n = a.round.length;
      totals[run] = { seconds: n ? a.seconds[n - 1] : 0, mb: n ? a.mb[n - 1] : 0 };
    }

    // x of a trace's point at round r on the chosen axis (null when the round is unknown).
    function xOf(run, r) {
      if (view.x === "round") return r;
      const p = (axes[run] || new Map()).get(r);
      return p ? p[view.x] : null;
    }

    // TensorBoard's debiased exponential moving average.
    function ema(ys, w) {
      let last = 0;
      return ys.map((y, i) => { last = last * w + (1 - w) * y; return last / (1 - Math.pow(w, i + 1)); });
    }

    function displayed(div, id) {
      const fig = base[id];
      const width = Math.max(100, (div.clientWidth || 600) - 80);
      const ghosts = [], traces = [];
      let maxRound = 0, points = 0;
      for (const t of fig.data) {
        const run = t.meta.run || "";
        const keep = t.x.map((r) => xOf(run, r) !== null);
        const x = t.x.filter((_, i) => keep[i]).map((r) => xOf(run, r));
        const raw = t.y.filter((_, i) => keep[i]);
        points += x.length;
        if (t.x.length) maxRound = Math.max(maxRound, t.x[t.x.length - 1]);
        let out = { ...t, x, y: raw };
        if (t.type === "bar" && x.length * MIN_BAR_PX > width) {
          out = { ...out, type: "scatter", mode: "lines", line: { color: t.marker.color, width: 1.5 } };
          if (fig.layout.barmode === "stack") out.stackgroup = "bars"; // stacked areas keep the bars' sum
          delete out.marker;
        }
        const smooth = view.smoothing > 0 && out.type === "scatter" && !t.meta.cumulative && raw.length > 1;
        if (smooth) {
          out.y = ema(raw, view.smoothing);
          ghosts.push({ ...t, x, y: raw, name: `${t.name} (raw)`, showlegend: false, hoverinfo: "skip", opacity: 0.2,
                        mode: "lines", meta: { ...t.meta, raw: true } });
        }
        traces.push(out);
      }
      const layout = JSON.parse(JSON.stringify(fig.layout));
      layout.uirevision = `${fig.layout.uirevision}:${view.x}:${view.log}`;
      layout.xaxis.title = { text: X_TITLES[view.x] };
      layout.xaxis.tickformat = view.x === "round" ? "d" : "";
      if (view.x === "round" && maxRound <= 10) Object.assign(layout.xaxis, { tick0: 0, dtick: 1 });
      if (view.log) {
        for (const ax of ["yaxis", "yaxis2"]) {
          if (!layout[ax]) continue;
          delete layout[ax].range;
          Object.assign(layout[ax], { type: "log", autorange: true });
        }
      }
      if (points) layout.annotations = [];
      // The raw points go first: drawn behind their smoothed lines.
      return { data: ghosts.concat(traces), layout };
    }

    function render(id) {
      const div = $(id);
      if (!div || !window.Plotly || !base[id]) return;
      const fig = displayed(div, id);
      Plotly.react(div, fig.data, fig.layout, CONFIG);
    }
    function renderAll() { for (const id of Object.keys(base)) render(id); }

    // Zoom on one chart's x-axis and the others follow (they share the x quantity).
    function link(id) {
      $(id).on("plotly_relayout", (ev) => {
        if (linking) return;
        let update = null;
        if (ev["xaxis.autorange"]) update = { "xaxis.autorange": true };
        else if (ev["xaxis.range[0]"] !== undefined) update = { "xaxis.range": [ev["xaxis.range[0]"], ev["xaxis.range[1]"]] };
        else if (ev["xaxis.range"]) update = { "xaxis.range": ev["xaxis.range"] };
        if (!update) return;
        linking = true;
        Promise.all(Object.keys(base).filter((o) => o !== id && $(o)).map((o) => Plotly.relayout($(o), update)))
          .finally(() => { linking = false; });
      });
    }

    for (const [id, fig] of Object.entries(chartsData.figures)) {
      base[id] = { data: fig.data.map((t) => ({ ...t, x: [...t.x], y: [...t.y] })), layout: fig.layout };
      if (!$(id) || !window.Plotly) continue;
      render(id);
      link(id);
    }

    // A trace's y for a round, by the recipe in its meta (orchestrator.charts.Series.value).
    function value(meta, m) {
      const vs = meta.keys.map((k) => m[k]);
      if (vs.some((v) => v === null || v === undefined)) return null;
      let total = vs.reduce((a, b) => a + b, 0);
      if (meta.per) {
        if (!(m[meta.per] > 0)) return null;
        total /= m[meta.per];
      }
      return total * meta.scale;
    }

    // Live rounds of the run `run`: new points for every trace, then one redraw per chart.
    function append(batch, run = "") {
      const map = axes[run] || (axes[run] = new Map());
      const total = totals[run] || (totals[run] = { seconds: 0, mb: 0 });
      for (const m of batch) {
        total.seconds += m.round_seconds || 0;
        total.mb += ((m.bytes_up || 0) + (m.bytes_down || 0)) / 1e6;
        map.set(m.round, { seconds: total.seconds, mb: total.mb });
      }
      for (const fig of Object.values(base)) {
        for (const t of fig.data) {
          if ((t.meta.run || "") !== run) continue;
          let last = t.y.length ? t.y[t.y.length - 1] : 0;
          for (const m of batch) {
            const v = value(t.meta, m);
            if (v === null) continue;
            last = t.meta.cumulative ? last + v : v;
            t.x.push(m.round);
            t.y.push(last);
            t.visible = true;
          }
        }
      }
      renderAll();
    }

    function download(id, format) {
      const div = $(id);
      if (!div || !div.data) return;
      const name = `${id}-${view.x}`;
      if (format === "png") { Plotly.downloadImage(div, { format: "png", filename: name, width: 1000, height: 500 }); return; }
      // The points as drawn on the chosen axis, one line per point; smoothed traces carry their raw y too.
      const lines = [["trace", "round", X_TITLES[view.x], "y", "y smoothed"].join(",")];
      for (const t of base[id].data) {
        const run = t.meta.run || "";
        const smooth = view.smoothing > 0 && t.type === "scatter" && !t.meta.cumulative ? ema(t.y, view.smoothing) : null;
        t.x.forEach((r, i) => {
          const cells = [JSON.stringify(t.name), r, xOf(run, r) ?? "", t.y[i], smooth ? smooth[i] : ""];
          lines.push(cells.join(","));
        });
      }
      const a = document.createElement("a");
      a.href = URL.createObjectURL(new Blob([lines.join("\n") + "\n"], { type: "text/csv" }));
      a.download = `${name}.csv`;
      document.body.appendChild(a);
      a.click();
      a.remove();
    }

    function bindControls() {
      const x = $("x-axis"), smoothing = $("smoothing"), log = $("log-y"), out = $("smoothing-value");
      if (x) x.addEventListener("change", () => { view.x = x.value; renderAll(); });
      if (smoothing) smoothing.addEventListener("input", () => {
        view.smoothing = Number(smoothing.value);
        if (out) out.textContent = view.smoothing.toFixed(2);
        renderAll();
      });
      if (log) log.addEventListener("change", () => { view.log = log.checked; renderAll(); });
      document.querySelectorAll("button.chart-dl").forEach((b) => b.addEventListener("click", () => download(b.dataset.chart, b.dataset.format)));
    }
    bindControls();
    return { append, render: renderAll, view, download };
  }

  window.FedWebCharts = { init };
})();
