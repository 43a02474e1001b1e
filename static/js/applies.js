// Fields shown only when they apply, shared by the New experiment and New sweep forms. Each field's
// rule is the engine's applies_when (server-rendered into data-applies-when): a list of
// alternatives, each {form field: [values]}. A hidden field keeps its value and is still submitted
// and validated (as the API would); only a field with an error stays in view whatever the rule.
(function () {
  "use strict";
  function bind(form) {
    const ruled = [...form.querySelectorAll("[data-applies-when]")].map((el) => ({ el, rule: JSON.parse(el.dataset.appliesWhen) }));
    function holds(rule) {
      const value = (name) => (form.elements[name] ? form.elements[name].value : undefined);
      return rule.some((alt) => Object.entries(alt).every(([name, values]) => values.includes(value(name))));
    }
    // A field with data-applied-default (the engine's applied_default) whose rule starts to hold
    // while it still reads 0 gets that value, as the engine gives it to a spec that leaves it out:
    // per-client evaluation needs a client test split, which is 0 while the evaluation is off.
    const applied = new Map(ruled.map(({ el, rule }) => [el, holds(rule)]));
    function fill(el, rule) {
      const now = holds(rule), before = applied.get(el);
      applied.set(el, now);
      const input = el.querySelector("input");
      if (!el.dataset.appliedDefault || !now || before || !input || Number(input.value) !== 0) return;
      input.value = JSON.parse(el.dataset.appliedDefault);
      input.dispatchEvent(new Event("input", { bubbles: true }));
    }
    function show() {
      for (const { el, rule } of ruled) {
        fill(el, rule);
        el.hidden = !holds(rule) && !el.classList.contains("invalid");
      }
    }
    show();
    form.addEventListener("change", show);
    form.addEventListener("input", show);
    // Served open so that every field shows without JavaScript; folded here unless it holds an error.
    const fold = document.getElementById("advanced");
    if (fold && !fold.querySelector(".field.invalid")) fold.open = false;
    return show;
  }
  window.FedWebApplies = { bind };
})();
