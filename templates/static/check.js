/* "Run the check here" (docs/bundles.md): run a study bundle's own reproduce.py in this browser.
 *
 * site.js imports this module on the first click of a study page's button, and only then; nothing
 * here runs or loads before. One click:
 *   1. fetches the study's zip from this site and hashes it with Web Crypto (SHA-256), shown beside
 *      the sha256 the page prints;
 *   2. meanwhile loads Pyodide (CPython compiled to WebAssembly) in a worker (check-worker.js) from
 *      this site's assets/pyodide/<version>/, once per page (the browser caches its files), with a
 *      progress bar counting its bytes;
 *   3. unpacks the zip into Pyodide's in-memory file system and runs the zip's reproduce.py there
 *      as `python -I reproduce.py` runs it from the unpacked folder: the very files shipped;
 *   4. shows what it printed beside the page's Expected output, line by line, differences marked,
 *      with the time each step took. After a run that reached its verdict (exit status 0 or 1)
 *      the reader may copy its reproduction record, in the format of `reproduce.py --record`,
 *      written by the zip's own record.py and marked "browser run, unsigned".
 * No request goes to another host: the lock file published beside the runtime lists no package,
 * and the package base is this site's own folder.
 *
 * Hooks for tests, on the .bundle-check element: data-check-state ("running", "done", or
 * "error: ..."), data-check-hash ("match" | "mismatch"), data-check-output ("match" | "differs"),
 * data-check-exit (reproduce.py's exit status), data-check-record ("ready").
 */

let worker = null;       // one worker, so one Python, per page
let loading = null;      // the promise of its load
let calls = 0, runs = 0;
const waiting = new Map();
const progressListeners = new Set();

function startWorker() {
  worker = new Worker(new URL("check-worker.js", import.meta.url), { type: "module" });
  worker.onmessage = (event) => {
    const data = event.data;
    if (data.progress !== undefined) { for (const listen of progressListeners) listen(data.progress); return; }
    const pending = waiting.get(data.id);
    waiting.delete(data.id);
    if (pending) (data.ok ? pending.resolve(data.result) : pending.reject(new Error(data.error)));
  };
  worker.onerror = (event) => {
    const error = new Error(event.message || "the check's worker failed to start");
    for (const pending of waiting.values()) pending.reject(error);
    waiting.clear();
  };
}

function call(op, args, transfer) {
  return new Promise((resolve, reject) => {
    const id = ++calls;
    waiting.set(id, { resolve, reject });
    worker.postMessage({ id, op, ...args }, transfer || []);
  });
}

/* The page's one Python: loaded on first use, again only after a failed load. */
function python(base, onBytes) {
  progressListeners.add(onBytes);
  if (!loading) {
    if (!worker) startWorker();
    loading = call("load", { base });
    loading.catch(() => { loading = null; worker.terminate(); worker = null; });
  }
  return loading.finally(() => progressListeners.delete(onBytes));
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "text") node.textContent = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) node.append(child);
  return node;
}

function seconds(ms) {
  return (ms / 1000).toFixed(ms < 10000 ? 2 : 1) + "\u00a0s";
}

function bytes(n) {
  return n.toLocaleString("en-US") + "\u00a0bytes";
}

function hex(buffer) {
  return Array.from(new Uint8Array(buffer), (b) => b.toString(16).padStart(2, "0")).join("");
}

/* One step of the run: a list item that says what is happening, then what happened and its time. */
function step(list, doing) {
  const item = el("li", { "class": "check-step", "data-step-state": "running" }, el("span", { text: doing }));
  list.append(item);
  const started = performance.now();
  return {
    item,
    done(text, state) {
      const took = performance.now() - started;
      item.textContent = "";
      item.append(el("span", { text }), " ", el("span", { "class": "check-time", text: "(" + seconds(took) + ")" }));
      item.setAttribute("data-step-state", state || "ok");
      return took;
    },
  };
}

function lines(text) {
  const all = text.split("\n");
  if (all.length && all[all.length - 1] === "") all.pop();
  return all;
}

/* The run's output against the Expected output, line by line. An equal line is one row ("both");
 * a line that differs gets two rows, the page's and this run's, each saying so in text (for screen
 * readers and print), not by colour alone. One text column keeps the table one output wide. */
