// The runs table: live status badges (a small JSON poll), "compare selected", the filter box's field
// name completion ("/" focuses it), the condition builder, the column picker, and opening a group to
// see its runs. Filtering, sorting and grouping happen on the server: the URL holds the view.
(function () {
  "use strict";
  const ACTIVE = ["draft", "queued", "running", "paused"];
  const $ = (id) => document.getElementById(id);
  const url = $("statuses-url").dataset.url;
  const compare = $("compare");
  const q = $("q");
  const fields = JSON.parse($("query-fields").textContent);

  // -- compare, statuses -------------------------------------------------------------------------
  function picked() { return [...document.querySelectorAll("input.pick:checked")].map((c) => c.value); }
  document.addEventListener("change", (e) => {
    if (compare && e.target.classList.contains("pick")) compare.disabled = picked().length < 2;
  });
  if (compare) compare.addEventListener("click", () => {
    location.href = `${compare.dataset.url}?ids=${picked().join(",")}&target=${encodeURIComponent(compare.dataset.target)}`;
  });

  async function poll() {
    const rows = [...document.querySelectorAll("tr[data-id]")].filter((tr) => {
      const s = tr.querySelector(".status");
      return s && ACTIVE.includes(s.textContent);
    });
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
        const round = tr.querySelector(".round");
        if (round) round.textContent = s.current_round;
      }
    } catch (err) { /* offline for a moment: try again at the next tick */ }
  }
  setInterval(poll, 3000);

  // -- "/" focuses the filter; field names complete as you type ---------------------------------------
  document.addEventListener("keydown", (e) => {
    const typing = e.target.closest && e.target.closest("input, textarea, select, [contenteditable]");
    if (e.key === "/" && !typing && !e.ctrlKey && !e.metaKey && !e.altKey) { e.preventDefault(); q.focus(); q.select(); }
  });
  const list = $("q-suggest");
  let shown = [], active = -1;
  function word() { // the name being typed: the field-like run of characters that ends at the caret
    const m = q.value.slice(0, q.selectionStart).match(/([A-Za-z_][A-Za-z0-9_./-]*)$/);
    return m ? m[1] : "";
  }
  function suggest() {
    const w = word();
    shown = !w ? [] : fields.filter((f) => f.name.startsWith(w) && f.name !== w)
      .concat(fields.filter((f) => !f.name.startsWith(w) && f.name.includes(w))).slice(0, 8);
    active = shown.length ? 0 : -1;
    list.innerHTML = "";
    shown.forEach((f, i) => {
      const li = document.createElement("li");
      li.setAttribute("role", "option");
      li.dataset.index = i;
      li.innerHTML = "<b></b> <span class='muted'></span>";
      li.firstChild.textContent = f.name;
      li.lastChild.textContent = f.doc;
      if (i === active) li.classList.add("active");
      list.appendChild(li);
    });
    list.hidden = !shown.length;
  }
  function accept(i) {
    const w = word() || "";
    const start = q.selectionStart - w.length;
    q.value = q.value.slice(0, start) + shown[i].name + " " + q.value.slice(q.selectionStart);
    q.selectionStart = q.selectionEnd = start + shown[i].name.length + 1;
    list.hidden = true; shown = [];
    q.focus();
  }
  q.addEventListener("input", suggest);
  q.addEventListener("blur", () => setTimeout(() => { list.hidden = true; }, 150));
  q.addEventListener("keydown", (e) => {
    if (list.hidden || !shown.length) return;
    if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      e.preventDefault();
      active = (active + (e.key === "ArrowDown" ? 1 : shown.length - 1)) % shown.length;
      [...list.children].forEach((li, i) => li.classList.toggle("active", i === active));
    } else if (e.key === "Tab" || (e.key === "Enter" && active >= 0)) {
      e.preventDefault(); accept(active);
    } else if (e.key === "Escape") { list.hidden = true; }
  });
  list.addEventListener("mousedown", (e) => {
    const li = e.target.closest("li");
    if (li) { e.preventDefault(); accept(Number(li.dataset.index)); }
  });

  // -- the condition builder: field, operator and value appended to the query ------------------------
  function quoted(v) {
    return /^-?\d+(\.\d+)?([eE][-+]?\d+)?$|^[^\s()"'=<>!~]+$/.test(v) ? v : `"${v.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`;
  }
  const add = $("b-add");
  if (add) add.addEventListener("click", () => {
    const field = $("b-field").value.trim(), value = $("b-value").value;
    if (!field) { $("b-field").focus(); return; }
    const term = `${field} ${$("b-op").value} ${quoted(value)}`;
    q.value = q.value.trim() ? `${q.value.trim()} and ${term}` : term;
    $("filters").submit();
  });
  document.querySelectorAll("#group-1, #group-2, #target").forEach((el) => el.addEventListener("change", () => $("filters").submit()));

  // -- the names the page lists: the group selects, the builder's field list, the column picker ---------
  for (const select of document.querySelectorAll("#group-1, #group-2")) {
    for (const f of fields) {
      if (f.group && f.name !== select.dataset.selected) select.add(new Option(f.name, f.name));
    }
  }
  const datalist = $("b-fields");
  for (const f of fields) datalist.appendChild(new Option(f.name, f.name));
  const sections = $("picker-sections");
  if (sections) {
    for (const [title, names] of JSON.parse($("picker-data").textContent)) {
      const set = document.createElement("fieldset");
      set.appendChild(document.createElement("legend")).textContent = title;
      for (const name of names) {
        const label = set.appendChild(document.createElement("label"));
        label.dataset.name = name;
        const box = label.appendChild(document.createElement("input"));
        Object.assign(box, { type: "checkbox", value: name, checked: title === "Shown" });
        label.append(` ${name}`);
      }
      sections.appendChild(set);
    }
  }

  // -- the column picker: the ticked names, in the order shown, become the columns --------------------
  const picker = document.querySelector("form.picker");
  if (picker) {
    picker.addEventListener("submit", () => {
      const names = [...picker.querySelectorAll("input[type=checkbox]:checked")].map((b) => b.value);
      $("picked-columns").value = [...new Set(names)].join(",");
    });
    $("picker-filter").addEventListener("input", (e) => {
      const text = e.target.value.toLowerCase();
      picker.querySelectorAll("label[data-name]").forEach((l) => { l.hidden = !l.dataset.name.toLowerCase().includes(text); });
    });
  }

  // -- a group opens to show its runs under it (the server renders them) -----------------------------
  document.querySelectorAll("tr.group .open-group").forEach((button) => button.addEventListener("click", async () => {
    const tr = button.closest("tr");
    const open = button.getAttribute("aria-expanded") === "true";
    document.querySelectorAll(`tr.member[data-group="${tr.dataset.group}"]`).forEach((m) => m.remove());
    button.setAttribute("aria-expanded", String(!open));
    button.textContent = open ? "▸" : "▾";
    if (open) return;
    const res = await fetch(`?${tr.dataset.drill}&partial=rows`, { headers: { Accept: "text/html" } });
    if (!res.ok) return;
    const body = document.createElement("tbody");
    body.innerHTML = await res.text();
    const rows = [...body.querySelectorAll("tr")];
    rows.forEach((m) => { m.classList.add("member"); m.dataset.group = tr.dataset.group; });
    tr.after(...rows);
  }));
})();
