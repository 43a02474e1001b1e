// New-experiment form: fields shown only when they apply, the "Advanced" fold, and the side panel's
// boxes (resources, bandwidth, privacy, partition) following the form values, each on its own.
(function () {
  "use strict";
  // The partition preview downloads as PNG (plotly's camera) and as SVG, as every chart does.
  const PLOT_CONFIG = { displaylogo: false, responsive: true, modeBarButtonsToAdd: [{
    name: "download-svg", title: "Download plot as SVG", icon: window.Plotly ? Plotly.Icons.disk : undefined,
    click: (gd) => Plotly.downloadImage(gd, { format: "svg", filename: gd.id || "chart", width: 1000, height: 500 }),
  }] };
  const form = document.getElementById("experiment-form");
  const $ = (id) => document.getElementById(id);

  // Fields shown only when they apply, and the "Advanced" fold: static/js/applies.js.
  FedWebApplies.bind(form);
  $("applies-note").hidden = false;

  function bytes(n) {
    const units = ["B", "kB", "MB", "GB", "TB"];
    let i = 0;
    while (n >= 1000 && i < units.length - 1) { n /= 1000; i++; }
    return `${n.toFixed(n >= 100 || i === 0 ? 0 : 1)} ${units[i]}`;
  }
  function query() {
    const data = new FormData(form);
    data.delete("csrfmiddlewaretoken");
    return new URLSearchParams(data).toString();
  }
  function errorText(body) {
    const errors = (body && body.errors) || {};
    return Object.values(errors).flat().join("; ") || "Could not compute the preview.";
  }

  // Each box asks its own endpoint (orchestrator/web/views/previews.py), which computes it from the
  // fields it reads: a box shows its own figures, or why it has none, never another box's error.
  // A newer request for the same box makes an older answer moot.
  const seqs = {};
  async function ask(box, url) {
    const seq = (seqs[box] = (seqs[box] || 0) + 1);
    const res = await fetch(`${url}?${query()}`);
    const body = await res.json().catch(() => null);
    if (seq !== seqs[box]) return null;
    return { ok: res.ok && body !== null, body };
  }
  // The box's error line says why it has no figures; its figures are blanked, not left stale.
  function showWhy(box, values, answer) {
    const err = $(`${box}-error`);
    err.hidden = answer.ok;
    if (!answer.ok) {
      err.textContent = errorText(answer.body);
      values.forEach((id) => { $(id).textContent = "–"; });
    }
    return answer.ok;
  }

  const BW = ["bw-model", "bw-clients", "bw-down-client", "bw-up-client", "bw-down", "bw-up", "bw-total", "bw-formula"];
  async function bandwidth() {
    const answer = await ask("bandwidth", form.dataset.bandwidthUrl);
    if (!answer) return;
    const note = $("bandwidth-unknown");
    note.hidden = true;
    if (!showWhy("bandwidth", BW, answer)) return;
    const body = answer.body;
    $("bw-model").textContent = `${body.params.toLocaleString()} params (${bytes(4 * body.params)} fp32)`;
    // The model and the update with their links' codecs; a client algorithm's extras (SCAFFOLD's
    // control variates) beside them, always fp32: the split shows which codec saves what.
    const split = (model, codec, extra) => `${bytes(model)} (${codec})` +
      (extra ? ` + ${bytes(extra)} ${body.client_algorithm} (fp32) = ${bytes(model + extra)}` : "");
    $("bw-down-client").textContent = split(body.model_down_per_client, body.downlink, body.extra_down_per_client);
    $("bw-up-client").textContent = split(body.model_up_per_client, body.uplink, body.extra_up_per_client);
    // Whole-run totals need the rounds: while that field is invalid they say so instead.
    const unknown = Object.values(body.unknown || {}).flat();
    note.hidden = !unknown.length;
    note.textContent = unknown.length ? `Whole-run totals need a valid value: ${unknown.join("; ")}` : "";
    if (unknown.length) {
      ["bw-clients", "bw-down", "bw-up", "bw-total", "bw-formula"].forEach((id) => { $(id).textContent = "–"; });
      return;
    }
    $("bw-clients").textContent = `${body.clients_per_round.toFixed(1)} × ${body.rounds} = ${body.client_rounds.toLocaleString()}`;
    $("bw-down").textContent = bytes(body.down_total);
    $("bw-up").textContent = bytes(body.up_total);
    $("bw-total").textContent = bytes(body.total);
    const saving = body.formula_total > 0 ? Math.round(100 * (1 - body.total / body.formula_total)) : 0;
    $("bw-formula").textContent = `${bytes(body.formula_total)}${saving > 0 ? ` (codecs save ${saving}%)` : ""}`;
  }

  async function privacy() {
    const answer = await ask("privacy", form.dataset.privacyUrl);
    if (!answer || !showWhy("privacy", ["dp-epsilon"], answer)) return;
    const dp = answer.body.privacy;
    $("dp-epsilon").textContent = dp ? `ε = ${Number.isFinite(dp.epsilon) ? dp.epsilon.toFixed(2) : "∞"} at δ = ${dp.delta} (z = ${dp.noise_multiplier})` : "no DP (privacy.mechanism is none)";
  }

  async function resources() {
    const answer = await ask("resources", form.dataset.resourcesUrl);
    if (!answer || !showWhy("resources", ["res-params", "res-round", "res-data"], answer)) return;
    const r = answer.body;
    const where = r.device_kind === "gpu" ? "GPU" : "host";
    $("res-params").textContent = `${r.params.toLocaleString()} (limit ${r.limit_params.toLocaleString()})`;
    $("res-round").textContent = `${bytes(r.round_bytes)} of ${where} memory (limit ${bytes(r.limit_round_bytes)})`;
    $("res-data").textContent = r.dataset_bytes === null ? "read from files" : `${bytes(r.dataset_bytes)} (limit ${bytes(r.limit_dataset_bytes)})`;
  }

  let partSeq = 0, lastDataKey = null;
  async function partition() {
    const data = new FormData(form);
    const key = [...data.entries()].filter(([k]) => k.startsWith("data__") || k === "seed").map((e) => e.join("=")).join("&");
    if (key === lastDataKey) return; // the partition depends only on the data section and the seed
    lastDataKey = key;
    const seq = ++partSeq;
    $("partition-info").textContent = "computing…";
    const res = await fetch(`${form.dataset.partitionUrl}?${query()}`);
    const body = await res.json().catch(() => null);
    if (seq !== partSeq) return;
    const err = $("partition-error"), chart = $("partition-chart");
    err.hidden = res.ok;
    if (!res.ok) { err.textContent = errorText(body); $("partition-info").textContent = ""; Plotly.purge(chart); return; }
    if (body.previewed === false) { $("partition-info").textContent = body.reason; Plotly.purge(chart); return; }
    const shown = body.samples.length;
    $("partition-info").textContent = `${body.num_clients.toLocaleString()} clients, ${body.samples_total.toLocaleString()} training samples, ${body.test_samples.toLocaleString()} test samples${shown < body.num_clients ? `; first ${shown} clients shown` : ""}`;
    if (!body.label_counts.length) {
      Plotly.react(chart, [{ type: "bar", x: body.samples.map((_, i) => i), y: body.samples, marker: { color: "#2563eb" } }],
        { margin: { l: 50, r: 10, t: 10, b: 40 }, xaxis: { title: { text: "client" } }, yaxis: { title: { text: "samples" } } }, PLOT_CONFIG);
      return;
    }
    // Heatmap: one row per class, one column per client (the eye reads non-IID-ness across a row).
    const z = [];
    for (let c = 0; c < body.num_classes; c++) z.push(body.label_counts.map((counts) => counts[c]));
    Plotly.react(chart, [{
      type: "heatmap", z, x: body.label_counts.map((_, i) => i), y: [...Array(body.num_classes).keys()],
      colorscale: "Blues", reversescale: false, hovertemplate: "client %{x}<br>class %{y}<br>%{z} samples<extra></extra>",
    }], { margin: { l: 40, r: 10, t: 10, b: 40 }, xaxis: { title: { text: "client" } }, yaxis: { title: { text: "class" }, dtick: body.num_classes > 20 ? 5 : 1 } },
    PLOT_CONFIG);
  }

  let timer = null;
  function schedule() {
    clearTimeout(timer);
    timer = setTimeout(refreshBoxes, 350);
  }
  form.addEventListener("input", schedule);
  form.addEventListener("change", schedule);
  function refreshBoxes() { resources(); bandwidth(); privacy(); partition(); }
  refreshBoxes();
})();
