"""`build.py serve`: build, serve public/ on 127.0.0.1, and rebuild when a source file changes."""
from __future__ import annotations

import functools
import http.server
import threading
import time
from pathlib import Path

from .errors import internal_error

WATCHED = ("content", "templates", "bundles", "quoted")


def snapshot(root: Path) -> dict:
    """(mtime, size) of every watched file: polling needs nothing beyond the standard library and
    behaves the same on every filesystem (watchdog's inotify misses changes on some mounts)."""
    state = {}
    for name in WATCHED:
        base = root / name
        if base.is_dir():
            for path in base.rglob("*"):
                if path.is_file() and "__pycache__" not in path.parts:
                    stat = path.stat()
                    state[str(path)] = (stat.st_mtime_ns, stat.st_size)
    return state


class _Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # keep the console for build reports
        pass


def _guarded(build_and_report):
    """Run one rebuild; whatever it raises is printed on one line and the server goes on."""
    try:
        build_and_report()
    except Exception as exc:  # build() reports its own errors; this is the last line of defence
        print(f"error: {internal_error(exc, 'serve').format()}", flush=True)


def _snapshot(root: Path) -> dict:
    try:
        return snapshot(root)
    except OSError:   # a file removed while it was being listed: look again next time
        return {}


def serve(root: Path, out: Path, port: int, build_and_report, interval: float = 0.5,
          stop: threading.Event | None = None) -> None:
    _guarded(build_and_report)
    handler = functools.partial(_Handler, directory=str(out))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    host, real_port = server.server_address[:2]
    print(f"Serving {out} at http://{host}:{real_port}/ (Ctrl-C to stop)", flush=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    stop = stop or threading.Event()
    seen = _snapshot(root)
    try:
        while not stop.wait(interval):
            now = _snapshot(root)
            if now != seen:
                seen = now
                print("Change detected: rebuilding", flush=True)
                _guarded(build_and_report)
                seen = _snapshot(root)
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
        server.server_close()
