"""`build.py serve`: build, serve public/ on 127.0.0.1, rebuild when a source file changes, and
tell the open pages: the browser reloads itself after a successful rebuild, and shows a failed
rebuild's errors as an overlay on the page (the last good site stays served underneath).

Every HTML page served gets one extra tag, `<script src="/__serve/live.js">`; that script listens
to `/__serve/events` (server-sent events, same host, nothing else is fetched). Each event is the
state of the latest build: its number, whether it succeeded, its error lines, when it finished.
The served files on disk are never changed: the tag is added to the response only.

A bad edit never stops the server: any exception of the build is reported like a build error.
The port is bound before the first build, so a port in use is reported at once (`PortRefused`).
Besides the source folders, the poll watches git's HEAD, the branch it names and the index: a
commit, a checkout or a `git add` rebuilds too (the registration checks and the footer read git).
"""
from __future__ import annotations

import errno
import functools
import http.server
import json
import os
import stat
import subprocess
import threading
import time
from pathlib import Path
from urllib.parse import unquote, urlsplit

from .errors import BuildError, internal_error

# how often the source folders are looked at: a saved edit waits half of it on average before
# its rebuild starts; one look over this repository takes about 2 ms
POLL_S = 0.1
WATCHED = ("content", "templates", "bundles", "quoted", "registrations", "reproductions", "data")
LIVE_PREFIX = "/__serve/"
LIVE_TAG = b'<script src="/__serve/live.js"></script>'
KEEPALIVE_S = 10.0
IDLE_S = 20.0            # a connection silent this long is closed (more than KEEPALIVE_S: event streams write)
MAX_CONNECTIONS = 64     # served at once: each open page holds one for its event stream
BUSY = (b"HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 29\r\n"
        b"Connection: close\r\n\r\ntoo many connections at once\n")


class PortRefused(BuildError):
    """The server cannot listen where it was asked to (the message is one line)."""


