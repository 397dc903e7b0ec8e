/* "Run the check here" (docs/bundles.md): run a study bundle's own reproduce.py in this browser.
 *
 * site.js imports this module on the first click of a study page's button, and only then; nothing
 * here runs or loads before. One click:
 *   1. downloads the study's zip from this site (its bytes counted against its size) and hashes it
 *      with Web Crypto (SHA-256), shown beside the sha256 the page prints;
 *   2. meanwhile starts a fresh Python for this run: a worker (check-worker.js) that loads Pyodide
 *      (CPython compiled to WebAssembly) from this site's assets/pyodide/<version>/ (the browser
 *      caches its files), shown as three steps: the download (bytes of the total), the compiling
 *      of the WebAssembly, and CPython's own start-up. Without Web Crypto (plain http from another
 *      host than localhost) that fresh Python hashes the zip, before any of the bundle's code runs;
 *   3. unpacks the zip into that Python's in-memory file system and runs the zip's reproduce.py
 *      there as `python -I reproduce.py` runs it from the unpacked folder: the very files shipped;
 *   4. shows what it printed beside the page's Expected output, line by line, differences marked,
 *      with the time each step took. After a run that reached its verdict (exit status 0 or 1)
 *      the reader may copy its reproduction record, in the format of `reproduce.py --record`,
 *      written by the zip's own record.py and marked "browser run, unsigned".
 * Every run has its own worker, ended when the next run starts, so nothing one bundle's code did
 * to its Python reaches another run. While a run goes on, Stop ends it (and its worker, freeing
 * the core it used); reproduce.py has a time limit (data-check-limit, seconds, set by the build
 * from the bundle's size); a download that receives nothing for STALL_S seconds has failed. Any
 * failure says what failed and what to do, and the button offers to try again, with no reload.
 * No request goes to another host: the lock file published beside the runtime lists no package,
 * the package base is this site's own folder, and the worker runs under the page's
 * Content-Security-Policy.
 *
 * Hooks for tests, on the .bundle-check element: data-check-state ("running", "done",
 * "stopped: ..." or "error: ..."), data-check-hash ("match" | "mismatch"), data-check-output
 * ("match" | "differs"), data-check-exit (reproduce.py's exit status), data-check-record
 * ("ready"), data-check-stall (seconds; overrides STALL_S).
 */

const STALL_S = 60;   // a download with no byte for this long has failed (a lost connection, a hung server)
const EXIT_MEANS = { 0: "every value within tolerance", 1: "a value disagrees with golden.json",
                     2: "a file is missing or malformed", 3: "an error in the script itself" };
const latest = new WeakMap();   // box -> its run in progress, or its last run (whose worker may make the record)

/* A failure the page explains: `message` says what failed and what the reader can do. */
class CheckFailure extends Error {}
/* The run was ended on purpose (Stop, the time limit): not a failure of the site or the bundle. */
class Stopped extends Error {}

/* One worker, one Python, for one run. Every request it has not answered is refused when it ends. */
class Interpreter {
  constructor(listen) {
    const script = new URL("check-worker.js", import.meta.url).href;
    // From a blob: URL, so that the worker runs under this page's Content-Security-Policy: a worker
    // loaded from its own URL takes its policy from that response's headers, which a static host
    // does not send, and the bundle's code could then reach any host.
    const url = URL.createObjectURL(new Blob([`import ${JSON.stringify(script)};\n`], { type: "text/javascript" }));
    this.url = url;
    this.worker = new Worker(url, { type: "module" });
    this.waiting = new Map();
    this.calls = 0;
    this.ended = null;
    this.worker.onmessage = (event) => {
      const data = event.data || {};
      if (data.fatal !== undefined) { this.end(new Error(String(data.fatal))); return; }
      if (data.id === undefined) { listen(data); return; }
      const pending = this.waiting.get(data.id);
      this.waiting.delete(data.id);
      if (pending) (data.ok ? pending.resolve(data.result) : pending.reject(new Error(data.error)));
    };
    this.worker.onerror = (event) => {
      event.preventDefault();
      this.end(new Error(event.message || "the check's worker could not start"));
    };
  }

