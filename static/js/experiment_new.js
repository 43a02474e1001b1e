// New-experiment form: fields shown only when they apply, the "Advanced" fold, and the resource and
// bandwidth estimates and the partition preview following the form values.
(function () {
  "use strict";
  const form = document.getElementById("experiment-form");
  const $ = (id) => document.getElementById(id);

  // Each field's rule is the engine's applies_when (server-rendered into data-applies-when): a list of
  // alternatives, each {form field: [values]}. A hidden field keeps its value and is still submitted
  // and validated (as the API would); only a field with an error stays in view whatever the rule.
  const ruled = [...form.querySelectorAll("[data-applies-when]")].map((el) => ({ el, rule: JSON.parse(el.dataset.appliesWhen) }));
  function holds(rule) {
    const value = (name) => (form.elements[name] ? form.elements[name].value : undefined);
    return rule.some((alt) => Object.entries(alt).every(([name, values]) => values.includes(value(name))));
  }
  function showApplicable() {
    for (const { el, rule } of ruled) el.hidden = !holds(rule) && !el.classList.contains("invalid");
  }
  showApplicable();
  $("applies-note").hidden = false;
  // Served open so that every field shows without JavaScript; folded here unless it holds an error.
  const fold = $("advanced");
  if (fold && !fold.querySelector(".field.invalid")) fold.open = false;

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

  let bwSeq = 0;
  async function bandwidth() {
    const seq = ++bwSeq;
    const res = await fetch(`${form.dataset.bandwidthUrl}?${query()}`);
    const body = await res.json().catch(() => null);
    if (seq !== bwSeq) return; // a newer request is on its way
    const err = $("bandwidth-error");
    $("bandwidth-values").style.opacity = res.ok ? 1 : 0.35;
    err.hidden = res.ok;
    $("resource-values").style.opacity = res.ok ? 1 : 0.35;
    if (!res.ok) { err.textContent = errorText(body); return; }
    resources(body.resources);
    $("bw-model").textContent = `${body.params.toLocaleString()} params (${bytes(4 * body.params)} fp32)`;
    $("bw-clients").textContent = `${body.clients_per_round.toFixed(1)} × ${body.rounds} = ${body.client_rounds.toLocaleString()}`;
    $("bw-down-client").textContent = `${bytes(body.down_per_client)} (${body.downlink})`;
    $("bw-up-client").textContent = `${bytes(body.up_per_client)} (${body.uplink})`;
    $("bw-down").textContent = bytes(body.down_total);
    $("bw-up").textContent = bytes(body.up_total);
    $("bw-total").textContent = bytes(body.total);
    const saving = body.formula_total > 0 ? Math.round(100 * (1 - body.total / body.formula_total)) : 0;
    $("bw-formula").textContent = `${bytes(body.formula_total)}${saving > 0 ? ` (codecs save ${saving}%)` : ""}`;
    const dp = body.privacy;
    $("dp-epsilon").textContent = dp ? `ε = ${Number.isFinite(dp.epsilon) ? dp.epsilon.toFixed(2) : "∞"} at δ = ${dp.delta} (z = ${dp.noise_multiplier})` : "no DP";
  }

  function resources(r) {
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
        { margin: { l: 50, r: 10, t: 10, b: 40 }, xaxis: { title: { text: "client" } }, yaxis: { title: { text: "samples" } } }, { displaylogo: false, responsive: true });
      return;
    }
    // Heatmap: one row per class, one column per client (the eye reads non-IID-ness across a row).
    const z = [];
    for (let c = 0; c < body.num_classes; c++) z.push(body.label_counts.map((counts) => counts[c]));
    Plotly.react(chart, [{
      type: "heatmap", z, x: body.label_counts.map((_, i) => i), y: [...Array(body.num_classes).keys()],
      colorscale: "Blues", reversescale: false, hovertemplate: "client %{x}<br>class %{y}<br>%{z} samples<extra></extra>",
    }], { margin: { l: 40, r: 10, t: 10, b: 40 }, xaxis: { title: { text: "client" } }, yaxis: { title: { text: "class" }, dtick: body.num_classes > 20 ? 5 : 1 } },
    { displaylogo: false, responsive: true });
  }

  let timer = null;
  function schedule() {
    clearTimeout(timer);
    timer = setTimeout(() => { bandwidth(); partition(); }, 350);
  }
  form.addEventListener("input", schedule);
  form.addEventListener("change", schedule);
  form.addEventListener("change", showApplicable);
  form.addEventListener("input", showApplicable);
  bandwidth();
  partition();
})();