def git_dirs(root: Path) -> tuple[Path, Path] | None:
    """(this work tree's git folder, the repository's common folder), or None outside git."""
    try:
        done = subprocess.run(["git", "-C", str(root), "rev-parse", "--absolute-git-dir", "--git-common-dir"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = done.stdout.splitlines()
    if done.returncode != 0 or len(lines) != 2:
        return None
    own = Path(lines[0])
    common = Path(lines[1]) if Path(lines[1]).is_absolute() else (root / lines[1]).resolve()
    return own, common


def git_snapshot(dirs: tuple[Path, Path] | None) -> dict:
    """What a commit, a checkout or `git add` changes: HEAD's text, and the (mtime, size) of the
    branch file it names, packed-refs and the index."""
    if dirs is None:
        return {}
    own, common = dirs
    state = {}
    try:
        head = (own / "HEAD").read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        head = ""
    state["HEAD"] = head
    watched = [own / "index", common / "packed-refs"]
    if head.startswith("ref: "):
        watched.append(common / head[5:].strip())
    for path in watched:
        try:
            info = path.stat()
            state[str(path)] = (info.st_mtime_ns, info.st_size)
        except OSError:
            state[str(path)] = None
    return state


def snapshot(root: Path, dirs: tuple[Path, Path] | None = None) -> dict:
    """(mtime, size) of every watched file, and git's state: polling needs nothing beyond the
    standard library and behaves the same on every filesystem (watchdog's inotify misses changes
    on some mounts)."""
    state = git_snapshot(dirs)
    for name in WATCHED:
        # os.walk and plain strings: a Path per file made each look five times dearer, and the
        # server looks every POLL_S. Folder links are listed, not entered (as rglob did).
        for top, folders, names in os.walk(os.path.join(root, name)):   # a missing folder yields nothing
            folders[:] = [f for f in folders if f != "__pycache__"]
            for file_name in names:
                path = os.path.join(top, file_name)
                try:
                    info = os.stat(path)
                except OSError:   # removed while it was being listed: seen again next time
                    continue
                if stat.S_ISREG(info.st_mode):
                    state[path] = (info.st_mtime_ns, info.st_size)
    return state


class BuildState:
    """The latest build's outcome, and a condition the event streams wait on."""

    def __init__(self):
        self.cond = threading.Condition()
        self.number = 0
        self.ok = True
        self.errors: list[str] = []
        self.finished = 0.0

    def publish(self, ok: bool, errors: list[str]) -> None:
        """Record a finished build's outcome and wake the pages waiting for it."""
        with self.cond:
            self.number += 1
            self.ok, self.errors, self.finished = ok, errors, time.time()
            self.cond.notify_all()

    def as_json(self) -> bytes:
        """The last build's outcome as the event the live script reads."""
        return json.dumps({"build": self.number, "ok": self.ok, "errors": self.errors,
                           "finished_ms": round(self.finished * 1000)}).encode()


def run_build(build_and_report, state: BuildState) -> None:
    """Run one build and publish its outcome; never raises (a broken edit must not stop `serve`)."""
    try:
        result = build_and_report()
    except (Exception, SystemExit) as exc:   # noqa: BLE001 - build() reports its own errors: a last defence
        lines = [internal_error(exc, "serve").format()]
        print(f"build failed: error: {lines[0]}", flush=True)
        state.publish(False, lines)
        return
    if hasattr(result, "errors"):
        state.publish(not result.errors, result.errors.lines() if result.errors else [])
    else:   # an exit status, as build.py's report returns
        state.publish(result == 0, [] if result == 0 else ["the build failed: see the terminal for its errors"])


class _Server(http.server.ThreadingHTTPServer):
    """A thread per connection, at most `limit` at once; what comes beyond is refused at once."""

    daemon_threads = True

    def __init__(self, address, handler, limit: int):
        super().__init__(address, handler)
        self.slots = threading.BoundedSemaphore(limit)
        port = self.server_address[1]
        # the names a page served from here is reached by (a browser leaves out port 80)
        self.hosts = {f"127.0.0.1:{port}", f"localhost:{port}"} | ({"127.0.0.1", "localhost"} if port == 80 else set())

    def process_request(self, request, client_address):
        if not self.slots.acquire(blocking=False):
            try:
                request.settimeout(1.0)
                request.sendall(BUSY)
            except OSError:
                pass
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


class _Handler(http.server.SimpleHTTPRequestHandler):
    state: BuildState = None   # set per server
    timeout = IDLE_S           # set per server; StreamRequestHandler puts it on the socket

    def log_message(self, format, *args):  # keep the console for build reports
        pass

    def parse_request(self) -> bool:
        """The request line and headers, and a Host naming this server (DNS rebinding)."""
        if not super().parse_request():
            return False
        hosts = self.headers.get_all("Host") or []
        if len(hosts) != 1:
            self.send_error(400, "one Host header is required")
            return False
        if hosts[0].strip().lower() not in self.server.hosts:
            self.send_error(421, "this server answers only 127.0.0.1 and localhost")
            return False
        return True

    def list_directory(self, path):
        """Folders are not listed: a folder without index.html is not a page."""
        self.send_error(404, "File not found")
        return None

    def end_headers(self):
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def do_GET(self):
        path = unquote(urlsplit(self.path).path)
        if path == LIVE_PREFIX + "live.js":
            return self._send(LIVE_JS, "text/javascript; charset=utf-8")
        if path == LIVE_PREFIX + "state":
            return self._send(self.state.as_json(), "application/json")
        if path == LIVE_PREFIX + "events":
            return self._events()
        local = Path(self.translate_path(path))
        if local.is_dir() and path.endswith("/"):
            local = local / "index.html"
        if local.suffix == ".html" and local.is_file():
            try:
                html = local.read_bytes()
            except OSError:
                return super().do_GET()
            return self._send(inject(html), "text/html; charset=utf-8")
        return super().do_GET()

    def _send(self, body: bytes, kind: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _events(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        state, seen = self.state, -1
        try:
            while not getattr(self.server, "stopping", False):
                with state.cond:
                    if state.number == seen:
                        state.cond.wait(KEEPALIVE_S)
                    number, payload = state.number, state.as_json()
                if number != seen:
                    self.wfile.write(b"data: " + payload + b"\n\n")
                    seen = number
                else:
                    self.wfile.write(b": keepalive\n\n")
                self.wfile.flush()
        except OSError:
            pass   # the page went away


def inject(html: bytes) -> bytes:
    """The page with the live-reload tag before </body> (or at the end)."""
    at = html.rfind(b"</body>")
    return html + LIVE_TAG if at < 0 else html[:at] + LIVE_TAG + html[at:]


def serve(root: Path, out: Path, port: int, build_and_report, interval: float = POLL_S,
          stop: threading.Event | None = None) -> None:
    """Listen on 127.0.0.1:`port` (raises PortRefused, before any build), build, then serve and
    rebuild on every change until `stop` is set or Ctrl-C."""
    state = BuildState()
    handler = functools.partial(type("Handler", (_Handler,), {"state": state, "timeout": IDLE_S}), directory=str(out))
    try:
        server = _Server(("127.0.0.1", port), handler, MAX_CONNECTIONS)
    except OSError as exc:
        raise PortRefused(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}"
                          + (" (another server uses it; choose another --port, or 0 for a free one)"
                             if getattr(exc, "errno", None) == errno.EADDRINUSE else "")) from None
    dirs = git_dirs(root)
    run_build(build_and_report, state)
    seen = snapshot(root, dirs)
    host, real_port = server.server_address[:2]
    print(f"Serving {out} at http://{host}:{real_port}/ (Ctrl-C to stop; pages reload after each rebuild)",
          flush=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    stop = stop or threading.Event()
    try:
        while not stop.wait(interval):
            now = snapshot(root, dirs)
            if now != seen:
                seen = now
                print("Change detected: rebuilding", flush=True)
                run_build(build_and_report, state)
                seen = snapshot(root, dirs)
    except KeyboardInterrupt:
        pass
    finally:
        server.stopping = True
        with state.cond:
            state.cond.notify_all()
        server.shutdown()
        server.server_close()


LIVE_JS = r"""// build.py serve: reload after a successful rebuild, show a failed one's errors (site_src/serve.py)
(function () {
  "use strict";
  var first = null;
  function overlay(errors) {
    var box = document.getElementById("serve-errors");
    if (!box) {
      box = document.createElement("div");
      box.id = "serve-errors";
      box.setAttribute("role", "alert");
      box.style.cssText = "position:fixed;inset:0;z-index:2147483647;overflow:auto;padding:2rem;" +
        "background:rgba(20,20,20,.94);color:#fff;font:14px/1.5 ui-monospace,monospace;";
      var title = document.createElement("h2");
      title.textContent = "The rebuild failed: this page is the last good build";
      title.style.cssText = "margin:0 0 1rem;font:bold 18px/1.3 system-ui,sans-serif;color:#ffb4a8;";
      var close = document.createElement("button");
      close.type = "button";
      close.textContent = "Hide";
      close.style.cssText = "float:right;font:inherit;padding:.2rem .8rem;";
      close.addEventListener("click", function () { box.hidden = true; });
      var pre = document.createElement("pre");
      pre.style.cssText = "white-space:pre-wrap;margin:0;";
      box.append(close, title, pre);
      document.body.appendChild(box);
    }
    box.hidden = false;
    box.querySelector("pre").textContent = errors.join("\n");
  }
  function clear() {
    var box = document.getElementById("serve-errors");
    if (box) box.remove();
  }
  var source = new EventSource("/__serve/events");
  source.onmessage = function (event) {
    var state = JSON.parse(event.data);
    if (first === null) first = state.build;
    if (!state.ok) { overlay(state.errors.length ? state.errors : ["the build failed"]); return; }
    if (state.build !== first) { source.close(); location.reload(); return; }
    clear();
  };
})();
""".encode()