  call(op, args, transfer) {
    if (this.ended) return Promise.reject(this.ended);
    return new Promise((resolve, reject) => {
      const id = ++this.calls;
      this.waiting.set(id, { resolve, reject });
      this.worker.postMessage({ id, op, ...args }, transfer || []);
    });
  }

  /* End the worker (and the Python in it, whatever it is doing); refuse what it still owed. */
  end(why) {
    if (this.ended) return;
    this.ended = why || new Error("the run was ended");
    this.worker.terminate();
    URL.revokeObjectURL(this.url);
    for (const pending of this.waiting.values()) pending.reject(this.ended);
    this.waiting.clear();
  }
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

function reason(err) {
  return (err && err.message) || String(err);
}

/* One step of the run: a list item that says what is happening, with the seconds it has taken so
 * far (so a long step, CPython's start-up, is seen to be going on), then what happened and its time. */
function step(list, doing) {
  const clock = el("span", { "class": "check-time check-elapsed", text: "" });
  const item = el("li", { "class": "check-step", "data-step-state": "running" }, el("span", { text: doing }), " ", clock);
  list.append(item);
  const started = performance.now();
  const ticking = setInterval(() => {
    if (!item.isConnected || item.getAttribute("data-step-state") !== "running") { clearInterval(ticking); return; }
    clock.textContent = `${Math.round((performance.now() - started) / 1000)}\u00a0s so far`;
  }, 1000);
  return {
    item,
    finished: false,
    done(text, state) {
      this.finished = true;
      clearInterval(ticking);
      const took = performance.now() - started;
      item.textContent = "";
      item.append(el("span", { text }), " ", el("span", { "class": "check-time", text: "(" + seconds(took) + ")" }));
      item.setAttribute("data-step-state", state || "ok");
      return took;
    },
  };
}

/* A progress bar with its words ("1,234 of 5,678 bytes"), inside a step. */
function meter(item, total, label) {
  const bar = el("progress", { max: String(total || 1), value: "0", "aria-label": label });
  const words = el("span", { "class": "check-bytes", text: `0 of ${bytes(total)}` });
  item.append(" ", bar, " ", words);
  let shown = 0;
  return (arrived) => {
    bar.value = Math.min(arrived, total || arrived);
    const now = performance.now();
    if (now - shown > 100 || arrived >= total) {   // words at most ten times a second
      shown = now;
      words.textContent = `${bytes(arrived)} of ${bytes(total)}`;
    }
  };
}

/* A timer that fails when nothing moved for `limit` ms: poke() says something moved. */
function watchdog(limit, onStall) {
  let timer = null;
  const poke = () => { clearTimeout(timer); timer = setTimeout(onStall, limit); };
  poke();
  return { poke, clear: () => clearTimeout(timer) };
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

function recordOffer(box, run, ran, folder, idBase) {
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
      const text = await run.python.call("record", { folder, status: ran.status, output: ran.stdout });
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
      said.textContent = "The record could not be written: " + reason(err) +
        (run.python.ended ? ". Run the check again, then copy the record of that run." : "");
    } finally {
      button.removeAttribute("aria-disabled");
    }
  });
  return wrap;
}

/* The zip, read from this site with its bytes counted; a stall or a lost connection is a
 * CheckFailure that says so. */
