"""`serve`: builds, serves public/ on 127.0.0.1, and rebuilds when a source file or git's HEAD changes."""
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from generator_helpers import REPO, git
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


def _serve_cli(site, *args, timeout=60):
    return subprocess.run([sys.executable, str(REPO / "build.py"), "--root", str(site), "serve", *args],
                          capture_output=True, text=True, timeout=timeout)


def test_a_port_in_use_fails_at_once_before_any_build(site):
    """Issue 18, case 9: an OSError traceback, after a full build."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _serve_cli(site, "--port", str(port))
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [f"build.py serve: error: cannot listen on 127.0.0.1:{port}: Address already in "
                                        "use (another server uses it; choose another --port, or 0 for a free one)"]
    assert done.stdout == "" and not os.path.lexists(site / "public")       # nothing was built


@pytest.mark.parametrize("port", ["70000", "-1", "80x", "65536"])
def test_a_port_out_of_range_is_one_line(site, port):
    """Issue 18, case 9: `--port 70000` ended in an OverflowError traceback."""
    done = _serve_cli(site, f"--port={port}")
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert "argument --port: " in done.stderr and "is not a port number (0 to 65535" in done.stderr
    assert not os.path.lexists(site / "public")


def _footer(port: int) -> str:
    return re.search(r"Built from commit (\w+)", _get(f"http://127.0.0.1:{port}/")).group(1)


def test_a_commit_rebuilds(site):
    """Issue 18, case 12: `serve` did not notice a commit, so what depends on git (the footer's
    commit, the registration order) went stale until a file changed."""
    port = _free_port()
    stop = threading.Event()
    out = site / "public"
    thread = threading.Thread(target=serve, args=(site, out, port, lambda: build(site, out)),
                              kwargs={"interval": 0.1, "stop": stop}, daemon=True)
    thread.start()
    try:
        deadline = time.time() + 120
        first = None
        while time.time() < deadline and first is None:
            try:
                first = _footer(port)
            except OSError:
                time.sleep(0.1)
        assert first == git(site, "rev-parse", "HEAD").strip()[:12]
        git(site, "commit", "-q", "--allow-empty", "-m", "a commit that changes no file")
        head = git(site, "rev-parse", "HEAD").strip()[:12]
        while time.time() < deadline and _footer(port) != head:
            time.sleep(0.2)
        assert _footer(port) == head
    finally:
        stop.set()
        thread.join(timeout=10)
