"""Page weight: what each built page costs a reader before any interaction, and what its live
figures cost once used. Exits 1 when a page is over 200 kB before interaction or the interactive
runtime is over 600 kB.

    .venv/bin/python benchmarks/benchmark_pages.py            # builds the site into a temporary folder
    .venv/bin/python benchmarks/benchmark_pages.py --site public

"Before interaction" is the page's HTML plus every stylesheet, script, icon and image it names in
its markup (what a browser with scripts on fetches on load; the site sets no other request
going; a <noscript> image is fetched only with scripts off). "On scroll" is the large figure
drawings that are files of their own, each fetched when its figure nears the viewport
(data-figure-svg). "On interaction" adds the figures' spec files and the Vega runtime, fetched
the first time a reader points at a figure, and a long data table's further rows, fetched when
it is opened (data-figure-rows). Sizes are bytes as served by a plain static server (no
compression); the gzip column is what a compressing server would send.
"""
from __future__ import annotations

import argparse
import gzip
import re
import subprocess
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin, urlsplit

REPO = Path(__file__).resolve().parents[1]
STUDY_BUDGET = 200_000
RUNTIME_BUDGET = 600_000
RUNTIME = "assets/vega-runtime.js"


class _Loads(HTMLParser):
    def __init__(self):
        super().__init__()
        self.urls: list[str] = []
        self.specs: list[str] = []
        self.scrolled: list[str] = []
        self.study = False
        self.noscript = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "noscript":
            self.noscript += 1
        if self.noscript:   # a browser with scripts on does not fetch what is in <noscript>
            return
        rel = (a.get("rel") or "").split()
        if tag == "link" and ({"stylesheet", "icon"} & set(rel)) and a.get("href"):
            self.urls.append(a["href"])
        elif tag in ("script", "img") and a.get("src"):
            self.urls.append(a["src"])
        for name in ("data-figure-spec", "data-figure-rows"):
            if a.get(name):
                self.specs.append(a[name])
        if a.get("data-figure-svg"):
            self.scrolled.append(a["data-figure-svg"])
        if tag == "article" and "study" in (a.get("class") or "").split():
            self.study = True

    def handle_endtag(self, tag):
        if tag == "noscript" and self.noscript:
            self.noscript -= 1


def _file(site: Path, page_url: str, ref: str) -> Path:
    path = urlsplit(urljoin(page_url, ref)).path.lstrip("/")
    return site / path


def measure(site: Path) -> tuple[list[dict], int]:
    rows = []
    for html in sorted(site.rglob("index.html")):
        rel = html.relative_to(site).as_posix()
        if rel.startswith("source/"):
            continue
        page_url = "http://site/" + rel
        parser = _Loads()
        text = html.read_bytes()
        parser.feed(text.decode("utf-8"))
        files = [html] + [_file(site, page_url, u) for u in dict.fromkeys(parser.urls)]
        missing = [str(f.relative_to(site)) for f in files if not f.is_file()]
        before = sum(f.stat().st_size for f in files if f.is_file())
        zipped = sum(len(gzip.compress(f.read_bytes(), 9, mtime=0)) for f in files if f.is_file())
        specs = sum(_file(site, page_url, s).stat().st_size for s in dict.fromkeys(parser.specs))
        scrolled = sum(_file(site, page_url, s).stat().st_size for s in dict.fromkeys(parser.scrolled))
        runtime = (site / RUNTIME).stat().st_size if parser.specs and (site / RUNTIME).is_file() else 0
        rows.append({"page": "/" + rel[: -len("index.html")], "html": len(text), "before": before, "gzip": zipped,
                     "scroll": scrolled, "interaction": specs + runtime, "study": parser.study, "missing": missing})
    runtime = (site / RUNTIME).stat().st_size if (site / RUNTIME).is_file() else 0
    return rows, runtime


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--site", type=Path, help="an already built site (default: build one now)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        site = args.site
        if site is None:
            site = Path(tmp) / "public"
            subprocess.run([sys.executable, str(REPO / "build.py"), "build", "--out", str(site)], check=True,
                           stdout=subprocess.DEVNULL)
        rows, runtime = measure(site.resolve())
    width = max(len(r["page"]) for r in rows)
    print(f"{'page'.ljust(width)}  {'html':>9}  {'before interaction':>18}  {'gzip':>8}  {'+ on scroll':>11}  "
          f"{'+ on interaction':>16}  budget")
    over = []
    for r in rows:
        verdict = "ok" if r["before"] <= STUDY_BUDGET else f"OVER by {r['before'] - STUDY_BUDGET:,} B"
        if r["before"] > STUDY_BUDGET:
            over.append(r["page"])
        if r["missing"]:
            verdict += f" (missing: {', '.join(r['missing'])})"
        print(f"{r['page'].ljust(width)}  {r['html']:>9,}  {r['before']:>18,}  {r['gzip']:>8,}  {r['scroll']:>11,}  "
              f"{r['interaction']:>16,}  {verdict}")
    print(f"page budget (every page): {STUDY_BUDGET:,} B before interaction")
    runtime_ok = runtime <= RUNTIME_BUDGET
    print(f"interactive runtime {RUNTIME}: {runtime:,} B (budget {RUNTIME_BUDGET:,} B: "
          f"{'ok' if runtime_ok else f'OVER by {runtime - RUNTIME_BUDGET:,} B'})")
    return 0 if not over and runtime_ok else 1


if __name__ == "__main__":
    sys.exit(main())