async function download(run, url, name, size, list) {
  const fetching = step(list, `Downloading ${name}.zip from this site\u2026`);
  const controller = new AbortController();
  run.onEnd.push(() => controller.abort());
  let stalled = false;
  const dog = watchdog(run.stallMs, () => { stalled = true; controller.abort(); });
  const lost = (err) => {
    if (run.stopped) return run.stopped;
    if (stalled) {
      return new CheckFailure(`Downloading ${name}.zip stalled: nothing arrived from this site for ` +
        `${run.stallMs / 1000} s. Check your connection to this site, then press \u201cTry again\u201d.`);
    }
    return new CheckFailure(`Downloading ${name}.zip from this site failed (${reason(err)}): the connection ` +
      "to the site was lost or the site is not answering. Check that the site is reachable, then press " +
      "\u201cTry again\u201d.");
  };
  try {
    let response;
    try {
      response = await fetch(url, { cache: "no-cache", signal: controller.signal });
    } catch (err) { throw lost(err); }
    if (!response.ok) {
      throw new CheckFailure(`This site answered HTTP ${response.status} for ${name}.zip. Press \u201cTry again\u201d; ` +
        "if it fails again, download the zip with the link below and run it yourself.");
    }
    const show = meter(fetching.item, size || Number(response.headers.get("content-length")) || 0, `${name}.zip downloaded`);
    const parts = [];
    let arrived = 0;
    try {
      const reader = response.body.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        dog.poke();
        parts.push(value);
        arrived += value.length;
        show(arrived);
      }
    } catch (err) { throw lost(err); }
    const zip = new Uint8Array(arrived);
    let at = 0;
    for (const part of parts) { zip.set(part, at); at += part.length; }
    fetching.done(`Downloaded ${name}.zip: ${bytes(arrived)}.`);
    return zip.buffer;
  } finally {
    dog.clear();
  }
}

/* This run's Python: the download of the runtime (bytes of its total), the compiling of its
 * WebAssembly, CPython's start-up, each a step; a stalled download or a failed start is a
 * CheckFailure. Resolves to what the worker's load answered. */
function startPython(run, base, total, list) {
  const python = run.python;
  const downloading = step(list, "Downloading Python (Pyodide) from this site\u2026");
  const show = meter(downloading.item, total, "Python runtime downloaded");
  let arrived = 0, compiled = false, compiling = null, starting = null;
  const dog = watchdog(run.stallMs, () => python.end(new CheckFailure(
    `Downloading Python stalled: nothing arrived from this site for ${run.stallMs / 1000} s. Check your ` +
    "connection to this site, then press \u201cTry again\u201d.")));
  const next = () => {
    if (!downloading.finished && arrived >= total) {
      dog.clear();
      downloading.done(`Downloaded Python: ${bytes(arrived)}.`);
    }
    if (downloading.finished && !compiling) {
      compiling = step(list, "Compiling Python's WebAssembly\u2026");
      compiling.early = compiled;
    }
    if (compiling && !compiling.finished && compiled) {
      compiling.done(compiling.early ? "Compiled Python's WebAssembly while it downloaded." : "Compiled Python's WebAssembly.");
      starting = step(list, "Starting Python\u2026");
    }
  };
  run.listen = (data) => {
    if (data.progress !== undefined) { dog.poke(); arrived += Number(data.progress) || 0; show(arrived); }
    if (data.phase === "compiled") compiled = true;
    next();
  };
  return python.call("load", { base }).then((rt) => {
    arrived = Math.max(arrived, total);
    compiled = true;
    next();
    starting.done(`Started Python (Pyodide ${rt.version}), a fresh one for this run; its ${bytes(rt.size)} came ` +
      (rt.network >= rt.size ? "over the network." : rt.network === 0 ? "from the browser's cache."
        : `${bytes(rt.network)} over the network, the rest from the browser's cache.`));
    return rt;
  }, (err) => {
    if (run.stopped) throw run.stopped;
    if (err instanceof CheckFailure) throw err;
    throw new CheckFailure(`Python (Pyodide) could not start: ${reason(err)}. Check your connection to this ` +
      "site, then press \u201cTry again\u201d (what already arrived is in your browser's cache).");
  }).finally(() => dog.clear());
}

