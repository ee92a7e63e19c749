// isofabric console: behaviour shared by every page (loaded by base.html, deferred).
// Page scripts go in their own file under static/ (CSP: no inline script).
"use strict";

// A form with data-confirm="question" asks before it submits (operator actions show their
// what-if result on a confirmation page instead; this is the last "are you sure").
document.addEventListener("submit", (event) => {
  const form = event.target;
  if (form instanceof HTMLFormElement && form.dataset.confirm) {
    if (!window.confirm(form.dataset.confirm)) {
      event.preventDefault();
    }
  }
});
