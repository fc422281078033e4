// Keeps the parts of a page marked data-live="URL" current: every few seconds (or
// data-every milliseconds) the part is fetched again from URL (server-rendered HTML,
// escaped there) and swapped in.
// Also asks before the buttons marked data-confirm send their form, and keeps Enter
// from sending a form marked data-no-enter: Enter on a ticked box would otherwise
// press the form's first enabled button (Chromium skips a disabled one there).
"use strict";
(function () {
  const EVERY_MS = 5000;

  function refresh(part) {
    fetch(part.dataset.live, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (response) {
        if (response.ok) {
          return response.text().then(function (html) {
            part.innerHTML = html;
            part.dataset.refreshed = String(Date.now());
          });
        }
      })
      .catch(function () { /* the next tick tries again */ });
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-live]").forEach(function (part) {
      setInterval(function () {
        if (!document.hidden) refresh(part);
      }, Number(part.dataset.every) || EVERY_MS);
    });
    document.querySelectorAll("form[data-no-enter]").forEach(function (form) {
      form.addEventListener("keydown", function (event) {
        const target = event.target;
        if (event.key === "Enter" && target instanceof HTMLInputElement) event.preventDefault();
      });
    });
    document.querySelectorAll("button[data-confirm]").forEach(function (button) {
      button.addEventListener("click", function (event) {
        if (!window.confirm(button.dataset.confirm)) event.preventDefault();
      });
    });
  });
})();
