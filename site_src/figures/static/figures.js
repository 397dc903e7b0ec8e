/* Lazy loader for interactive figures. Served from the site itself; fetches nothing elsewhere.
 *
 * Each figure body (.fig) holds its static SVGs, a hidden .fig-live container, hidden controls
 * and a <script type="application/json" class="fig-spec"> with the Vega specs (light and dark).
 * When a figure nears the viewport, the Vega runtime (vega-runtime.js, next to this file) is
 * loaded once and the figure is rendered live; the static SVG is then hidden.
 *
 * Hooks for tests: .fig gets data-figure-ready="true" and fires "figure:ready" when its live
 * view is up; each change of a control sets data-figure-updates (a counter) and fires
 * "figure:updated" once the view has re-run. Both events bubble.
 */
(function () {
  "use strict";
  var here = document.currentScript && document.currentScript.src;
  var runtimeUrl = here ? new URL("vega-runtime.js", here).href : "vega-runtime.js";
  var loading = null;

  function loadRuntime() {
    if (!loading) {
      loading = new Promise(function (resolve, reject) {
        var s = document.createElement("script");
        s.src = runtimeUrl;
        s.onload = function () { resolve(window.vegaEmbed); };
        s.onerror = function () { reject(new Error("cannot load " + runtimeUrl)); };
        document.head.appendChild(s);
      });
    }
    return loading;
  }

  function theme() {
    var t = document.documentElement.getAttribute("data-theme");
    if (t === "dark" || t === "light") return t;
    return window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
  }

  function specFor(fig) {
    if (!fig._payload) fig._payload = JSON.parse(fig.querySelector("script.fig-spec").textContent);
    var payload = fig._payload;
    var spec = JSON.parse(JSON.stringify(payload.specs[theme()]));
    (spec.data || []).forEach(function (d) {
      if (d._shared) { d.values = payload.data[d.name]; delete d._shared; }
    });
    var state = fig._state || {};
    (spec.signals || []).forEach(function (s) {
      if (Object.prototype.hasOwnProperty.call(state, s.name)) s.value = state[s.name];
    });
    return spec;
  }

  function render(fig) {
    var live = fig.querySelector(".fig-live");
    return loadRuntime().then(function (embed) {
      if (fig._view) { fig._view.finalize(); fig._view = null; }
      return embed(live, specFor(fig), { mode: "vega", renderer: "svg", actions: false });
    }).then(function (result) {
      fig._view = result.view;
      live.hidden = false;
      fig.querySelector(".fig-static").hidden = true;
      var controls = fig.querySelector(".fig-controls");
      if (controls) controls.hidden = false;
      if (fig.getAttribute("data-figure-ready") !== "true") {
        fig.setAttribute("data-figure-ready", "true");
        fig.dispatchEvent(new CustomEvent("figure:ready", { bubbles: true }));
      }
    }).catch(function (err) {
      // The static SVG stays visible; say why the live view is missing.
      fig.setAttribute("data-figure-error", String(err && err.message || err));
    });
  }

  function wire(fig) {
    fig._state = {};
    fig.querySelectorAll("select[data-figure-signal]").forEach(function (sel) {
      fig._state[sel.getAttribute("data-figure-signal")] = sel.value;
      sel.addEventListener("change", function () {
        var name = sel.getAttribute("data-figure-signal");
        fig._state[name] = sel.value;
        if (!fig._view) return;
        fig._view.signal(name, sel.value).runAsync().then(function () {
          var n = Number(fig.getAttribute("data-figure-updates") || "0") + 1;
          fig.setAttribute("data-figure-updates", String(n));
          fig.dispatchEvent(new CustomEvent("figure:updated", { bubbles: true, detail: { signal: name, value: sel.value } }));
        });
      });
    });
  }

  function start() {
    var figs = Array.prototype.slice.call(document.querySelectorAll(".fig"))
      .filter(function (f) { return f.querySelector("script.fig-spec"); });
    figs.forEach(wire);
    if ("IntersectionObserver" in window) {
      var io = new IntersectionObserver(function (entries) {
        entries.forEach(function (e) {
          if (e.isIntersecting) { io.unobserve(e.target); render(e.target); }
        });
      }, { rootMargin: "300px 0px" });
      figs.forEach(function (f) { io.observe(f); });
    } else {
      figs.forEach(render);
    }
    function rerender() { figs.forEach(function (f) { if (f._view) render(f); }); }
    new MutationObserver(rerender).observe(document.documentElement, { attributes: true, attributeFilter: ["data-theme"] });
    if (window.matchMedia) {
      var mq = window.matchMedia("(prefers-color-scheme: dark)");
      if (mq.addEventListener) mq.addEventListener("change", rerender);
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
