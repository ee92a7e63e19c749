// An earlier state's verdict is shown (templates/_stale_verdict.html): poll the fabric's
// verdict status (same origin, the session cookie) and reload once the current one is ready.
(function () {
  "use strict";
  const banner = document.querySelector(".stale-verdict[data-status-url]");
  if (!banner) return;
  const url = banner.dataset.statusUrl;
  let delay = 500;
  const MAX_DELAY = 5000;

  async function poll() {
    try {
      const answer = await fetch(url, { credentials: "same-origin", cache: "no-store" });
      if (answer.ok) {
        const status = await answer.json();
        if (status.ready) {
          window.location.reload();
          return;
        }
      }
    } catch (error) {
      // a restart or a dropped connection: keep polling, slower
    }
    delay = Math.min(delay * 1.5, MAX_DELAY);
    window.setTimeout(poll, delay);
  }
  window.setTimeout(poll, delay);
})();
