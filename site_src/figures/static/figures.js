/* Interactive figures, loaded only when a reader interacts. Served from the site itself; fetches
 * nothing elsewhere.
 *
 * Each figure body (.fig) holds its static SVG (one, its colours themed by CSS custom properties),
 * its controls, and a hidden .fig-live container whose data-figure-spec names the figure's Vega
 * spec file (the light spec and the changes that make it dark). Nothing of the live view is
 * fetched with the page: the first time a reader points at, touches or focuses a figure, or
 * changes one of its controls, the spec and the Vega runtime (vega-runtime.js, next to this file,
 * loaded once for the page) are fetched and the figure is rendered live; the static SVG is then
 * hidden. The runtime is Vega alone (window.vega): each view is `new vega.View(vega.parse(spec))`
 * with the SVG renderer, and the tooltip channel shows in a small box of our own (fig-tip).
 *
 * A large static drawing is a file of its own (site_src/figures/assemble.py, for page weight): its
 * .fig-svg-slot[data-figure-svg] keeps the drawing's place and is filled with the file's SVG when
 * the figure comes near the viewport (or before printing), the same markup a small drawing has
 * inline; without script its <noscript> image shows it. Likewise a long data table holds its
 * first rows, and details.fig-data[data-figure-rows] names the file of the others, added when
 * the table is first opened.
 *
 * Hooks for tests: .fig gets data-figure-ready="true" and fires "figure:ready" when its live
 * view is up; each change of a control sets data-figure-updates (a counter) and fires
 * "figure:updated" once the view has re-run. Both events bubble. If the live view cannot come
 * up, the static SVG stays and data-figure-error says why. A filled slot gets
 * data-figure-placed="true", a table whose rows were added data-figure-rows-added="true".
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
        s.onload = function () {
          if (window.vega && window.vega.View && window.vega.parse) resolve(window.vega);
          else reject(new Error(runtimeUrl + " does not define vega.View and vega.parse"));
        };
        s.onerror = function () { reject(new Error("cannot load " + runtimeUrl)); };
        document.head.appendChild(s);
      });
    }
    return loading;
  }

  // Vega's default tooltip only sets the container's title attribute (shown late, never on touch);
  // this shows the tooltip channel's fields at once, as plain text, next to the pointer.
  var tip = null;
  function hideTip() { if (tip) tip.hidden = true; }
  function tooltip(handler, event, item, value) {
    if (value == null || value === "") { hideTip(); return; }
    if (!tip) {
      tip = document.createElement("div");
      tip.className = "fig-tip";
      document.body.appendChild(tip);
    }
    var lines = typeof value === "object" && !Array.isArray(value)
      ? Object.keys(value).map(function (k) { return k + ": " + value[k]; })
      : [String(value)];
    tip.textContent = lines.join("\n");
    tip.hidden = false;
    var p = (event && event.touches && event.touches[0]) || event || {};
    var px = p.clientX || 0, py = p.clientY || 0, gap = 12;
    var x = px + gap, y = py + gap;
    if (x + tip.offsetWidth > window.innerWidth) x = Math.max(0, px - tip.offsetWidth - gap);
    if (y + tip.offsetHeight > window.innerHeight) y = Math.max(0, py - tip.offsetHeight - gap);
    tip.style.left = x + "px";
    tip.style.top = y + "px";
  }

  function theme() {
    var t = document.documentElement.getAttribute("data-theme");
    if (t === "dark" || t === "light") return t;
    return window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
  }

  function loadSpec(fig) {
    if (!fig._spec) {
      var url = fig.querySelector(".fig-live").getAttribute("data-figure-spec");
      fig._spec = fetch(url).then(function (r) {
        if (!r.ok) throw new Error("cannot load " + url + ": HTTP " + r.status);
        return r.json();
      });
    }
    return fig._spec;
  }

  function specFor(payload, state) {
    var wanted = theme();
    var spec = JSON.parse(JSON.stringify(payload.specs[wanted] || payload.specs.light));
    if (wanted === "dark" && !payload.specs.dark) {
      // the dark spec is stored as (path, value) changes to the light one (site_src/figures/themed.py)
      (payload.dark_patch || []).forEach(function (change) {
        var path = change[0], target = spec;
        for (var i = 0; i < path.length - 1; i++) target = target[path[i]];
        target[path[path.length - 1]] = change[1];
      });
    }
    (spec.data || []).forEach(function (d) {
      if (d._shared) { d.values = payload.data[d.name]; delete d._shared; }
    });
    (spec.signals || []).forEach(function (s) {
      if (Object.prototype.hasOwnProperty.call(state, s.name)) s.value = state[s.name];
    });
    return spec;
  }

  function updated(fig, name, value) {
    var n = Number(fig.getAttribute("data-figure-updates") || "0") + 1;
    fig.setAttribute("data-figure-updates", String(n));
    fig.dispatchEvent(new CustomEvent("figure:updated", { bubbles: true, detail: { signal: name, value: value } }));
  }

  function render(fig) {
    var live = fig.querySelector(".fig-live");
    fig._rendering = Promise.all([loadRuntime(), loadSpec(fig)]).then(function (loaded) {
      var vega = loaded[0];
      if (fig._view) { fig._view.finalize(); fig._view = null; hideTip(); }
      live.textContent = "";
      var view = new vega.View(vega.parse(specFor(loaded[1], fig._state)),
        { renderer: "svg", container: live, hover: true, tooltip: tooltip });
      return view.runAsync();
    }).then(function (view) {
      fig._view = view;
      live.hidden = false;
      fig.querySelector(".fig-static").hidden = true;
      if (fig.getAttribute("data-figure-ready") !== "true") {
        fig.setAttribute("data-figure-ready", "true");
        fig.dispatchEvent(new CustomEvent("figure:ready", { bubbles: true }));
      }
    }).catch(function (err) {
      fig.setAttribute("data-figure-error", String(err && err.message || err));
    });
    return fig._rendering;
  }

  function start(fig) {
    if (!fig._rendering) render(fig);
    return fig._rendering;
  }

  function wire(fig) {
    fig._state = {};
    var controls = fig.querySelector(".fig-controls");
    if (controls) controls.hidden = false;  // with script on, the controls are how a reader interacts
    fig.querySelectorAll("select[data-figure-signal]").forEach(function (sel) {
      fig._state[sel.getAttribute("data-figure-signal")] = sel.value;
      sel.addEventListener("change", function () {
        var name = sel.getAttribute("data-figure-signal");
        fig._state[name] = sel.value;
        if (!fig._view) {  // the first interaction: the live view comes up with this choice
          start(fig).then(function () { if (fig._view) updated(fig, name, sel.value); });
          return;
        }
        fig._view.signal(name, sel.value).runAsync().then(function () { updated(fig, name, sel.value); });
      });
    });
    ["pointerenter", "focusin", "touchstart"].forEach(function (type) {
      fig.addEventListener(type, function () { start(fig); }, { once: true, passive: true });
    });
  }

  function fetched(url) {
    return fetch(url).then(function (r) {
      if (!r.ok) throw new Error("cannot load " + url + ": HTTP " + r.status);
      return r.text();
    });
  }

  function failed(el, err) {
    var fig = el.closest(".fig") || el;
    fig.setAttribute("data-figure-error", String(err && err.message || err));
  }

  function place(slot) {
    if (!slot._placing) {
      slot._placing = fetched(slot.getAttribute("data-figure-svg")).then(function (text) {
        var parsed = document.createElement("template");
        parsed.innerHTML = text;
        slot.textContent = "";
        slot.appendChild(parsed.content);
        slot.removeAttribute("style");
        slot.setAttribute("data-figure-placed", "true");
      }).catch(function (err) { failed(slot, err); });
    }
    return slot._placing;
  }

  function bootDrawings() {
    var slots = Array.prototype.slice.call(document.querySelectorAll(".fig-svg-slot[data-figure-svg]"));
    slots.forEach(function (slot) {  // the drawing's box, kept until it arrives
      var w = Number(slot.getAttribute("data-width")), h = Number(slot.getAttribute("data-height"));
      if (w > 0 && h > 0) {
        slot.style.width = w + "px";
        slot.style.maxWidth = slot.closest(".fig-scroll") ? "none" : "100%";
        slot.style.aspectRatio = w + " / " + h;
      }
    });
    window.addEventListener("beforeprint", function () { slots.forEach(place); });
    if (!("IntersectionObserver" in window)) { slots.forEach(place); return; }
    var near = new IntersectionObserver(function (entries) {
      entries.forEach(function (e) {
        if (e.isIntersecting) { near.unobserve(e.target); place(e.target); }
      });
    }, { rootMargin: "50% 0px" });
    slots.forEach(function (slot) { near.observe(slot); });
  }

  function bootRows() {
    document.querySelectorAll("details.fig-data[data-figure-rows]").forEach(function (details) {
      details.addEventListener("toggle", function () {
        if (!details.open || details._rows) return;
        details._rows = fetched(details.getAttribute("data-figure-rows")).then(function (text) {
          details.querySelector("tbody").insertAdjacentHTML("beforeend", text);
          var note = details.querySelector(".fig-more");
          if (note) note.remove();
          details.setAttribute("data-figure-rows-added", "true");
        }).catch(function (err) { failed(details, err); });
      });
    });
  }

  function boot() {
    bootDrawings();
    bootRows();
    var figs = Array.prototype.slice.call(document.querySelectorAll("div.fig[data-figure-kind]"))
      .filter(function (f) { return f.querySelector(".fig-live[data-figure-spec]"); });
    figs.forEach(wire);
    function rerender() { figs.forEach(function (f) { if (f._view) render(f); }); }
    new MutationObserver(rerender).observe(document.documentElement, { attributes: true, attributeFilter: ["data-theme"] });
    if (window.matchMedia) {
      var mq = window.matchMedia("(prefers-color-scheme: dark)");
      if (mq.addEventListener) mq.addEventListener("change", rerender);
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", boot);
  else boot();
})();