/* A request to the run's Python under the run's time limit (`doing` names it): past the limit, the
 * run is stopped and its worker ended. */
function limited(run, doing, op, args, transfer) {
  let timer = null;
  const over = new Promise((resolve, reject) => {
    timer = setTimeout(() => {
      const stop = new Stopped(`${doing} was still going after ${run.limitS} s, the time limit for this bundle: ` +
        "the run and its Python were ended. Run the check again to give it another go, or run the zip " +
        "yourself with the command above, which has no limit.");
      stop.why = "time limit";
      run.stop(stop);
      reject(stop);
    }, run.limitS * 1000);
  });
  return Promise.race([run.python.call(op, args, transfer), over]).finally(() => clearTimeout(timer));
}

async function check(box, run, list) {
  const section = box.closest(".bundle") || document;
  const results = box.querySelector(".check-results");
  const status = box.querySelector(".check-status");
  const idBase = box.id || "check";
  const base = new URL(box.getAttribute("data-check-runtime"), location.href).href;
  const zipURL = new URL(box.getAttribute("data-check-zip"), location.href).href;
  const printed = box.getAttribute("data-check-sha256");
  const name = box.getAttribute("data-check-name");
  const total = Number(box.getAttribute("data-check-bytes")) || 0;
  const zipSize = Number(box.getAttribute("data-check-zip-bytes")) || 0;
  const expectedNode = section.querySelector(".bundle-output samp");
  const expected = expectedNode ? expectedNode.textContent : "";

  // The zip downloads while this run's Python starts: steps at once, each timed on its own.
  status.textContent = "Running the check: downloading the zip and starting Python.";
  const loaded = startPython(run, base, total, list);
  loaded.catch(() => {});   // awaited below, where a failure is reported
  // a failed start of Python ends the run at once, without waiting for the zip
  const fetched = download(run, zipURL, name, zipSize, list);
  fetched.catch(() => {});
  const zip = await Promise.race([fetched, loaded.then(() => fetched)]);
  const hashing = step(list, "Computing the zip's sha256\u2026");
  const showHash = (value, how) => {
    const same = value === printed;
    box.setAttribute("data-check-hash", same ? "match" : "mismatch");
    hashing.done("", same ? "ok" : "failed");
    hashing.item.firstChild.append(
      `sha256 of the downloaded zip (${how}): `, el("code", { "class": "sha256", text: value }), " ",
      el("strong", { text: same ? "matches the sha256 printed on this page." : "does NOT match the sha256 printed on this page," }),
      same ? "" : " ", same ? "" : el("code", { "class": "sha256", text: printed }));
  };
  if (window.crypto && crypto.subtle) showHash(hex(await crypto.subtle.digest("SHA-256", zip)), "Web Crypto");

  await loaded;
  if (!box.hasAttribute("data-check-hash")) {   // no Web Crypto (neither https nor localhost)
    showHash(await run.python.call("sha256", { zip: zip.slice(0) }),
             "Python's hashlib in this run's fresh Python, before any of the zip's code ran; Web Crypto needs https");
  }

  let s = step(list, "Unpacking the zip\u2026");
  const unpacked = await limited(run, "Unpacking the zip", "unpack", { zip, name }, [zip]);
  s.done(`Unpacked ${unpacked.files} files into ${unpacked.folder} (in this page's memory).`);

  s = step(list, `Running ${name}/reproduce.py (time limit ${run.limitS} s)\u2026`);
  status.textContent = "Running the check: reproduce.py is running.";
  const ran = await limited(run, "reproduce.py", "run", { folder: unpacked.folder, args: [] });
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
                    ` (${seconds(performance.now() - run.started)} from the click.)`),
                 compared.node);
  results.append(el("details", { "class": "check-printed" }, el("summary", { text: "What this browser's run printed" }),
                    el("pre", { tabindex: "0" }, el("samp", { text: ran.stdout }))));
  if (ran.stderr) {
    results.append(el("p", { text: "It also wrote to standard error:" }),
                   el("pre", { "class": "check-stderr", tabindex: "0" }, el("samp", { text: ran.stderr })));
  }
  if (ran.status === 0 || ran.status === 1) results.append(recordOffer(box, run, ran, unpacked.folder, idBase));
  return verdict;
}

