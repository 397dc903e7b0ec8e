/* The site's own script: the light/dark switch and the search box. Everything it loads comes from
 * this site; search loads pagefind/pagefind.js only when a reader first uses the box.
 *
 * Theme: without a stored choice the page follows the system setting (prefers-color-scheme);
 * the button stores the reader's choice in localStorage and sets <html data-theme>, which the
 * CSS and the figures follow. Its label says what it will do ("Switch to dark theme"). Hooks for
 * tests: <html data-theme>, button[data-theme-next] (the theme a press switches to).
 * Search: results are links with the page's name and Pagefind's excerpt; <form data-search-state>
 * is "loading", "ready" or "error: ...". Arrow keys move from the box into the results and
 * between them; Escape goes back to the box and closes them.
 * Citation: the copy button copies the BibTeX entry as shown; without a base_url the entry's url
 * is written here as the address the page is read at.
 * Tables: a table wrapper that does not scroll is taken out of the tab order.
 * Receipts: a value's element (.ref, site_src/receipt_html.py) names its source by its link (or
 * data-source where the link cannot say it) and its raw value by data-value (or its text); on
 * hover or keyboard focus one shared role=tooltip element (#ref-tip) shows them and the value is
 * described by it, over the value (under it only at the window's top edge, data-tip-side says
 * which); the pointer may move onto the tip, Escape dismisses it. A glossary term's link
 * (.term[data-definition]) shows its definition in the same tooltip.
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
      var next = effective() === "dark" ? "light" : "dark";
      button.setAttribute("data-theme-next", next);
      button.textContent = "Switch to " + next + " theme";
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
          // a study page is long: weigh a page's length less than Pagefind's default (0.75) does,
          // so that the page about a subject outranks a short page that mentions it
          return pf.options({ baseUrl: base.pathname, ranking: { pageLength: 0.25 } }).then(function () {
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
      var count = document.createElement("p");
      count.className = "search-count";
      count.textContent = items.length + (items.length === 1 ? " page" : " pages") + " (arrow keys move through them)";
      out.appendChild(count);
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
    function links() { return Array.prototype.slice.call(out.querySelectorAll("li > a")); }
    input.addEventListener("keydown", function (e) {
      if (e.key === "Escape") { input.value = ""; render([], ""); }
      else if (e.key === "ArrowDown" && links().length) { e.preventDefault(); links()[0].focus(); }
    });
    out.addEventListener("keydown", function (e) {
      var all = links(), at = all.indexOf(document.activeElement);
      if (at < 0) return;
      if (e.key === "ArrowDown") { e.preventDefault(); all[Math.min(at + 1, all.length - 1)].focus(); }
      else if (e.key === "ArrowUp") { e.preventDefault(); if (at === 0) input.focus(); else all[at - 1].focus(); }
      else if (e.key === "Home") { e.preventDefault(); all[0].focus(); }
      else if (e.key === "End") { e.preventDefault(); all[all.length - 1].focus(); }
      else if (e.key === "Escape") { e.preventDefault(); input.focus(); render([], ""); }
    });
    form.hidden = false;
  }

  function setupReceipts() {
    var tip = null, owner = null;

    // a value: the same words as Resolved.receipt (site_src/receipts.py), then the raw value; a
    // glossary term: its definition (site_src/glossary.py)
    function words(el) {
      if (el.hasAttribute("data-definition")) return el.getAttribute("data-term") + ": " + el.getAttribute("data-definition");
      var expr = el.getAttribute("data-expr"), source = sourceOf(el, expr !== null);
      var raw = el.hasAttribute("data-value") ? el.getAttribute("data-value") : el.textContent;
      return (expr === null ? "Recorded at " + source : "Computed from " + source + ": " + expr) +
        ". Raw value: " + raw;
    }

    // where a value was recorded: data-source, or else what its link names (the page leaves out
    // what the link says): ../source/PATH.html#L12 is PATH:12, a computed value's link is PATH.
    // The same pattern as source_from_href in site_src/receipt_html.py, which decides to leave it out.
    function sourceOf(el, computed) {
      if (el.hasAttribute("data-source")) return el.getAttribute("data-source");
      var m = /^(?:\.\.\/)*source\/([^#]*?)(?:\.html)?(?:#L([0-9]+))?$/.exec(el.getAttribute("href") || "");
      if (!m) return "";
      var path = decodeURIComponent(m[1]);
      return computed || !m[2] ? path : path + ":" + m[2];
    }

    function receipt(node) {
      return node && node.closest ? node.closest(".ref, .term[data-definition]") : null;
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
      // over the value's first line, where it covers only what was read before it (below, it hid
      // the next number: the next line of prose, the next row of a column); under the value's
      // last line only when the window has no room above. Kept inside the page's width.
      var rects = el.getClientRects(), first = rects[0] || el.getBoundingClientRect();
      var last = rects[rects.length - 1] || first;
      var above = first.top - tip.offsetHeight >= 0;
      var r = above ? first : last;
      var width = document.documentElement.clientWidth;
      var left = Math.max(4, Math.min(r.left, width - tip.offsetWidth - 4));
      tip.style.left = (left + window.scrollX) + "px";
      tip.style.top = ((above ? first.top - tip.offsetHeight : last.bottom) + window.scrollY) + "px";
      tip.setAttribute("data-tip-side", above ? "above" : "below");
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
      // the skip link to the bundle now leads to the check's button
      document.querySelectorAll('a[data-skip-bundle="' + box.id + '"]').forEach(function (skip) {
        skip.setAttribute("href", "#" + box.id);
        skip.textContent = "Skip to the check in this browser";
      });
    });
  }

  function setupCitation() {
    document.querySelectorAll("[data-cite-url]").forEach(function (el) {
      var here = new URL(location.href);
      here.hash = "";
      here.search = "";
      el.textContent = here.href;
    });
    document.querySelectorAll("button[data-copy]").forEach(function (button) {
      var target = document.getElementById(button.getAttribute("data-copy"));
      var status = button.parentNode.querySelector(".copy-status");
      if (!target) return;
      function said(text) { if (status) status.textContent = text; }
      button.addEventListener("click", function () {
        var text = target.textContent;
        var done = function () { said("Copied."); };
        var fallback = function () {
          var range = document.createRange();
          range.selectNodeContents(target);
          var selection = window.getSelection();
          selection.removeAllRanges();
          selection.addRange(range);
          try { document.execCommand("copy") ? done() : said("Selected: press Ctrl+C or \u2318C to copy."); }
          catch (e) { said("Selected: press Ctrl+C or \u2318C to copy."); }
        };
        if (navigator.clipboard && navigator.clipboard.writeText) navigator.clipboard.writeText(text).then(done, fallback);
        else fallback();
      });
      button.hidden = false;
    });
  }

  function setupTables() {
    // a wrapper is a focusable region so that a keyboard can scroll it; one that fits needs neither
    function fit() {
      document.querySelectorAll(".table-wrap").forEach(function (wrap) {
        var scrolls = wrap.scrollWidth > wrap.clientWidth + 1;
        if (scrolls) wrap.setAttribute("tabindex", "0"); else wrap.removeAttribute("tabindex");
      });
    }
    fit();
    window.addEventListener("resize", fit);
  }

  function setupMenu() {
    // the navigation is open on a wide screen and folded into "Menu" on a narrow one
    var menu = document.querySelector("details.site-menu");
    if (!menu || !window.matchMedia) return;
    var narrow = window.matchMedia("(max-width: 40em)");
    function fit() { menu.open = !narrow.matches; }
    fit();
    if (narrow.addEventListener) narrow.addEventListener("change", fit);
  }

  function start() { setupMenu(); setupTheme(); setupSearch(); setupReceipts(); setupCitation(); setupTables(); setupCheck(); }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
