/* The site's own script: the light/dark switch and the search box. Everything it loads comes from
 * this site; search loads pagefind/pagefind.js only when a reader first uses the box.
 *
 * Theme: without a stored choice the page follows the system setting (prefers-color-scheme);
 * the button stores the reader's choice in localStorage and sets <html data-theme>, which the
 * CSS and the figures follow. Hooks for tests: <html data-theme>, button[aria-pressed].
 * Search: results are links with the page title and Pagefind's excerpt; <form data-search-state>
 * is "loading", "ready" or "error: ...".
 * Receipts: a value's element (site_src/receipt_html.py) names its source in data attributes; on
 * hover or keyboard focus one shared role=tooltip element (#ref-tip) shows them and the value is
 * described by it; the pointer may move onto the tip, Escape dismisses it.
 */
(function () {
  "use strict";
  var root = document.documentElement;
  var media = window.matchMedia ? window.matchMedia("(prefers-color-scheme: dark)") : null;

  function stored() {
    try { var t = localStorage.getItem("theme"); return t === "light" || t === "dark" ? t : null; }
    catch (e) { return null; }
  }
  var chosen = stored();  // the reader's explicit choice, if any; otherwise the system decides

  function effective() {
    return chosen || (media && media.matches ? "dark" : "light");
  }

  function setupTheme() {
    var button = document.querySelector(".theme-toggle");
    if (!button) return;
    function show() {
      button.setAttribute("aria-pressed", effective() === "dark" ? "true" : "false");
      if (chosen) root.setAttribute("data-theme", chosen); else root.removeAttribute("data-theme");
    }
    button.addEventListener("click", function () {
      chosen = effective() === "dark" ? "light" : "dark";
      try { localStorage.setItem("theme", chosen); } catch (e) { /* storage off: this page only */ }
      show();
    });
    if (media && media.addEventListener) media.addEventListener("change", show);
    button.hidden = false;
    show();
  }

  function setupSearch() {
    var form = document.querySelector("form.search");
    if (!form) return;
    var input = form.querySelector("input[type=search]");
    var out = form.querySelector(".search-results");
    var base = new URL(form.getAttribute("data-search-root") || "./", location.href);
    var engine = null;
    var serial = 0;

    function load() {
      if (!engine) {
        form.setAttribute("data-search-state", "loading");
        engine = import(new URL("pagefind/pagefind.js", base).href).then(function (pf) {
          return pf.options({ baseUrl: base.pathname }).then(function () {
            form.setAttribute("data-search-state", "ready");
            return pf;
          });
        }).catch(function (err) {
          form.setAttribute("data-search-state", "error: " + (err && err.message || err));
          throw err;
        });
      }
      return engine;
    }

    function render(items, query) {
      out.textContent = "";
      if (!query) return;
      if (!items.length) {
        var none = document.createElement("p");
        none.textContent = "No page mentions \u201c" + query + "\u201d.";
        out.appendChild(none);
        return;
      }
      var list = document.createElement("ol");
      items.forEach(function (item) {
        var li = document.createElement("li");
        var a = document.createElement("a");
        a.href = item.url;
        a.textContent = (item.meta && item.meta.title) || item.url;
        var excerpt = document.createElement("p");
        excerpt.className = "search-excerpt";
        excerpt.innerHTML = item.excerpt;  // Pagefind's excerpt of this site's own text, <mark> around hits
        li.appendChild(a);
        li.appendChild(excerpt);
        list.appendChild(li);
      });
      out.appendChild(list);
    }

    function run() {
      var query = input.value.trim();
      var mine = ++serial;
      if (!query) { render([], ""); return; }
      load().then(function (pf) { return pf.debouncedSearch(query, {}, 150); }).then(function (search) {
        if (!search || mine !== serial) return null;  // a newer query superseded this one
        return Promise.all(search.results.slice(0, 8).map(function (r) { return r.data(); }));
      }).then(function (items) {
        if (items && mine === serial) render(items, query);
      }).catch(function () { /* the state attribute says why */ });
    }

    input.addEventListener("focus", function () { load().catch(function () {}); }, { once: true });
    input.addEventListener("input", run);
    form.addEventListener("submit", function (e) { e.preventDefault(); run(); });
    input.addEventListener("keydown", function (e) {
      if (e.key === "Escape") { input.value = ""; render([], ""); }
    });
    form.hidden = false;
  }

  function setupReceipts() {
    var tip = null, owner = null;

    // the same words as Resolved.receipt (site_src/receipts.py), then the raw value
    function words(el) {
      var source = el.getAttribute("data-source"), expr = el.getAttribute("data-expr");
      return (expr === null ? "Recorded at " + source : "Computed from " + source + ": " + expr) +
        ". Raw value: " + el.getAttribute("data-value");
    }

    function receipt(node) {
      return node && node.closest ? node.closest(".ref[data-source]") : null;
    }

    function hide() {
      if (!owner) return;
      owner.removeAttribute("aria-describedby");
      tip.hidden = true;
      owner = null;
    }

    function show(el) {
      if (owner === el) return;
      hide();
      if (!tip) {
        tip = document.createElement("span");
        tip.id = "ref-tip";
        tip.className = "ref-tip";
        tip.setAttribute("role", "tooltip");
        tip.addEventListener("mouseout", function (e) {
          if (!tip.contains(e.relatedTarget) && receipt(e.relatedTarget) !== owner) hide();
        });
        document.body.appendChild(tip);
      }
      tip.textContent = words(el);
      tip.hidden = false;
      // under the value's last line, kept inside the page's width
      var rects = el.getClientRects(), r = rects[rects.length - 1] || el.getBoundingClientRect();
      var width = document.documentElement.clientWidth;
      var left = Math.max(4, Math.min(r.left, width - tip.offsetWidth - 4));
      tip.style.left = (left + window.scrollX) + "px";
      tip.style.top = (r.bottom + window.scrollY) + "px";
      el.setAttribute("aria-describedby", "ref-tip");
      owner = el;
    }

    document.addEventListener("mouseover", function (e) { var el = receipt(e.target); if (el) show(el); });
    document.addEventListener("mouseout", function (e) {
      if (owner && receipt(e.target) === owner && receipt(e.relatedTarget) !== owner &&
          !(tip && tip.contains(e.relatedTarget))) hide();
    });
    document.addEventListener("focusin", function (e) { var el = receipt(e.target); if (el) show(el); else hide(); });
    document.addEventListener("focusout", function (e) { if (receipt(e.target) === owner) hide(); });
    document.addEventListener("keydown", function (e) { if (e.key === "Escape") hide(); });
  }

  // "Run the check here": shown where WebAssembly runs and the page is served (a file: page cannot
  // fetch the zip); check.js is imported on the first click only.
  function setupCheck() {
    if (!window.WebAssembly || location.protocol === "file:") return;
    document.querySelectorAll(".bundle-check[data-check-script]").forEach(function (box) {
      box.querySelector(".check-run").addEventListener("click", function () {
        import(new URL(box.getAttribute("data-check-script"), location.href).href).then(function (m) { m.run(box); },
          function (e) { box.querySelector(".check-status").textContent = "The check could not load: " + e; });
      });
      box.hidden = false;
    });
  }

  function start() { setupTheme(); setupSearch(); setupReceipts(); setupCheck(); }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
