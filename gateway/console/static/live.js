// The console's one script: keeps a page's live region (#live, data-live="its URL") current.
// Every 1.5 s it fetches the same page from the gateway and, when the region changed, puts the new
// one in its place; the forms are outside the region, so what the teacher is typing stays.
// Committed as is (no build, no CDN); the pages that load it allow script-src and connect-src 'self'.
"use strict";
(function () {
  const region = document.getElementById("live");
  if (!region || !region.dataset.live) return;
  let busy = false;
  async function refresh() {
    if (busy || document.hidden) return;
    busy = true;
    try {
      const answer = await fetch(region.dataset.live, { credentials: "same-origin", headers: { Accept: "text/html" } });
      if (!answer.ok) return;
      const page = new DOMParser().parseFromString(await answer.text(), "text/html");
      const fresh = page.getElementById("live");
      const current = document.getElementById("live");
      if (fresh && current && fresh.innerHTML !== current.innerHTML) {
        current.replaceWith(document.adoptNode(fresh));
      }
    } catch (error) {
      // The gateway restarting or the network gone: the next round tries again.
    } finally {
      busy = false;
    }
  }
  window.setInterval(refresh, 1500);
})();
