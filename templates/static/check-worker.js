/* The worker behind "Run the check here" (check.js, docs/bundles.md): Pyodide runs here, off the
 * page's thread, so the page stays responsive, its progress moves while Python starts, and the
 * page can end a run at any moment by ending this worker.
 *
 * One worker is one Python for one run: check.js starts a fresh one for every click and ends it
 * when the next run starts, on Stop, at the time limit, or when a step fails. Nothing a bundle's
 * code changes in its interpreter (a patched hashlib, a replaced print) can reach another run, and
 * the zip's sha256, when Python computes it (a page without Web Crypto), is computed before any of
 * the bundle's code has run here.
 *
 * check.js makes this worker from a blob: URL, so it runs under the page's Content-Security-Policy
 * (templates/base.html): the bundle's code can reach no host but the site itself.
 *
 * Requests (postMessage {id, op, ...}), each answered by {id, ok, result | error}:
 *   load {base}                  start Pyodide from this site's runtime folder; while it loads,
 *                                {progress: bytes} messages count what has arrived, and
 *                                {phase: "compiled"} says the WebAssembly is compiled and
 *                                instantiated (CPython's own start-up follows)
 *   sha256 {zip}                 hashlib's sha256 of `zip`, for a page without Web Crypto (not
 *                                https); refused once the bundle's code has run
 *   unpack {zip, name}           unpack `zip` (an ArrayBuffer) as /home/pyodide/check/NAME/:
 *                                {files, folder}
 *   run {folder, args}           run that folder's reproduce.py with `args`: {status, stdout, stderr}
 *   record {folder, status, output}  the reproduction record of that run, as reproduce.py --record
 *                                writes one, marked "# browser run, unsigned" (record.render's note)
 * An error nobody caught while Pyodide starts (a failed fetch inside its start-up, say) is sent as
 * {fatal: message}: the page then ends this worker and says what failed, rather than waiting for ever.
 */

const HARNESS = `
import os, runpy, sys, traceback, zipfile

BROWSER_NOTE = "browser run, unsigned"   # record.render's note line (docs/honesty.md)

def sha256(path):
    """The file's sha256, read by this interpreter before any of the bundle's code has run in it."""
    import hashlib
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()

def unpack(zip_path, folder):
    """Unpack the zip as \`unzip NAME.zip -d NAME\` does; how many files it holds."""
    with zipfile.ZipFile(zip_path) as archive:
        archive.extractall(folder)
        return len(archive.namelist())

def run(folder, args):
    """Run folder/reproduce.py as \`python -I reproduce.py ARGS\` does from folder: the script's
    own directory is not put on sys.path (the script adds it itself)."""
    script = os.path.join(folder, "reproduce.py")
    os.chdir(folder)
    sys.argv = ["reproduce.py", *args]
    status = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        if isinstance(exc.code, int) or exc.code is None:
            status = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            status = 1
    except BaseException:
        traceback.print_exc()
        status = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    return status

def record(folder, status, output):
    """The reproduction record of the run just made: the zip's own record.py writes it, naming the
    study as reproduce.py --record does (golden.json's study, else the folder's name), with the
    note a browser's record carries. \`output\` is what the run printed, \`status\` its exit status."""
    sys.path.insert(0, folder)
    import reproduce   # the zip's own; it imports its record.py from beside itself
    try:
        study = reproduce.Golden(folder).data.get("study") or os.path.basename(folder)
    except reproduce.FixtureError:
        study = os.path.basename(folder)
    kit = reproduce.record
    return kit.render(str(study), kit.folder_files(folder), status, output, note=BROWSER_NOTE)
`;

const TOP = "/home/pyodide/check";
let pyodide = null, harness = null, ran = false;
const out = { stdout: "", stderr: "" };

function reason(err) {
  return (err && err.message) || String(err);
}

// While Pyodide starts, an error nobody caught means the start has failed and may never settle:
// say so. Later ones come from the bundle's own leftovers (a promise it dropped) and are its business.
// (Reported to the page, which says what failed, rather than left uncaught; after a failed start,
// the rest of that start's failures, on their way to a worker about to be ended, are dropped.)
let loading = false, failed = false;
function uncaught(event, message) {
  if (!loading && !failed) return;
  event.preventDefault();
  if (loading) self.postMessage({ fatal: message });
}
self.addEventListener("error", (event) => uncaught(event, event.message || "an error in the check's worker"));
self.addEventListener("unhandledrejection", (event) => uncaught(event, reason(event.reason)));

/* Count the runtime's bytes as they arrive: Pyodide's fetches (the wasm, the standard library,
 * the lock file) as they stream, by reading a clone of each response (the original goes to Pyodide
 * untouched, so the wasm still compiles as it streams); its two JavaScript modules, imported rather
 * than fetched, when Resource Timing lists them. Say when the WebAssembly is instantiated. */
