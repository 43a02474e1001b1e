// The chart controls shared by the dashboard, the compare page and the offline report. The figures
// come from orchestrator/web/charts.py; this file keeps each figure as the server sent it (x in rounds,
// raw y) and redraws it through the reader's choices: x-axis (round, wall-clock seconds, MB
// communicated), EMA smoothing with the raw points faint behind, linear or log y, zoom linked across
// the charts, bars turned into lines when they would be too thin, CSV/PNG/SVG downloads, and on the
// compare page one legend for every chart. A figure marked `own_x` (the participation histogram,
// whose x is "times sampled"; the grouped mean ± std bands) keeps its own x axis: it stays out of
// the x-axis choice and the linked zoom.
(function () {
  "use strict";
  // Every chart downloads as PNG (plotly's camera) and as SVG (a vector picture for papers).
  const SVG_BUTTON = {
    name: "download-svg", title: "Download plot as SVG", icon: window.Plotly ? Plotly.Icons.disk : undefined,
    click: (gd) => Plotly.downloadImage(gd, { format: "svg", filename: gd.id || "chart", width: 1000, height: 500 }),
  };
  const CONFIG = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["lasso2d", "select2d"], modeBarButtonsToAdd: [SVG_BUTTON] };
  const X_TITLES = { round: "round", seconds: "wall-clock seconds (Σ round time)", mb: "MB communicated (up + down)" };
  const MIN_BAR_PX = 2; // narrower bars are unreadable: the trace is drawn as a line instead
  const MIN_TICK_PX = 18; // log-axis tick labels closer than this overlap (12 px font)
  const $ = (id) => document.getElementById(id);

  // A round's number by a formula the server sends as data (fedweb_engine/results/round_fields.py
  // Formula: the sum of `keys`, null if one is missing, less the sum of `minus` (a missing one is 0),
  // null for a 0 when `nonzero`, divided by `per` (null unless > 0), times `scale`); the one
  // evaluator of those formulas in the pages. `cumulative` is the caller's.
  function value(formula, m) {
    const vs = formula.keys.map((k) => m[k]);
    if (vs.some((v) => v === null || v === undefined)) return null;
    let total = vs.reduce((a, b) => a + b, 0) - (formula.minus || []).reduce((a, k) => a + (m[k] || 0), 0);
    if (formula.nonzero && total === 0) return null;
    if (formula.per) {
      if (!(m[formula.per] > 0)) return null;
      total /= m[formula.per];
    }
    return total * (formula.scale ?? 1);
  }

  function init(chartsData) {
    const base = {}; // chart id -> {data, layout} as the server built it, extended by live rounds
    const axes = {}; // run -> Map(round -> {seconds, mb}); totals: run -> {seconds, mb}
    const totals = {};
    const view = { x: "round", smoothing: 0, log: false, hidden: new Set() };
    let linking = false;

    // The other x axes: per run, each round's x on them, as the server computed them by the
    // formulas it sends along (x_formulas), which extend them as rounds arrive.
    const xFormulas = chartsData.x_formulas || {};
    for (const [run, a] of Object.entries(chartsData.x_axes || {})) {
      const map = new Map();
      const names = Object.keys(a).filter((k) => k !== "round");
      a.round.forEach((r, i) => map.set(r, Object.fromEntries(names.map((k) => [k, a[k][i]]))));
      axes[run] = map;
      const n = a.round.length;
      totals[run] = Object.fromEntries(names.map((k) => [k, n ? a[k][n - 1] : 0]));
    }

    // x of a trace's point at round r on the chosen axis (null when the round is unknown).
    function xOf(run, r) {
      if (view.x === "round") return r;
      const p = (axes[run] || new Map()).get(r);
      return p ? p[view.x] : null;
    }

    // TensorBoard's debiased exponential moving average, taken of the distances from the first
    // point: a constant series then stays exactly constant (the plain form turned 10 into
    // 9.999999999999998, which a log axis cannot tick), and each smoothed point, a weighted mean of
    // the raw ones, is kept inside their range against rounding.
    function ema(ys, w) {
      if (!ys.length) return [];
      const y0 = ys[0];
      let last = 0, lo = Infinity, hi = -Infinity;
      return ys.map((y, i) => {
        lo = Math.min(lo, y); hi = Math.max(hi, y);
        last = last * w + (1 - w) * (y - y0);
        return Math.min(hi, Math.max(lo, y0 + last / (1 - Math.pow(w, i + 1))));
      });
    }

    // A log axis over the positive y of `traces` drawn on it: at least one decade (a constant series
    // otherwise gets a range too narrow for any tick), with ticks that fit the plot's `height` px:
    // 1-2-5 within each decade when a decade is tall enough, else every n-th decade; each labelled
    // as a full number (plotly's own minor labels are bare digits that overlap on a short axis).
    function logAxis(axis, traces, stacked, height) {
      let lo = Infinity, hi = -Infinity, stack = 0;
      for (const t of traces) {
        if (t.visible === false) continue;
        const ys = t.y.filter((y) => y > 0);
        if (!ys.length) continue;
        lo = Math.min(lo, ...ys); hi = Math.max(hi, ...ys);
        if (stacked && t.type === "bar") stack += Math.max(...ys);
      }
      hi = Math.max(hi, stack);
      delete axis.range; delete axis.rangemode;
      Object.assign(axis, { type: "log", autorange: true, tickformat: "~g" });
      if (!(lo < Infinity)) return;
      let a = Math.log10(lo), b = Math.log10(hi);
      if (b - a < 1) { const mid = (a + b) / 2; a = mid - 0.5; b = mid + 0.5; }
      else { const pad = (b - a) * 0.05; a -= pad; b += pad; }
      const perDecade = height / (b - a); // 1-2-5 puts labels 0.3 decade apart at the closest
      const dtick = perDecade * 0.3 >= MIN_TICK_PX ? "D2" : Math.ceil(MIN_TICK_PX / perDecade);
      Object.assign(axis, { autorange: false, range: [a, b], tickmode: "linear", dtick, tick0: 0 });
    }

    function displayed(div, id) {
      const fig = base[id];
      if (fig.own_x) return ownX(div, fig);
      const width = Math.max(100, (div.clientWidth || 600) - 80);
      const ghosts = [], traces = [];
      let maxRound = 0, points = 0;
      for (const t0 of fig.data) {
        const t = shown(t0);
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
      const data = ghosts.concat(traces); // the raw points go first: drawn behind their smoothed lines
      if (view.log) logAxes(layout, data, div);
      if (points) layout.annotations = [];
      return { data, layout };
    }

    function logAxes(layout, data, div) {
      const m = layout.margin || {};
      const height = Math.max(60, (div.clientHeight || 300) - (m.t || 0) - (m.b || 0));
      for (const [ax, ref] of [["yaxis", "y"], ["yaxis2", "y2"]]) {
        const traces = data.filter((t) => (t.yaxis || "y") === ref);
        if (layout[ax]) logAxis(layout[ax], traces, layout.barmode === "stack", height);
      }
    }

    // A trace as the shared legend leaves it: hidden when the reader turned its run off.
    function shown(t) {
      return t.meta && view.hidden.has(t.meta.legend) ? { ...t, visible: false } : t;
    }

    // A figure with its own x axis: drawn as sent, but for the legend and log y.
    function ownX(div, fig) {
      const data = fig.data.map(shown);
      const layout = JSON.parse(JSON.stringify(fig.layout));
      layout.uirevision = `${fig.layout.uirevision}:${view.log}`;
      if (view.log) logAxes(layout, data, div);
      return { data, layout };
    }

    function render(id) {
      const div = $(id);
      if (!div || !window.Plotly || !base[id]) return;
      const fig = displayed(div, id);
      Plotly.react(div, fig.data, fig.layout, CONFIG);
    }
    function renderAll() { for (const id of Object.keys(base)) render(id); }

    // Zoom on one chart's x-axis and the others follow (they share the x quantity); a chart with
    // its own x neither leads nor follows.
    const linked = () => Object.keys(base).filter((o) => !base[o].own_x && $(o));
    function link(id) {
      if (base[id].own_x) return;
      $(id).on("plotly_relayout", (ev) => {
        if (linking) return;
        let update = null;
        if (ev["xaxis.autorange"]) update = { "xaxis.autorange": true };
        else if (ev["xaxis.range[0]"] !== undefined) update = { "xaxis.range": [ev["xaxis.range[0]"], ev["xaxis.range[1]"]] };
        else if (ev["xaxis.range"]) update = { "xaxis.range": ev["xaxis.range"] };
        if (!update) return;
        linking = true;
        Promise.all(linked().filter((o) => o !== id).map((o) => Plotly.relayout($(o), update)))
          .finally(() => { linking = false; });
      });
    }

    for (const [id, fig] of Object.entries(chartsData.figures)) {
      base[id] = { data: fig.data.map((t) => ({ ...t, x: [...t.x], y: [...t.y] })), layout: fig.layout, own_x: !!fig.own_x };
      if (!$(id) || !window.Plotly) continue;
      render(id);
      link(id);
    }

    // Live rounds of the run `run`: new points for every trace, then one redraw per chart.
    function append(batch, run = "") {
      const map = axes[run] || (axes[run] = new Map());
      const total = totals[run] || (totals[run] = {});
      for (const m of batch) {
        const point = {};
        for (const [name, f] of Object.entries(xFormulas)) {
          const v = value(f, m);
          if (v !== null) total[name] = f.cumulative ? (total[name] || 0) + v : v;
          point[name] = v === null ? null : total[name]; // a round without a value has no x there
        }
        map.set(m.round, point);
      }
      for (const fig of Object.values(base)) {
        if (fig.own_x) continue; // snapshots (the histogram, the grouped bands): live rounds leave them alone
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
      reveal();
    }

    // A chart the run had reported nothing for is hidden (orchestrator/web/charts.py): it shows with
    // its first point, and the note naming the charts still empty follows.
    function reveal() {
      for (const [id, fig] of Object.entries(base)) {
        const panel = $(id) && $(id).closest(".chart-panel");
        if (!panel || !panel.hidden || !fig.data.some((t) => t.x.length)) continue;
        panel.hidden = false;
        if (window.Plotly) Plotly.Plots.resize($(id));
      }
      const note = $("charts-unreported");
      if (!note) return;
      const empty = [...document.querySelectorAll(".chart-panel[hidden]")].map((p) => p.dataset.title);
      note.hidden = !empty.length;
      note.querySelector("span").textContent = empty.join(", ");
    }

    function download(id, format) {
      const div = $(id);
      if (!div || !div.data) return;
      const own = base[id].own_x;
      const name = own ? id : `${id}-${view.x}`;
      if (format === "png" || format === "svg") { Plotly.downloadImage(div, { format, filename: name, width: 1000, height: 500 }); return; }
      // The points as drawn on the chosen axis, one line per point; smoothed traces carry their raw y too.
      const lines = [["trace", own ? "x" : "round", own ? "x" : X_TITLES[view.x], "y", "y smoothed"].join(",")];
      for (const t of base[id].data) {
        const run = t.meta.run || "";
        const smooth = !own && view.smoothing > 0 && t.type === "scatter" && !t.meta.cumulative ? ema(t.y, view.smoothing) : null;
        t.x.forEach((r, i) => {
          const cells = [JSON.stringify(t.name || t.meta.role || ""), r, own ? r : xOf(run, r) ?? "", t.y[i], smooth ? smooth[i] : ""];
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
      // The compare page's one legend: a click hides (or shows again) a run in every chart.
      document.querySelectorAll("#chart-legend .legend-item").forEach((b) => b.addEventListener("click", () => {
        const key = b.dataset.key;
        if (view.hidden.has(key)) view.hidden.delete(key); else view.hidden.add(key);
        b.setAttribute("aria-pressed", String(!view.hidden.has(key)));
        renderAll();
      }));
      document.querySelectorAll("button.chart-dl").forEach((b) => b.addEventListener("click", () => download(b.dataset.chart, b.dataset.format)));
    }
    bindControls();
    return { append, render: renderAll, view, download };
  }

  window.FedWebCharts = { init, value, CONFIG };
})();
