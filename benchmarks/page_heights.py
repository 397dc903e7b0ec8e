"""Page heights in screens, as a reader first meets each page: every built page (the fixture views
aside) loaded in Debian's Chromium at 1280 x 900 and at 390 x 844, its document height divided by
the viewport's. The same measure as the layout check in the browser suite (tests/site/test_layout.py),
for a before-and-after table of two builds.

    .venv/bin/python benchmarks/page_heights.py                 # builds this checkout into a temporary folder
    .venv/bin/python benchmarks/page_heights.py --site public   # an already built site
    .venv/bin/python benchmarks/page_heights.py --site A --site B   # two builds side by side

Prints one row per page: its height in screens at each width, per site. The pages are served by a
plain static server on 127.0.0.1; nothing is fetched from another host.
"""
from __future__ import annotations

import argparse
import functools
import http.server
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SIZES = ((1280, 900), (390, 844))


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def pages(site: Path) -> list[str]:
    out = []
    for path in sorted(site.rglob("index.html")):
        rel = path.relative_to(site).as_posix()
        if not rel.startswith("source/"):
            out.append(rel[: -len("index.html")])
    return out


def measure(site: Path, browser) -> dict:
    """{(page, width): screens} of one built site."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    heights = {}
    try:
        for width, height in SIZES:
            context = browser.new_context(viewport={"width": width, "height": height})
            for page_path in pages(site):
                page = context.new_page()
                page.goto(base + page_path, wait_until="load")
                heights[(page_path, width)] = page.evaluate("document.documentElement.scrollHeight") / height
                page.close()
            context.close()
    finally:
        server.shutdown()
        server.server_close()
    return heights


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--site", action="append", type=Path, help="a built site (repeat to compare)")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args(argv)
    sites = args.site or []
    if not sites:
        out = Path(tempfile.mkdtemp(prefix="heights-")) / "public"
        subprocess.run([sys.executable, str(REPO / "build.py"), "build", "--out", str(out)], check=True)
        sites = [out]
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=args.chromium, args=["--headless", "--no-sandbox"])
        results = [measure(site.resolve(), browser) for site in sites]
        browser.close()
    every = sorted({p for r in results for p, _ in r})
    head = "page".ljust(44) + "".join(f"{w} px ({i + 1})".rjust(14) for i in range(len(sites)) for w, _ in SIZES)
    print(head)
    for page_path in every:
        cells = "".join((f"{r[(page_path, w)]:.1f}" if (page_path, w) in r else "-").rjust(14)
                        for r in results for w, _ in SIZES)
        print(f"/{page_path}"[:44].ljust(44) + cells)
    for i, site in enumerate(sites):
        print(f"({i + 1}) {site}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
