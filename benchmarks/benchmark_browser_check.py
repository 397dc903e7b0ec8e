"""Time "Run the check here" from the click to its result, per study, and count the bytes it fetches.

    .venv/bin/python benchmarks/benchmark_browser_check.py                 # builds the site into a temporary folder
    .venv/bin/python benchmarks/benchmark_browser_check.py --site public [--repeat 2]

Each study page is opened in Debian's Chromium (Playwright), served by a local http.server, and
its button clicked. "cold" is a fresh browser profile: the runtime comes over the network. "warm"
is the same profile on a new page: the browser's cache holds the runtime (as for a reader opening
a second study), though the page still starts its own Python. Beside each, the same bundle's
`python -I reproduce.py` run natively on this machine, and the ratio of the browser's run step to
it. Bytes are the response bodies the server sent after the click (no compression; a file the
browser revalidated or had in its cache costs none); the runtime's share is listed apart. The load average is printed before and after: the machine is
shared, and every time here moves with it.
"""
from __future__ import annotations

import argparse
import functools
import http.server
import io
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--no-first-run"]
DONE = "(box) => { const s = box.getAttribute('data-check-state'); return s && s !== 'running'; }"


class _Counting(http.server.SimpleHTTPRequestHandler):
    """Serves the site and logs the body bytes of every response it sends (a 304 sends none)."""

    sent: list = []

    def copyfile(self, source, outputfile):
        data = source.read()
        outputfile.write(data)
        self.sent.append((urlsplit(self.path).path, len(data)))

    def log_message(self, format, *args):  # noqa: A002
        pass


def study_pages(site: Path) -> list[tuple[str, str]]:
    """(bundle name, page path) of every built page with a check button."""
    found = []
    for html in sorted(site.rglob("index.html")):
        text = html.read_text("utf-8", errors="replace")
        match = re.search(r'class="bundle-check"[^>]*data-check-name="([^"]+)"', text)
        if match:
            rel = html.relative_to(site).as_posix()
            found.append((match.group(1), rel[: -len("index.html")]))
    return found


_PEAK = ("import resource, subprocess, sys; subprocess.run([sys.executable, '-I', 'reproduce.py'], check=True, "
         "capture_output=True); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")


def native_run(zip_path: Path, repeat: int) -> tuple[float, int, int]:
    """(best wall time, peak memory in bytes, unpacked bytes) of `python -I reproduce.py` in the
    unzipped bundle, as the page's build runs it."""
    with tempfile.TemporaryDirectory() as tmp:
        with zipfile.ZipFile(zip_path) as archive:
            archive.extractall(tmp)
            unpacked = sum(info.file_size for info in archive.infolist())
        best = float("inf")
        for _ in range(repeat):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-I", "reproduce.py"], cwd=tmp, check=True, capture_output=True)
            best = min(best, time.perf_counter() - start)
        peak_kb = int(subprocess.run([sys.executable, "-c", _PEAK], cwd=tmp, check=True, capture_output=True,
                                     text=True).stdout)
        return best, peak_kb * 1024, unpacked


def one_run(context, url: str, sent: list) -> dict:
    """Open the page, click, wait for the result: wall time, steps, and the bytes the server sent
    after the click (`sent` is the server's log of (path, body bytes))."""
    page = context.new_page()
    page.goto(url, wait_until="load")
    page.wait_for_load_state("networkidle")
    requests: list = []

    def seen(request):
        requests.append(request.url)

    context.on("request", seen)
    box = page.locator(".bundle-check")
    mark = len(sent)
    start = time.perf_counter()
    box.locator("button.check-run").click()
    page.wait_for_function(DONE, arg=box.element_handle(), timeout=600_000)
    wall = time.perf_counter() - start
    context.remove_listener("request", seen)
    fetched = list(sent[mark:])
    state = box.get_attribute("data-check-state")
    steps = [t.strip() for t in box.locator(".check-step").all_inner_texts()]
    ok = (state == "done" and box.get_attribute("data-check-hash") == "match"
          and box.get_attribute("data-check-output") == "match")
    page.close()
    return {"wall": wall, "ok": ok, "state": state, "steps": steps, "bytes": sum(n for _p, n in fetched),
            "runtime_bytes": sum(n for p, n in fetched if p.startswith("/assets/pyodide/")),
            "other_hosts": [u for u in requests if urlsplit(u).scheme.startswith("http")
                            and urlsplit(u).hostname != "127.0.0.1"]}


