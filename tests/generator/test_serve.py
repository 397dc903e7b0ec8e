"""`serve`: builds, serves public/ on 127.0.0.1, and rebuilds when a source file or git's HEAD changes."""
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
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


# ---------------------------------------------------------------- hostile clients (issue 28, item 12)

@pytest.fixture
def bare_server(tmp_path, monkeypatch):
    """serve() over a hand-made out/ (no build: the builder does nothing), with a short idle time
    and a small connection limit; yields the port."""
    import site_src.serve as serve_module
    monkeypatch.setattr(serve_module, "IDLE_S", 1.0, raising=False)
    monkeypatch.setattr(serve_module, "MAX_CONNECTIONS", 8, raising=False)
    out = tmp_path / "out"
    (out / "assets").mkdir(parents=True)
    (out / "assets" / "site.css").write_text("body {}\n")
    (out / "index.html").write_text("<html><body><p>home</p></body></html>\n")
    port = _free_port()
    stop = threading.Event()
    thread = threading.Thread(target=serve, args=(tmp_path, out, port, lambda: 0),
                              kwargs={"interval": 0.1, "stop": stop}, daemon=True)
    thread.start()
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            _get(f"http://127.0.0.1:{port}/")
            break
        except OSError:
            time.sleep(0.05)
    yield port
    stop.set()
    thread.join(timeout=10)


def _raw(port: int, request: bytes) -> str:
    """The status line the server answers a raw request with."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(request)
        data = b""
        while b"\r\n" not in data:
            chunk = conn.recv(4096)
            if not chunk:
                break
            data += chunk
    return data.split(b"\r\n", 1)[0].decode()


def test_serve_answers_only_its_own_host_names(bare_server):
    """Issue 28, item 12: any Host was answered, so a DNS-rebinding page could read the site."""
    port = bare_server
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}"):
        assert _raw(port, f"GET / HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()).endswith(" 200 OK"), host
    for path in ("/", "/__serve/state", "/__serve/events", "/assets/site.css"):
        for host in (f"evil.example:{port}", "evil.example", "127.0.0.1", f"127.0.0.1.evil.example:{port}",
                     f"localhost:{port + 1}", f"[::1]:{port}"):
            status = _raw(port, f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
            assert " 421 " in status, (path, host, status)
    assert " 400 " in _raw(port, b"GET / HTTP/1.0\r\n\r\n")                                  # no Host at all
    assert " 400 " in _raw(port, f"GET / HTTP/1.1\r\nHost: localhost:{port}\r\nHost: evil.example\r\n\r\n".encode())


def test_serve_lists_no_folder(bare_server):
    """Issue 28, item 12: /assets/ was answered with a listing of the folder."""
    port = bare_server
    with pytest.raises(urllib.error.HTTPError) as refused:
        _get(f"http://127.0.0.1:{port}/assets/")
    assert refused.value.code == 404 and b"site.css" not in refused.value.read()
    assert _get(f"http://127.0.0.1:{port}/assets/site.css") == "body {}\n"


def test_idle_connections_are_bounded_and_closed(bare_server):
    """Issue 28, item 12: 400 idle sockets became 402 threads, none of them ever closed."""
    port = bare_server
    before = threading.active_count()
    idle = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(40)]
    try:
        time.sleep(0.5)
        assert threading.active_count() <= before + 8, threading.active_count() - before
        started = time.time()
        for conn in idle:           # each is closed by the server: at once (beyond the limit) or when idle
            data = conn.recv(4096)
            assert data == b"" or data.startswith(b"HTTP/1.0 503 "), data[:40]
        assert time.time() - started < 8
        assert _get(f"http://127.0.0.1:{port}/").startswith("<html>")      # and the server still serves
    finally:
        for conn in idle:
            conn.close()