function comparison(expected, actual, idBase) {
  const want = lines(expected), got = lines(actual);
  const total = Math.max(want.length, got.length);
  const body = el("tbody");
  const text = (list, i) => el("td", {}, el("code", { text: i < list.length ? list[i] : "(no line)" }));
  let differing = 0;
  for (let i = 0; i < total; i++) {
    if (want[i] === got[i]) {
      body.append(el("tr", {}, el("th", { scope: "row", "class": "num", text: String(i + 1) }),
                     el("td", { "class": "check-same", text: "both" }), text(want, i)));
      continue;
    }
    differing++;
    body.append(
      el("tr", { "class": "check-differs" }, el("th", { scope: "rowgroup", rowspan: "2", "class": "num", text: String(i + 1) }),
         el("td", { "class": "check-mark", text: "page (differs)" }), text(want, i)),
      el("tr", { "class": "check-differs" }, el("td", { "class": "check-mark", text: "this run (differs)" }), text(got, i)));
  }
  const caption = el("caption", { id: idBase + "-diff", text: differing
    ? `${differing} of ${total} lines differ from the Expected output`
    : `All ${want.length} lines equal the Expected output` });
  const head = el("thead", {}, el("tr", {},
    el("th", { scope: "col", text: "line" }),
    el("th", { scope: "col", text: "printed by" }),
    el("th", { scope: "col", text: "text" })));
  const table = el("table", { "class": "data check-diff" }, caption, head, body);
  const wrap = el("div", { "class": "table-wrap", tabindex: "0", role: "region", "aria-labelledby": caption.id }, table);
  return { node: wrap, differing, total };
}

function recordOffer(box, ran, folder, idBase) {
  const wrap = el("div", { "class": "check-record" });
  const note = el("p", { "class": "check-note", id: idBase + "-record-note",
    text: "The record reproduce.py --record writes, made by this zip's own record.py from the run above, " +
          "its first line \u201cbrowser run, unsigned\u201d. The site lists an unsigned record as unverified " +
          "and never counts it; to submit one, sign it with your SSH key as docs/honesty.md says." });
  const button = el("button", { type: "button", "class": "check-record-copy", "aria-describedby": note.id,
                                text: "Copy a reproduction record" });
  const said = el("p", { "class": "check-record-status", role: "status" });
  wrap.append(button, note, said);
  button.addEventListener("click", async () => {
    if (button.getAttribute("aria-disabled") === "true") return;
    button.setAttribute("aria-disabled", "true");
    try {
      const text = await call("record", { folder, status: ran.status, output: ran.stdout });
      let shown = wrap.querySelector("textarea");
      if (!shown) {
        shown = el("textarea", { "class": "check-record-text", readonly: "", rows: "12", "aria-label": "Reproduction record" });
        wrap.append(shown);
      }
      shown.value = text;
      let copied = true;
      try { await navigator.clipboard.writeText(text); } catch (e) { copied = false; }
      said.textContent = copied ? "Record copied to the clipboard; it is also shown below."
                                : "The clipboard is not available here; the record is shown below to copy.";
      box.setAttribute("data-check-record", "ready");
    } catch (err) {
      said.textContent = "The record could not be written: " + ((err && err.message) || err);
    } finally {
      button.removeAttribute("aria-disabled");
    }
  });
  return wrap;
}

const EXIT_MEANS = { 0: "every value within tolerance", 1: "a value disagrees with golden.json",
                     2: "a file is missing or malformed", 3: "an error in the script itself" };