/** Run the check of `box` (a .bundle-check element); a click while it runs is ignored. */
export function run(box) {
  if (box.getAttribute("data-check-state") === "running") return Promise.resolve();
  if (!document.querySelector("link[data-check-css]")) {
    document.head.append(el("link", { rel: "stylesheet", href: new URL("check.css", import.meta.url).href, "data-check-css": "" }));
  }
  const previous = latest.get(box);
  if (previous && previous.python) previous.python.end(new Error("a new run started"));
  const button = box.querySelector(".check-run");
  const stopButton = box.querySelector(".check-stop");
  const results = box.querySelector(".check-results");
  const status = box.querySelector(".check-status");
  const current = {
    started: performance.now(),
    stallMs: (Number(box.getAttribute("data-check-stall")) || STALL_S) * 1000,
    limitS: Number(box.getAttribute("data-check-limit")) || 600,
    stopped: null,
    onEnd: [],      // what ends with the run (the zip's download)
    listen: () => {},
    python: null,
    stop(why) {
      if (this.stopped) return;
      this.stopped = why;
      this.finish(why);
    },
    finish(why) {
      for (const hook of this.onEnd.splice(0)) hook();
      if (this.python) this.python.end(why);
    },
  };
  latest.set(box, current);
  box.setAttribute("data-check-state", "running");
  for (const key of ["data-check-hash", "data-check-output", "data-check-exit", "data-check-record"]) box.removeAttribute(key);
  button.setAttribute("aria-disabled", "true");
  results.textContent = "";
  const list = el("ol", { "class": "check-steps", "aria-label": "Steps of the check" });
  results.append(list);
  const onStop = () => {
    const stop = new Stopped(`you pressed Stop after ${seconds(performance.now() - current.started)}, and its Python ` +
      "was ended. Run the check again whenever you like: it starts afresh.");
    stop.why = "by the reader";
    current.stop(stop);
  };
  if (stopButton) {
    stopButton.hidden = false;
    stopButton.addEventListener("click", onStop);
  }
  const going = new Promise((resolve) => {
    current.python = new Interpreter((data) => current.listen(data));
    resolve(check(box, current, list));
  });
  return going.then((verdict) => {
    for (const hook of current.onEnd.splice(0)) hook();
    box.setAttribute("data-check-state", "done");
    status.textContent = "Check finished. " + verdict;
    button.textContent = "Run the check again";
  }, (err) => {
    const failure = current.stopped || err;
    const message = reason(failure);
    current.finish(failure);
    for (const item of list.querySelectorAll('[data-step-state="running"]')) {
      item.setAttribute("data-step-state", "stopped");
      item.append(failure instanceof Stopped ? " (stopped)" : " (failed)");
    }
    if (failure instanceof Stopped) {
      box.setAttribute("data-check-state", "stopped: " + failure.why);
      status.textContent = "The check was stopped: " + message;
      button.textContent = "Run the check again";
    } else {
      box.setAttribute("data-check-state", "error: " + message);
      status.textContent = "The check could not finish. " + message + (failure instanceof CheckFailure ? ""
        : " Press \u201cTry again\u201d; if it fails again, run the zip yourself with the command above.");
      button.textContent = "Try again";
    }
    results.append(el("p", { "class": "check-failure" }, el("strong", { text: status.textContent })));
  }).finally(() => {
    if (stopButton) {
      stopButton.removeEventListener("click", onStop);
      const hadFocus = document.activeElement === stopButton;
      stopButton.hidden = true;
      if (hadFocus) button.focus();
    }
    button.removeAttribute("aria-disabled");
  });
}
