// Tables the reader sorts and trims: a click on a heading with data-sort sorts the rows by that
// column (again: the other way), reading each cell's data-value (or its text); a "Columns" picker
// (templates/orchestrator/_column_picker.html) hides metric columns, remembered in localStorage; a table
// wider than its box (.scroll-x) scrolls inside it, with a line under it while columns are out of sight.
(function () {
  "use strict";

  function cellValue(tr, index, kind) {
    const td = tr.children[index];
    if (!td) return null;
    const raw = td.dataset.value !== undefined ? td.dataset.value : td.textContent.trim();
    if (kind !== "num") return raw.toLowerCase();
    return raw === "" ? null : Number(raw);
  }

  function sortBy(table, th) {
    const index = [...th.parentNode.children].indexOf(th);
    const descending = th.getAttribute("aria-sort") !== "descending";
    table.querySelectorAll("th[aria-sort]").forEach((h) => h.removeAttribute("aria-sort"));
    th.setAttribute("aria-sort", descending ? "descending" : "ascending");
    const body = table.tBodies[0];
    const rows = [...body.rows].filter((tr) => tr.dataset.id);
    rows.sort((a, b) => {
      const x = cellValue(a, index, th.dataset.sort), y = cellValue(b, index, th.dataset.sort);
      if (x === y) return 0;
      if (x === null) return 1; // runs without the value go last, whichever way
      if (y === null) return -1;
      return (x < y ? -1 : 1) * (descending ? -1 : 1);
    });
    for (const tr of rows) body.appendChild(tr);
  }

  function storageKey(table) { return `fedweb.columns.${table.id}`; }

  function hidden(table) {
    try { return JSON.parse(localStorage.getItem(storageKey(table)) || "[]"); } catch (e) { return []; }
  }

  function applyColumns(table, keys) {
    table.querySelectorAll("[data-col]").forEach((cell) => { cell.hidden = keys.includes(cell.dataset.col); });
  }

  function setUp(table) {
    table.querySelectorAll("th[data-sort]").forEach((th) => {
      th.tabIndex = 0;
      th.addEventListener("click", () => sortBy(table, th));
      th.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sortBy(table, th); } });
    });
    const picker = document.querySelector(`.column-picker[data-table="${table.id}"]`);
    const keys = hidden(table);
    applyColumns(table, keys);
    if (!picker) return;
    picker.querySelectorAll("input[type=checkbox]").forEach((box) => {
      box.checked = !keys.includes(box.value);
      box.addEventListener("change", () => {
        const now = [...picker.querySelectorAll("input[type=checkbox]")].filter((b) => !b.checked).map((b) => b.value);
        localStorage.setItem(storageKey(table), JSON.stringify(now));
        applyColumns(table, now);
      });
    });
  }

  // A box that scrolls its table sideways (.scroll-x) says so under it while there is more to see.
  function cue(box) {
    const line = document.createElement("div");
    line.className = "scroll-cue";
    line.textContent = "Scroll sideways for more columns →";
    box.after(line);
    const update = () => { line.hidden = box.scrollLeft + box.clientWidth >= box.scrollWidth - 1; };
    box.addEventListener("scroll", update, { passive: true });
    if (window.ResizeObserver) new ResizeObserver(update).observe(box);
    update();
  }

  document.querySelectorAll("table.sortable").forEach(setUp);
  document.querySelectorAll(".scroll-x").forEach(cue);
  window.FedWebTables = { sortBy };
})();