async function check(box, list) {
  const section = box.closest(".bundle") || document;
  const status = box.querySelector(".check-status");
  const results = box.querySelector(".check-results");
  const idBase = box.id || "check";
  const base = new URL(box.getAttribute("data-check-runtime"), location.href).href;
  const zipURL = new URL(box.getAttribute("data-check-zip"), location.href).href;
  const printed = box.getAttribute("data-check-sha256");
  const name = box.getAttribute("data-check-name");
  const total = Number(box.getAttribute("data-check-bytes")) || 0;
  const expectedNode = section.querySelector(".bundle-output samp");
  const expected = expectedNode ? expectedNode.textContent : "";
  const clock = performance.now();

  // Python loads while the zip is fetched and hashed: steps at once, each timed on its own.
  const fetching = step(list, `Fetching ${name}.zip from this site\u2026`);
  const starting = step(list, "Loading Python (Pyodide) from this site\u2026");
  status.textContent = "Running the check: fetching the zip and loading Python.";
  const progress = el("progress", { max: String(total || 1), value: "0", "aria-label": "Python runtime loaded" });
  starting.item.append(" ", progress);
  let arrived = 0;
  const already = loading !== null;
  const loaded = python(base, (n) => { arrived += n; progress.value = Math.min(arrived, total || arrived); }).then((rt) => {
    if (!already) box.setAttribute("data-check-runtime-bytes", String(rt.size));
    starting.done(already ? `Python (Pyodide ${rt.version}) was already loaded on this page.`
      : `Loaded Python (Pyodide ${rt.version}): ${bytes(rt.size)}, ` +
        (rt.network >= rt.size ? "all over the network." : rt.network === 0 ? "all from the browser's cache."
          : `${bytes(rt.network)} of it over the network, the rest from the browser's cache.`));
    return rt;
  });
  loaded.catch(() => {});   // awaited below, where a failure is reported

  const response = await fetch(zipURL, { cache: "no-cache" });
  if (!response.ok) throw new Error(`${name}.zip: HTTP ${response.status}`);
  const zip = await response.arrayBuffer();
  fetching.done(`Fetched ${name}.zip: ${bytes(zip.byteLength)}.`);
  const hashing = step(list, "Computing the zip's sha256\u2026");

  const showHash = (value, how) => {
    const same = value === printed;
    box.setAttribute("data-check-hash", same ? "match" : "mismatch");
    hashing.done("", same ? "ok" : "failed");
    hashing.item.firstChild.append(
      `sha256 of the fetched zip (${how}): `, el("code", { "class": "sha256", text: value }), " ",
      el("strong", { text: same ? "matches the sha256 printed on this page." : "does NOT match the sha256 printed on this page," }),
      same ? "" : " ", same ? "" : el("code", { "class": "sha256", text: printed }));
  };
  if (window.crypto && crypto.subtle) showHash(hex(await crypto.subtle.digest("SHA-256", zip)), "Web Crypto");

  await loaded;
  if (!box.hasAttribute("data-check-hash")) {   // no Web Crypto (neither https nor localhost)
    showHash(await call("sha256", { zip: zip.slice(0) }), "Python's hashlib: Web Crypto needs https");
  }

  let s = step(list, "Unpacking the zip\u2026");
  const unpacked = await call("unpack", { zip, name, run: ++runs }, [zip]);
  s.done(`Unpacked ${unpacked.files} files into ${unpacked.folder} (in this page's memory).`);

  s = step(list, `Running ${name}/reproduce.py\u2026`);
  status.textContent = "Running the check: reproduce.py is running.";
  const ran = await call("run", { folder: unpacked.folder, args: [] });
  box.setAttribute("data-check-exit", String(ran.status));
  s.done(`reproduce.py exited with status ${ran.status} (${EXIT_MEANS[ran.status] || "unexpected"}).`,
         ran.status === 0 ? "ok" : "failed");

  const compared = comparison(expected, ran.stdout, idBase);
  box.setAttribute("data-check-output", compared.differing ? "differs" : "match");
  const verdict = (box.getAttribute("data-check-hash") === "match" ? "The zip is the one this page describes; "
                                                                   : "The zip is NOT the one this page describes; ") +
    (compared.differing ? `its output differs from the Expected output in ${compared.differing} of ${compared.total} lines.`
                        : "its output equals the Expected output, line for line.");
  results.append(el("p", { "class": "check-summary" }, el("strong", { text: verdict }),
                    ` (${seconds(performance.now() - clock)} from the click.)`),
                 compared.node);
  results.append(el("details", { "class": "check-printed" }, el("summary", { text: "What this browser's run printed" }),
                    el("pre", { tabindex: "0" }, el("samp", { text: ran.stdout }))));
  if (ran.stderr) {
    results.append(el("p", { text: "It also wrote to standard error:" }),
                   el("pre", { "class": "check-stderr", tabindex: "0" }, el("samp", { text: ran.stderr })));
  }
  if (ran.status === 0 || ran.status === 1) results.append(recordOffer(box, ran, unpacked.folder, idBase));
  status.textContent = "Check finished. " + verdict;
}

/** Run the check of `box` (a .bundle-check element); a click while it runs is ignored. */
export function run(box) {
  if (box.getAttribute("data-check-state") === "running") return Promise.resolve();
  if (!document.querySelector("link[data-check-css]")) {
    document.head.append(el("link", { rel: "stylesheet", href: new URL("check.css", import.meta.url).href, "data-check-css": "" }));
  }
  const button = box.querySelector(".check-run");
  const results = box.querySelector(".check-results");
  box.setAttribute("data-check-state", "running");
  for (const key of ["data-check-hash", "data-check-output", "data-check-exit", "data-check-record"]) box.removeAttribute(key);
  button.setAttribute("aria-disabled", "true");
  results.textContent = "";
  const list = el("ol", { "class": "check-steps", "aria-label": "Steps of the check" });
  results.append(list);
  return check(box, list).then(() => {
    box.setAttribute("data-check-state", "done");
    button.textContent = "Run the check again";
  }, (err) => {
    const message = (err && err.message) || String(err);
    for (const item of list.querySelectorAll('[data-step-state="running"]')) {
      item.setAttribute("data-step-state", "stopped");
      item.append(" (stopped)");
    }
    box.setAttribute("data-check-state", "error: " + message);
    box.querySelector(".check-status").textContent = "The check could not run: " + message;
  }).finally(() => { button.removeAttribute("aria-disabled"); });
}
