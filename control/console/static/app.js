// KECE console: progressive enhancement only; every page works without it.
// 1. Live parts: on pages whose <body> has data-live-ms, the page is fetched
//    again every so often and each [data-live] element (by id) is replaced
//    by its fresh copy. Forms are never inside live parts, so typing is
//    never disturbed, and a part holding the keyboard focus waits until the
//    focus leaves it, so keyboard users do not lose their place. A session
//    that ended sends the browser to the login.
// 2. Copy buttons: <button data-copy="ID"> copies the text of element ID.
// 3. Narrow screens: each table cell is labelled with its column heading
//    (data-label), so the stylesheet can stack rows into cards on a phone
//    instead of scrolling sideways.
(function () {
  "use strict";
  var body = document.body;
  var stack = function (root) {
    root.querySelectorAll("table").forEach(function (t) {
      var heads = [];
      t.querySelectorAll("thead th").forEach(function (h) { heads.push(h.textContent.trim()); });
      if (!heads.length) { return; }
      t.classList.add("stack");
      t.querySelectorAll("tbody tr").forEach(function (tr) {
        Array.prototype.forEach.call(tr.children, function (cell, i) {
          if (heads[i] && !cell.hasAttribute("colspan")) { cell.setAttribute("data-label", heads[i]); }
        });
      });
    });
  };
  stack(document);
  var every = parseInt(body.getAttribute("data-live-ms") || "0", 10);
  if (every > 0) {
    var busy = false;
    var tick = function () {
      if (busy || document.hidden) { return; }
      busy = true;
      fetch(location.href, { credentials: "same-origin" })
        .then(function (res) {
          if (res.redirected && res.url.indexOf("/console/login") >= 0) { location.assign(res.url); return null; }
          return res.ok ? res.text() : null;
        })
        .then(function (html) {
          if (!html) { return; }
          var doc = new DOMParser().parseFromString(html, "text/html");
          stack(doc);
          document.querySelectorAll("[data-live]").forEach(function (old) {
            var fresh = doc.getElementById(old.id);
            if (old.contains(document.activeElement)) { return; }
            if (fresh && fresh.innerHTML !== old.innerHTML) { old.innerHTML = fresh.innerHTML; }
          });
        })
        .catch(function () { /* a missed refresh is retried on the next tick */ })
        .then(function () { busy = false; });
    };
    setInterval(tick, every);
  }
  document.querySelectorAll("button[data-copy]").forEach(function (b) {
    b.addEventListener("click", function () {
      var el = document.getElementById(b.getAttribute("data-copy"));
      if (!el) { return; }
      var text = el.value || el.textContent;
      var done = function () { b.textContent = "Copied"; };
      if (navigator.clipboard) {
        navigator.clipboard.writeText(text).then(done, function () { el.select(); });
      } else {
        el.select();
      }
    });
  });
})();