def step_seconds(steps: list[str], prefix: str) -> float | None:
    for text in steps:
        if text.startswith(prefix):
            match = re.search(r"\(([\d.]+)\s*s\)\s*$", text)
            return float(match.group(1)) if match else None
    return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--site", type=Path, help="an already built site (default: build one now)")
    parser.add_argument("--repeat", type=int, default=1, help="cold and warm runs per study (default 1)")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        site = args.site
        if site is None:
            site = Path(tmp) / "public"
            subprocess.run([sys.executable, str(REPO / "build.py"), "build", "--out", str(site)], check=True,
                           stdout=subprocess.DEVNULL)
        site = site.resolve()
        studies = study_pages(site)
        if not studies:
            print(f"no page of {site} has a check button (is node_modules/pyodide installed?)", file=sys.stderr)
            return 2
        handler = functools.partial(_Counting, directory=str(site))
        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{httpd.server_address[1]}/"
        print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs)")
        rows, failed = [], []
        with sync_playwright() as pw:
            for name, path in studies:
                native, peak, unpacked = native_run(site / "bundles" / f"{name}.zip", max(args.repeat, 3))
                for attempt in range(args.repeat):
                    with tempfile.TemporaryDirectory() as profile:
                        context = pw.chromium.launch_persistent_context(profile, executable_path=CHROMIUM,
                                                                        args=ARGS, headless=True)
                        try:
                            for kind in ("cold", "warm"):
                                run = one_run(context, base + path, _Counting.sent)
                                run.update(study=name, kind=kind, native=native, peak=peak, unpacked=unpacked,
                                           zip=(site / "bundles" / f"{name}.zip").stat().st_size)
                                rows.append(run)
                                if not run["ok"] or run["other_hosts"]:
                                    failed.append(f"{name} {kind}: {run['state']} {run['other_hosts']}")
                        finally:
                            context.close()
        httpd.shutdown()
    print(f"load average after:  {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print()
    head = (f"{'study':<10} {'run':<5} {'zip bytes':>12} {'click to result':>16} {'load Python':>12} "
            f"{'reproduce.py':>13} {'native':>8} {'ratio':>7} {'native peak':>12} {'bytes fetched':>14} {'of it runtime':>14}")
    print(head)
    for r in rows:
        # starting Python: its download, the compiling of its WebAssembly and CPython's start-up
        load = sum(step_seconds(r["steps"], prefix) or 0
                   for prefix in ("Downloaded Python", "Compiled Python's WebAssembly", "Started Python"))
        check = step_seconds(r["steps"], "reproduce.py exited")
        ratio = f"{check / r['native']:.1f}x" if check else "?"
        print(f"{r['study']:<10} {r['kind']:<5} {r['zip']:>12,} {r['wall']:>15.1f}s {load or 0:>11.1f}s "
              f"{check or 0:>12.2f}s {r['native']:>7.2f}s {ratio:>7} {r['peak'] / 1e6:>9.0f} MB {r['bytes']:>14,} "
              f"{r['runtime_bytes']:>14,}")
    print()
    print("click to result: wall time from the click to the result on the page; ratio: the browser's "
          "reproduce.py step over the native run (best of 3) of the same bundle on this machine; native peak: "
          "that run's peak memory; bytes fetched: response bodies the server sent after the click.")
    for name in dict.fromkeys(r["study"] for r in rows):
        r = next(r for r in rows if r["study"] == name and r["kind"] == "cold")
        check = step_seconds(r["steps"], "reproduce.py exited") or 0
        print(f"{name}: unpacks to {r['unpacked'] / 1e6:.1f} MB; the browser's run took {check / (r['unpacked'] / 1e6):.2f} s "
              f"per unpacked MB, native peak memory {r['peak'] / r['unpacked']:.1f} bytes per unpacked byte")
    if failed:
        print("FAILED: " + "; ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
