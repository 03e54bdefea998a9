"use strict";
(function () {
  function copyWithTextarea(text) {
    var area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.style.position = "fixed";
    area.style.opacity = "0";
    document.body.appendChild(area);
    area.select();
    var ok = false;
    try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
    document.body.removeChild(area);
    return ok;
  }

  function flash(button, label) {
    var idle = button.getAttribute("data-label") || button.textContent;
    button.setAttribute("data-label", idle);
    button.textContent = label;
    button.classList.add("done");
    window.setTimeout(function () {
      button.textContent = idle;
      button.classList.remove("done");
    }, 1600);
  }

  document.querySelectorAll("button[data-copy]").forEach(function (button) {
    button.addEventListener("click", function () {
      var source = document.getElementById(button.getAttribute("data-copy"));
      var text = source ? source.textContent : "";
      button.setAttribute("data-copied", text);
      var done = function () { flash(button, "Copied \u2713"); };
      var fallback = function () {
        flash(button, copyWithTextarea(text) ? "Copied \u2713" : "Select and copy");
      };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(text).then(done, fallback);
      } else {
        fallback();
      }
    });
  });

  document.querySelectorAll("button[data-toggle-all]").forEach(function (button) {
    button.addEventListener("click", function () {
      var open = button.getAttribute("data-toggle-all") === "open";
      document.querySelectorAll("details").forEach(function (d) { d.open = open; });
    });
  });

  // Printing shows everything: closed <details> would otherwise print as their summary only.
  window.addEventListener("beforeprint", function () {
    document.querySelectorAll("details").forEach(function (d) {
      if (!d.open) { d.setAttribute("data-print-opened", ""); d.open = true; }
    });
  });
  window.addEventListener("afterprint", function () {
    document.querySelectorAll("details[data-print-opened]").forEach(function (d) {
      d.removeAttribute("data-print-opened");
      d.open = false;
    });
  });
})();
