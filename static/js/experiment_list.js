// Experiments list: live status badges (a small JSON poll) and "compare selected".
(function () {
  "use strict";
  const ACTIVE = ["draft", "queued", "running", "paused"];
  const url = document.getElementById("statuses-url").dataset.url;
  const compare = document.getElementById("compare");

  function picked() { return [...document.querySelectorAll("input.pick:checked")].map((c) => c.value); }
  document.addEventListener("change", (e) => {
    if (e.target.classList.contains("pick")) compare.disabled = picked().length < 2;
  });
  compare.addEventListener("click", () => { location.href = `${compare.dataset.url}?ids=${picked().join(",")}`; });

  async function poll() {
    const rows = [...document.querySelectorAll("tr[data-id]")].filter((tr) => ACTIVE.includes(tr.querySelector(".status").textContent));
    if (!rows.length) return;
    try {
      const res = await fetch(`${url}?ids=${rows.map((tr) => tr.dataset.id).join(",")}`, { headers: { Accept: "application/json" } });
      if (!res.ok) return;
      const data = (await res.json()).experiments;
      for (const tr of rows) {
        const s = data[tr.dataset.id];
        if (!s) continue;
        const badge = tr.querySelector(".status");
        badge.textContent = s.status;
        badge.className = `badge ${s.status} status`;
        tr.querySelector(".round").textContent = s.current_round;
      }
    } catch (err) { /* offline for a moment: try again at the next tick */ }
  }
  setInterval(poll, 3000);
})();
