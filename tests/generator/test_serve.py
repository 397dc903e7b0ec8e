"""`serve`: builds, serves public/ on 127.0.0.1, and rebuilds when a source file changes."""
import socket
import threading
import time
import urllib.request

from site_src.serve import serve
from site_src.site import build


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.read().decode()


def test_serve_rebuilds_on_change(site, capsys):
    port = _free_port()
    stop = threading.Event()
    out = site / "public"
    thread = threading.Thread(target=serve, args=(site, out, port, lambda: build(site, out)),
                              kwargs={"interval": 0.1, "stop": stop}, daemon=True)
    thread.start()
    try:
        deadline = time.time() + 120  # builds are slow on a loaded machine
        html = None
        while time.time() < deadline:
            try:
                html = _get(f"http://127.0.0.1:{port}/explainer/")
                break
            except OSError:
                time.sleep(0.1)
        assert html and "Every reference kind" in html
        page = site / "content/explainer.md"
        page.write_text(page.read_text().replace("title: Every reference kind", "title: Edited while serving"))
        while time.time() < deadline and "Edited while serving" not in html:
            time.sleep(0.2)
            html = _get(f"http://127.0.0.1:{port}/explainer/")
        assert "Edited while serving" in html
    finally:
        stop.set()
        thread.join(timeout=10)
    assert f"at http://127.0.0.1:{port}/" in capsys.readouterr().out
