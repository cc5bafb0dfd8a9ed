// The console's one script: live regions. An element with `data-refresh="N"` (and an id) is
// re-read from the server every N seconds and replaced in place, while the page is visible and
// the operator is not typing in a form inside it. A button pauses and resumes it. Without
// JavaScript every page still works (reload to refresh).
"use strict";

(function () {
  const live = document.querySelector("[data-refresh][id]");
  if (!live) return;
  const seconds = Math.max(1, parseInt(live.dataset.refresh, 10) || 10);
  let paused = false;

  const toggle = document.createElement("button");
  toggle.type = "button";
  toggle.className = "refresh-toggle";
  toggle.setAttribute("aria-pressed", "false");
  toggle.textContent = "Pause live updates";
  toggle.addEventListener("click", () => {
    paused = !paused;
    toggle.setAttribute("aria-pressed", String(paused));
    toggle.textContent = paused ? "Resume live updates" : "Pause live updates";
  });
  live.before(toggle);

  const busy = () => {
    const a = document.activeElement;
    return a && live.contains(a) && ["INPUT", "SELECT", "TEXTAREA"].includes(a.tagName);
  };

  async function refresh() {
    if (paused || document.hidden || busy()) return;
    try {
      const response = await fetch(window.location.href, {
        credentials: "same-origin",
        headers: { Accept: "text/html" },
      });
      if (response.redirected || !response.ok) {
        // Signed out (or the session ended): show where the server sends us.
        if (response.redirected) window.location.assign(response.url);
        return;
      }
      const page = new DOMParser().parseFromString(await response.text(), "text/html");
      const fresh = page.getElementById(live.id);
      if (!fresh) return;
      const openDetails = new Set(
        [...live.querySelectorAll("details[open]")].map((d) => d.id || d.textContent.slice(0, 40))
      );
      live.innerHTML = fresh.innerHTML;
      live.querySelectorAll("details").forEach((d) => {
        if (openDetails.has(d.id || d.textContent.slice(0, 40))) d.open = true;
      });
      if (!fresh.hasAttribute("data-refresh")) {
        // The server says nothing more will change (a finished job, an order at its end).
        clearInterval(timer);
        toggle.remove();
      }
    } catch (e) {
      // A lost connection: try again at the next tick.
    }
  }

  const timer = setInterval(refresh, seconds * 1000);
})();
