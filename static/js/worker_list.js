// Workers page: re-read the list every few seconds (heartbeats come every few seconds too).
(function () {
  "use strict";
  const table = document.getElementById("workers");
  const body = table.querySelector("tbody");

  function cell(tr, ...nodes) { const td = document.createElement("td"); td.append(...nodes); tr.appendChild(td); return td; }
  function badge(text, cls) { const s = document.createElement("span"); s.className = `badge ${cls}`; s.textContent = text; return s; }

  function row(w) {
    const tr = document.createElement("tr");
    const code = document.createElement("code"); code.textContent = w.hostname;
    cell(tr, code);
    cell(tr, w.queue);
    cell(tr, w.lost ? badge("lost", "lost") : w.busy ? badge("busy", "running") : badge("idle", "completed"));
    const gpus = cell(tr);
    if (!w.devices.length) gpus.append(Object.assign(document.createElement("span"), { className: "muted", textContent: "CPU only" }));
    for (const d of w.devices) {
      const div = document.createElement("div");
      div.textContent = `${d.name} · ${Math.round(d.used_mb)} / ${Math.round(d.total_mb)} MB`;
      gpus.appendChild(div);
    }
    const current = cell(tr);
    if (w.current_experiment) {
      const a = document.createElement("a");
      a.href = table.dataset.detailUrl.replace("/0/", `/${w.current_experiment.id}/`);
      a.textContent = w.current_experiment.name;
      current.appendChild(a);
    } else current.textContent = w.busy ? "(not visible to you)" : "–";
    cell(tr, `${w.seconds_ago} s ago`);
    return tr;
  }

  function queueRow(q) {
    const tr = document.createElement("tr");
    const code = document.createElement("code"); code.textContent = q.name;
    cell(tr, code);
    for (const n of [q.depth, q.queued, q.running, q.live_workers, q.messages === null ? "–" : q.messages]) {
      cell(tr, String(n)).className = "num";
    }
    cell(tr, q.reason ? badge(q.reason, q.depth ? "warning" : "") : badge("served", "completed"));
    return tr;
  }

  async function poll() {
    try {
      const res = await fetch(table.dataset.url);
      if (!res.ok) return;
      const data = await res.json();
      const queues = document.querySelector("#queues tbody");
      if (queues) queues.replaceChildren(...data.queues.map(queueRow));
      if (!data.workers.length) return;
      body.replaceChildren(...data.workers.map(row));
    } catch (err) { /* try again next time */ }
  }
  setInterval(poll, 3000);
})();
