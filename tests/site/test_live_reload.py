"""`build.py serve` in the browser: a successful rebuild reloads the open page within a second, a
failed one shows its errors over the page (naming file and line), and the server outlives it.

The site served is the generator's small fixture repository (tests/generator/fixtures/repo) with
this repository's templates, committed to a fresh git repository; the server is the real command
line, `build.py serve --port 0`, in its own process.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "generator" / "fixtures" / "repo"
RELOAD_WITHIN_MS = 1000


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.org",
                    "-c", "commit.gpgsign=false", *args], check=True, capture_output=True)


@pytest.fixture
def served(tmp_path):
    root = tmp_path / "repo"
    shutil.copytree(FIXTURE, root)
    shutil.copytree(REPO / "templates", root / "templates", ignore=shutil.ignore_patterns("bundle.html"))
    (root / ".gitignore").write_text("/public\n/.public.builds/\n.cache/\n")
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "fixture site")
    log = open(tmp_path / "serve.log", "w+")
    proc = subprocess.Popen([sys.executable, str(REPO / "build.py"), "--root", str(root), "serve", "--port", "0"],
                            cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        deadline = time.time() + 180
        url = None
        while time.time() < deadline and url is None and proc.poll() is None:
            time.sleep(0.2)
            found = re.search(r"at (http://127\.0\.0\.1:\d+/)", (tmp_path / "serve.log").read_text())
            url = found.group(1) if found else None
        assert url, f"serve did not start:\n{(tmp_path / 'serve.log').read_text()[-3000:]}"
        yield root, url, proc, tmp_path / "serve.log"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _wait(page, predicate: str, timeout_s: float = 60.0):
    page.wait_for_function(predicate, timeout=timeout_s * 1000, polling=100)


def test_reload_after_rebuild_and_overlay_on_failure(browser, served, kit):
    root, url, proc, log = served
    recorder = kit.Recorder(browser, url, kit.DESKTOP)
    try:
        page, visit = recorder.open("explainer/")
        assert "Every reference kind" in page.title()
        _wait(page, "() => window.__served === undefined && document.readyState === 'complete'")
        page.evaluate("() => { window.__served = 'before the edit'; }")   # gone after a reload
        source = root / "content" / "explainer.md"
        text = source.read_text()

        source.write_text(text.replace("title: Every reference kind", "title: Edited while serving"))
        _wait(page, "() => document.title.includes('Edited while serving')")
        assert page.evaluate("() => window.__served") is None, "the page changed without a reload"
        state = page.evaluate("() => fetch('/__serve/state').then(r => r.json())")
        assert state["ok"]
        reloaded_ms = page.evaluate("() => performance.timeOrigin")
        assert reloaded_ms - state["finished_ms"] < RELOAD_WITHIN_MS, (reloaded_ms, state)

        # a bad edit: an unknown fixture. The errors appear over the page, naming file and line
        broken = source.read_text().replace("## Line references\n", "## Line references\n\nBad {{ data/missing.json#x }}.\n")
        source.write_text(broken)
        _wait(page, "() => !!document.getElementById('serve-errors')")
        overlay = page.locator("#serve-errors")
        assert overlay.is_visible()
        message = overlay.inner_text()
        assert "content/explainer.md:" in message and "data/missing.json" in message, message
        assert page.get_attribute("#serve-errors", "role") == "alert"
        assert proc.poll() is None, "serve stopped on a bad edit"

        # fixed again: the overlay goes with the reload
        source.write_text(text.replace("title: Every reference kind", "title: Fixed while serving"))
        _wait(page, "() => document.title.includes('Fixed while serving')")
        assert page.locator("#serve-errors").count() == 0
        assert proc.poll() is None
        assert not visit.external_requests, visit.external_requests
        assert not visit.console_errors, visit.console_errors
        page.close()
    finally:
        recorder.close()
    assert "build failed" in log.read_text()


def _listening(pid: int) -> set:
    """(address, port) of every TCP socket process `pid` listens on, as the kernel lists them
    (/proc/net/tcp and tcp6: local address, state 0A = LISTEN, inode), whatever the process printed."""
    import socket
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            found = re.fullmatch(r"socket:\[(\d+)\]", os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            continue
        if found:
            inodes.add(found.group(1))
    out = set()
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            address, port = fields[1].split(":")
            if fields[3] != "0A" or fields[9] not in inodes:
                continue
            raw = bytes.fromhex(address)
            raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))   # each 32-bit word little-endian
            out.add((socket.inet_ntop(family, raw), int(port, 16)))
    return out


def test_serve_binds_to_localhost_only(served):
    """The socket the server really listens on (issue 18, case 17: the test used to check only the
    URL it printed), and nothing else."""
    _, url, proc, _ = served
    if not Path(f"/proc/{proc.pid}/fd").is_dir():
        pytest.fail("this check reads the kernel's socket table in /proc (Linux)")
    port = int(url.rstrip("/").rsplit(":", 1)[1])
    assert _listening(proc.pid) == {("127.0.0.1", port)}
