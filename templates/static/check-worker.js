/* The worker behind "Run the check here" (check.js, docs/bundles.md): Pyodide runs here, off the
 * page's thread, so the page stays responsive and its progress bar moves while Python starts.
 *
 * Requests (postMessage {id, op, ...}), each answered by {id, ok, result | error}:
 *   load {base}                  start Pyodide from this site's runtime folder; while it loads,
 *                                {progress: bytes} messages count what has arrived
 *   unpack {zip, name, run}      unpack `zip` (an ArrayBuffer) as /home/pyodide/check-RUN/NAME/:
 *                                {files, folder}
 *   run {folder, args}           run that folder's reproduce.py with `args`: {status, stdout, stderr}
 *   record {folder, status, output}  the reproduction record of that run, as reproduce.py --record
 *                                writes one, marked "# browser run, unsigned" (record.render's note)
 *   sha256 {zip}                 hashlib's sha256, for a page without Web Crypto (not https)
 */

const HARNESS = `
import glob, os, runpy, shutil, sys, traceback, zipfile

BROWSER_NOTE = "browser run, unsigned"   # record.render's note line (docs/honesty.md)

def forget_runs():
    """Remove the folders of earlier runs on this page: only the latest one is kept in memory."""
    for old in glob.glob("/home/pyodide/check-*"):
        shutil.rmtree(old, ignore_errors=True)

def unpack(zip_path, folder):
    """Unpack the zip as \`unzip NAME.zip -d NAME\` does; how many files it holds."""
    with zipfile.ZipFile(zip_path) as archive:
        archive.extractall(folder)
        return len(archive.namelist())

def run(folder, args):
    """Run folder/reproduce.py as \`python -I reproduce.py ARGS\` does from folder: the script's
    own directory is not put on sys.path (the script adds it itself), and the modules it imported
    are forgotten afterwards, so a later run never sees an earlier bundle's rankstats."""
    script = os.path.join(folder, "reproduce.py")
    saved = list(sys.path), list(sys.argv), os.getcwd()
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
        sys.path[:], sys.argv = saved[0], saved[1]
        os.chdir(saved[2])
        forget_modules(folder)
    return status

def record(folder, status, output):
    """The reproduction record of the run just made: the zip's own record.py writes it, naming the
    study as reproduce.py --record does (golden.json's study, else the folder's name), with the
    note a browser's record carries. \`output\` is what the run printed, \`status\` its exit status."""
    saved = list(sys.path)
    sys.path.insert(0, folder)
    try:
        import reproduce   # the zip's own; it imports its record.py from beside itself
        try:
            study = reproduce.Golden(folder).data.get("study") or os.path.basename(folder)
        except reproduce.FixtureError:
            study = os.path.basename(folder)
        kit = reproduce.record
        return kit.render(str(study), kit.folder_files(folder), status, output, note=BROWSER_NOTE)
    finally:
        sys.path[:] = saved
        forget_modules(folder)

def forget_modules(folder):
    for name, module in list(sys.modules.items()):
        if (getattr(module, "__file__", None) or "").startswith(folder + os.sep):
            del sys.modules[name]
`;

let pyodide = null, harness = null;
const out = { stdout: "", stderr: "" };

/* Count the runtime's bytes as they arrive: Pyodide's fetches (the wasm, the standard library,
 * the lock file) as they stream, by reading a clone of each response (the original goes to Pyodide
 * untouched, so the wasm still compiles as it streams); its two JavaScript modules, imported rather
 * than fetched, when Resource Timing lists them. */
function watch(base) {
  const original = self.fetch;
  self.fetch = function (input, init) {
    const promise = original.call(this, input, init);
    const url = new URL(typeof input === "string" || input instanceof URL ? input : input.url, self.location.href);
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
        pump().catch(() => {});
      }, () => {});
    }
    return promise;
  };
  const seen = new Set();
  const observer = typeof PerformanceObserver === "function" ? new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      if (entry.name.startsWith(base) && entry.name.endsWith(".mjs") && !seen.has(entry.name)) {
        seen.add(entry.name);
        self.postMessage({ progress: entry.encodedBodySize || 0 });
      }
    }
  }) : null;
  if (observer) observer.observe({ type: "resource", buffered: true });
  return () => { self.fetch = original; if (observer) observer.disconnect(); };
}

/* What the runtime's files cost, from Resource Timing: their size, and how much of it came over
 * the network (a file the browser had in its cache has a transferSize of 0, or of its headers). */
function cost(base) {
  let size = 0, network = 0;
  for (const entry of performance.getEntriesByType("resource")) {
    if (!entry.name.startsWith(base)) continue;
    size += entry.encodedBodySize || 0;
    network += entry.transferSize > 1000 ? entry.transferSize : 0;
  }
  return { size, network };
}

const ops = {
  async load({ base }) {
    if (pyodide) return { version: pyodide.version, size: 0, network: 0 };
    const stop = watch(base);
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
      harness = loaded.runPython(HARNESS + "\nimport types; types.SimpleNamespace(unpack=unpack, run=run, record=record, forget_runs=forget_runs)");
      pyodide = loaded;
      return { version: loaded.version, ...cost(base) };
    } finally {
      stop();
    }
  },

  unpack({ zip, name, run }) {
    const top = `/home/pyodide/check-${run}`, folder = `${top}/${name}`;
    harness.forget_runs();
    pyodide.FS.mkdirTree(top);
    pyodide.FS.writeFile(`${top}/${name}.zip`, new Uint8Array(zip));
    const files = harness.unpack(`${top}/${name}.zip`, folder);
    pyodide.FS.unlink(`${top}/${name}.zip`);
    return { files, folder };
  },

  run({ folder, args }) {
    out.stdout = ""; out.stderr = "";
    const status = harness.run(folder, pyodide.toPy(args || []));
    return { status, stdout: out.stdout, stderr: out.stderr };
  },

  record({ folder, status, output }) {
    return harness.record(folder, status, output);
  },

  sha256({ zip }) {
    pyodide.FS.writeFile("/tmp/hash-me.zip", new Uint8Array(zip));
    const digest = pyodide.runPython("import hashlib; hashlib.sha256(open('/tmp/hash-me.zip', 'rb').read()).hexdigest()");
    pyodide.FS.unlink("/tmp/hash-me.zip");
    return digest;
  },
};

self.onmessage = async (event) => {
  const { id, op, ...args } = event.data;
  try {
    self.postMessage({ id, ok: true, result: await ops[op](args) });
  } catch (err) {
    self.postMessage({ id, ok: false, error: (err && err.message) || String(err) });
  }
};