function watch(base) {
  const original = self.fetch;
  self.fetch = function (input, init) {
    const promise = original.call(this, input, init);
    const url = new URL(typeof input === "string" || input instanceof URL ? input : input.url, base);
    if (url.href.startsWith(base)) {
      promise.then((response) => {
        const copy = response.clone();
        if (!copy.body) return;
        const reader = copy.body.getReader();
        const pump = () => reader.read().then(({ done, value }) => {
          if (done) return undefined;
          self.postMessage({ progress: value.length });
          return pump();
        });
        pump().catch(() => {});   // the original's reader sees the same failure and reports it
      }, () => {});
    }
    return promise;
  };
  const seen = new Set();
  const observer = typeof PerformanceObserver === "function" ? new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      if (entry.name.startsWith(base) && entry.name.endsWith(".mjs") && !seen.has(entry.name)) {
        seen.add(entry.name);
        self.postMessage({ progress: entry.decodedBodySize || entry.encodedBodySize || 0 });
      }
    }
  }) : null;
  if (observer) observer.observe({ type: "resource", buffered: true });
  const wasm = { instantiate: WebAssembly.instantiate, instantiateStreaming: WebAssembly.instantiateStreaming };
  for (const name of Object.keys(wasm)) {
    if (typeof wasm[name] !== "function") continue;
    WebAssembly[name] = function (...args) {
      const made = wasm[name].apply(WebAssembly, args);
      made.then(() => self.postMessage({ phase: "compiled" }), () => {});
      return made;
    };
  }
  return () => {
    self.fetch = original;
    Object.assign(WebAssembly, wasm);
    if (observer) observer.disconnect();
  };
}

/* What the runtime's files cost, from Resource Timing: their size, and how much of it came over
 * the network (a file the browser had in its cache has a transferSize of 0, or of its headers). */
function cost(base) {
  let size = 0, network = 0;
  for (const entry of performance.getEntriesByType("resource")) {
    if (!entry.name.startsWith(base)) continue;
    size += entry.decodedBodySize || entry.encodedBodySize || 0;
    network += entry.transferSize > 1000 ? entry.transferSize : 0;
  }
  return { size, network };
}

const ops = {
  async load({ base }) {
    if (pyodide) throw new Error("this worker's Python is already loaded");
    const stop = watch(base);
    loading = true;
    try {
      const module = await import(base + "pyodide.mjs");
      const loaded = await module.loadPyodide({
        indexURL: base,
        lockFileURL: base + "pyodide-lock.json",
        packageBaseUrl: base,      // never the CDN the npm build names by default
        stdout: () => {}, stderr: () => {},
      });
      const decode = { stdout: new TextDecoder(), stderr: new TextDecoder() };
      for (const stream of ["stdout", "stderr"]) {
        const setter = stream === "stdout" ? "setStdout" : "setStderr";
        loaded[setter]({ write: (buf) => { out[stream] += decode[stream].decode(buf, { stream: true }); return buf.length; } });
      }
      harness = loaded.runPython(HARNESS + "\nimport types; types.SimpleNamespace(sha256=sha256, unpack=unpack, run=run, record=record)");
      pyodide = loaded;
      return { version: loaded.version, ...cost(base) };
    } catch (err) {
      failed = true;
      throw err;
    } finally {
      loading = false;
      stop();
    }
  },

  sha256({ zip }) {
    if (ran) throw new Error("the zip is hashed before its code runs, never after");
    pyodide.FS.mkdirTree("/tmp/check");
    pyodide.FS.writeFile("/tmp/check/hash-me.zip", new Uint8Array(zip));
    const digest = harness.sha256("/tmp/check/hash-me.zip");
    pyodide.FS.unlink("/tmp/check/hash-me.zip");
    return digest;
  },

  unpack({ zip, name }) {
    const folder = `${TOP}/${name}`;
    pyodide.FS.mkdirTree(TOP);
    pyodide.FS.writeFile(`${TOP}/${name}.zip`, new Uint8Array(zip));
    const files = harness.unpack(`${TOP}/${name}.zip`, folder);
    pyodide.FS.unlink(`${TOP}/${name}.zip`);
    return { files, folder };
  },

  run({ folder, args }) {
    ran = true;
    out.stdout = ""; out.stderr = "";
    const status = harness.run(folder, pyodide.toPy(args || []));
    return { status, stdout: out.stdout, stderr: out.stderr };
  },

  record({ folder, status, output }) {
    return harness.record(folder, status, output);
  },
};

self.onmessage = async (event) => {
  const { id, op, ...args } = event.data;
  try {
    if (!Object.prototype.hasOwnProperty.call(ops, op)) throw new Error(`no such request: ${op}`);
    self.postMessage({ id, ok: true, result: await ops[op](args) });
  } catch (err) {
    self.postMessage({ id, ok: false, error: reason(err) });
  }
};
