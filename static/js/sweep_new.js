// New sweep: the base spec's fields shown only when they apply (static/js/applies.js), as on the
// New experiment form.
(function () {
  "use strict";
  const form = document.getElementById("sweep-form");
  if (form && window.FedWebApplies) FedWebApplies.bind(form);
})();
