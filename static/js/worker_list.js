// Workers page: the rows follow the /ws/workers/ socket (one event per heartbeat, and the queue
// table with it); a worker whose heartbeats stop is marked lost here, when its lost_at passes.
(function () {
  "use strict";
  const table = document.getElementById("workers");
  const body = table.querySelector("tbody");
  const skew = new Date(table.dataset.now) - new Date(); // server clock minus ours
  const now = () => new Date(Date.now() + skew);
  const workers = new Map(); // hostname -> latest WorkerEvent

  function cell(tr, ...nodes) { const td = document.createElement("td"); td.append(...nodes); tr.appendChild(td); return td; }
  function badge(text, cls) { const s = document.createElement("span"); s.className = `badge ${cls}`; s.textContent = text; return s; }
  const isLost = (w) => now() > new Date(w.lost_at);

  function row(w) {
    const tr = document.createElement("tr");
    const code = document.createElement("code"); code.textContent = w.hostname;
    cell(tr, code);
    cell(tr, w.queue);
    const state = cell(tr, isLost(w) ? badge("lost", "lost") : w.busy ? badge("busy", "running") : badge("idle", "completed"));
    if (w.gang) {
      const rank = badge(`rank ${w.gang.rank} of ${w.gang.ranks}`, "");
      rank.title = `a rank of a distributed run led by ${w.gang.leader}`;
      state.append(" ", rank);
    }
    const gpus = cell(tr);
    if (!w.devices.length) gpus.append(Object.assign(document.createElement("span"), { className: "muted", textContent: "CPU only" }));
    for (const d of w.devices) {
      const div = document.createElement("div");
      div.textContent = `${d.name} · ${Math.round(d.used_mb)} / ${Math.round(d.total_mb)} MB`;
      gpus.appendChild(div);
    }
    const plugins = cell(tr);
    plugins.className = "plugins";
    if (!(w.plugins || []).length) plugins.append(Object.assign(document.createElement("span"), { className: "muted", textContent: "none" }));
    for (const p of w.plugins || []) {
      const div = document.createElement("div");
      div.title = (p.components || []).join(", ");
      const name = document.createElement("code"); name.textContent = p.name;
      const hash = document.createElement("code"); hash.textContent = p.hash || "no source";
      div.append(name, ` ${p.version || ""} · `, hash);
      plugins.appendChild(div);
    }
    const current = cell(tr);
    if (w.current_experiment_id) {
      const a = document.createElement("a");
      a.href = table.dataset.detailUrl.replace("/0/", `/${w.current_experiment_id}/`);
      a.textContent = w.current_experiment_name;
      current.appendChild(a);
    } else current.textContent = w.busy ? "(not visible to you)" : "–";
    cell(tr, `${Math.max(0, Math.round((now() - new Date(w.last_heartbeat)) / 1000))} s ago`);
    return tr;
  }

  function queueRow(q) {
    const tr = document.createElement("tr");
    const name = document.createElement("span");
    const code = document.createElement("code"); code.textContent = q.name;
    const policy = badge(q.policy || "fifo", ""); policy.title = "scheduling policy";
    name.append(code, " ", policy);
    cell(tr, name);
    for (const n of [q.depth, q.queued, q.running, q.live_workers, q.messages === null ? "–" : q.messages]) {
      cell(tr, String(n)).className = "num";
    }
    cell(tr, q.reason ? badge(q.reason, q.depth ? "warning" : "") : badge("served", "completed"));
    return tr;
  }
  function showQueues(queues) {
    const tbody = document.querySelector("#queues tbody");
    if (tbody) tbody.replaceChildren(...queues.map(queueRow));
  }

  let lostShown = new Set();
  function render() {
    if (!workers.size) return;
    body.replaceChildren(...[...workers.values()].sort((a, b) => a.hostname.localeCompare(b.hostname)).map(row));
    const lost = new Set([...workers.values()].filter(isLost).map((w) => w.hostname));
    // A worker that just died sends nothing more, and its queue may have no other worker whose
    // heartbeat would bring the table: read the queues once.
    if ([...lost].some((h) => !lostShown.has(h))) refreshQueues();
    lostShown = lost;
  }
  async function refreshQueues() {
    try {
      const res = await fetch(table.dataset.url);
      if (res.ok) showQueues((await res.json()).queues);
    } catch (err) { /* the next heartbeat brings it */ }
  }

  function onMessage(ev) {
    if (ev.type === "worker") { workers.set(ev.hostname, ev); render(); }
    else if (ev.type === "queues") showQueues(ev.queues);
  }
  const conn = document.getElementById("conn");
  FedWebLive.connect({
    url: table.dataset.wsUrl, onMessage,
    onState: (s) => { if (conn) { conn.textContent = { live: "live", down: "reconnecting…", forbidden: "signed out" }[s] || s; conn.className = `conn ${s}`; } },
  });
  setInterval(render, 1000); // "s ago" and lost, between heartbeats
})();
