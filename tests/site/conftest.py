"""Fixtures of the browser suite: the site built once per session, served on 127.0.0.1, and
every page of it visited once in Debian's Chromium (driven by Playwright).

The suite may skip only outside CI, when Chromium, Java or axe-core is missing; with `CI` set it
fails instead. `SITE_DIR=path` runs it against an already built site instead of building one.

The layout check (test_layout.py) is parametrized by the built site's pages, so the site is built
when that module is collected (`built_site`, once per session; the fixtures use the same build).
Its screenshots and the table of page heights go to test-artifacts/layout/, printed at the end.
"""
from __future__ import annotations

import atexit
import functools
import http.server
import json
import os
import tempfile
import shutil
import subprocess
import sys
import threading
import types
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
AXE = REPO / "node_modules" / "axe-core" / "axe.min.js"
SCREENSHOTS = REPO / "test-artifacts" / "screenshots"
LAYOUT = REPO / "test-artifacts" / "layout"     # the layout check's screenshots and heights
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
LOCAL_HOSTS = {"127.0.0.1"}
OPEN_SECTIONS = "() => document.querySelectorAll('details.more').forEach(d => { d.open = true; })"
# large drawings are files the loader puts in place as a reader scrolls (figures.js, for page
# weight); before printing it places them all, which is what a check of every figure needs
PLACE_DRAWINGS = """async () => {
    window.dispatchEvent(new Event('beforeprint'));
    await Promise.all(Array.from(document.querySelectorAll('.fig-svg-slot')).map(s => s._placing));
}"""


def missing_tool(what: str) -> None:
    """Skip outside CI; in CI a missing browser tool is a failure, never a skip."""
    if os.environ.get("CI"):
        pytest.fail(f"{what} is required in CI", pytrace=False)
    pytest.skip(f"{what} is not available (the suite never skips in CI)")


# --- the site -------------------------------------------------------------------------------

_BUILT: dict = {}


def built_site() -> Path:
    """The site, built once per session by the generator's own command line into a temporary
    folder (removed at exit); raises RuntimeError with the build's output if it fails."""
    given = os.environ.get("SITE_DIR")
    if given:
        return Path(given).resolve()
    if "out" not in _BUILT:
        folder = Path(tempfile.mkdtemp(prefix="site-test-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        out = folder / "public"
        cmd = [sys.executable, str(REPO / "build.py"), "build", "--out", str(out)]
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0 or not (out / "index.html").is_file():
            _BUILT["error"] = (f"site build failed ({' '.join(cmd[1:])}, exit {proc.returncode}):\n"
                               f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
        _BUILT["out"] = out
    if "error" in _BUILT:
        raise RuntimeError(_BUILT["error"])
    return _BUILT["out"]


@pytest.fixture(scope="session")
def site_dir() -> Path:
    """The site, built once by the generator's own command line into a temporary folder."""
    try:
        return built_site()
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass


@pytest.fixture(scope="session")
def base_url(site_dir: Path):
    """http.server on 127.0.0.1, on a free port chosen by the OS."""
    handler = functools.partial(_QuietHandler, directory=str(site_dir))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def built_pages(site_dir: Path) -> list[str]:
    """Every HTML file the build wrote, as a site-relative URL path (clean URLs end in '/')."""
    pages = []
    for path in sorted(site_dir.rglob("*.html")):
        rel = path.relative_to(site_dir).as_posix()
        if rel == "index.html":
            rel = ""
        elif rel.endswith("/index.html"):
            rel = rel[: -len("index.html")]
        pages.append(rel)
    return pages


# --- the browser ----------------------------------------------------------------------------

@pytest.fixture(scope="session")
def browser():
    if not Path(CHROMIUM).exists():
        missing_tool(f"Chromium at {CHROMIUM}")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


@dataclass
class Visit:
    """What one page did while it loaded and sat in the browser."""

    url: str
    console_errors: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)
    external_requests: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    figures: list[dict] = field(default_factory=list)
    axe: list[dict] = field(default_factory=list)
    screenshot: Path | None = None
    width: dict = field(default_factory=dict)    # WIDTH_PROBE: the page's scroll width, what sticks out


class Recorder:
    """Opens pages in one browser context and records console errors, failed and external
    requests. Requests to any host but 127.0.0.1 are blocked and counted."""

    def __init__(self, browser, base_url: str, viewport: dict, color_scheme: str = "light"):
        self.base_url = base_url
        self.context = browser.new_context(viewport=viewport, color_scheme=color_scheme)
        self.context.route("**/*", self._route)
        self.current: Visit | None = None

    def _route(self, route):
        url = route.request.url
        scheme = urlsplit(url).scheme
        host = urlsplit(url).hostname
        if scheme in ("http", "https", "ws", "wss") and host not in LOCAL_HOSTS:
            if self.current is not None:
                self.current.external_requests.append(url)
            route.abort("blockedbyclient")
            return
        route.continue_()

    def open(self, path: str):
        visit = Visit(url=self.base_url + path)
        self.current = visit
        page = self.context.new_page()

        def on_console(msg):
            if msg.type == "error":
                loc = msg.location or {}
                visit.console_errors.append(f"{msg.text} ({loc.get('url', '')}:{loc.get('lineNumber', '')})")

        def on_failed(request):
            if request.url not in visit.external_requests:
                visit.failed_requests.append(f"{request.url}: {request.failure}")

        def on_response(response):
            if response.status >= 400:
                visit.failed_requests.append(f"{response.url}: HTTP {response.status}")

        page.on("console", on_console)
        page.on("pageerror", lambda exc: visit.console_errors.append(f"uncaught: {exc}"))
        page.on("requestfailed", on_failed)
        page.on("response", on_response)
        page.goto(visit.url, wait_until="load")
        page.wait_for_load_state("networkidle")
        # a page's collapsed sections (details.more) hold tables and figures a reader opens: open
        # them, so that every check sees what they hold
        page.evaluate(OPEN_SECTIONS)
        page.evaluate(PLACE_DRAWINGS)
        return page, visit

    def close(self):
        self.context.close()


def slug(path: str) -> str:
    text = path.strip("/").replace("/", "__").replace(".html", "")
    return text or "home"


def load_axe(page) -> None:
    """Puts axe-core (from node_modules) in the page. Evaluated through the browser's debugging
    protocol, not added as a <script>: the page's Content-Security-Policy (site_src/csp.py)
    refuses inline scripts, and holds for everything else the tests see."""
    page.evaluate(AXE.read_text(encoding="utf-8") + "\n;undefined")


def inject_axe(page) -> list[dict]:
    """Runs axe-core (from node_modules) in the page; returns serious and critical violations."""
    load_axe(page)
    result = page.evaluate(
        """async () => {
            const r = await axe.run(document, {resultTypes: ['violations']});
            return r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
                nodes: v.nodes.slice(0, 5).map(n => n.target.join(' ') + ' :: ' + n.failureSummary)}));
        }"""
    )
    return [v for v in result if v["impact"] in ("serious", "critical")]


FIGURE_PROBE = """() => Array.from(document.querySelectorAll('figure')).filter(f => f.querySelector('svg')).map(f => {
    const svgs = Array.from(f.querySelectorAll('svg')).map(s => {
        const r = s.getBoundingClientRect();
        const st = getComputedStyle(s);
        return {w: r.width, h: r.height, shown: st.visibility !== 'hidden' && st.display !== 'none'
                && s.checkVisibility({opacityProperty: true, visibilityProperty: true})};
    });
    return {id: f.id || '(figure without id)', svgs};
})"""


# The page's own width and the first elements reaching past the viewport outside a scroll region
# (pre, a table's wrapper, [data-scroll]): recorded on every visit, so that the phone check needs
# no second load of each page.
WIDTH_PROBE = """(limit) => ({scroll: document.documentElement.scrollWidth,
    culprits: Array.from(document.querySelectorAll('body *'))
        .filter(e => e.getBoundingClientRect().right > limit + 1)
        .filter(e => !e.closest('pre, .table-wrap, [data-scroll]'))
        .slice(0, 3).map(e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '')
        + (e.className && typeof e.className === 'string' ? '.' + e.className.split(' ')[0] : ''))})"""


def visit_all(browser, base_url: str, site_dir: Path, viewport: dict, color_scheme: str,
              tag: str, run_axe: bool) -> dict[str, Visit]:
    """Crawls from the home page, adds every built page, and visits each once."""
    if run_axe and not AXE.is_file():
        missing_tool(f"axe-core at {AXE} (run `npm ci`)")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for old in SCREENSHOTS.glob(f"*-{tag}.png"):  # only this run's pages remain
        old.unlink()
    recorder = Recorder(browser, base_url, viewport, color_scheme)
    queue = [""] + built_pages(site_dir)
    seen: dict[str, Visit] = {}
    try:
        while queue:
            path = queue.pop(0)
            if path in seen:
                continue
            page, visit = recorder.open(path)
            visit.links = page.eval_on_selector_all("a[href]", "els => els.map(a => a.href)")
            for href in visit.links:
                parts = urlsplit(href)
                if not href.startswith(base_url):
                    continue
                rel = parts.path[len(urlsplit(base_url).path):]
                if (rel.endswith("/") or rel.endswith(".html") or rel == "") and rel not in seen:
                    queue.append(rel)
            visit.figures = page.evaluate(FIGURE_PROBE)
            visit.width = page.evaluate(WIDTH_PROBE, viewport["width"])
            if run_axe:
                visit.axe = inject_axe(page)
            visit.screenshot = SCREENSHOTS / f"{slug(path)}-{tag}.png"
            page.screenshot(path=str(visit.screenshot), full_page=True)
            page.close()
            seen[path] = visit
    finally:
        recorder.close()
    return seen


@pytest.fixture(scope="session")
def desktop_visits(browser, base_url, site_dir) -> dict[str, Visit]:
    """Every page at 1280 wide, light scheme, with axe-core."""
    return visit_all(browser, base_url, site_dir, DESKTOP, "light", "desktop", run_axe=True)


@pytest.fixture(scope="session")
def phone_visits(browser, base_url, site_dir) -> dict[str, Visit]:
    """Every page at 390 wide, dark scheme, with axe-core (contrast is checked in both themes)."""
    return visit_all(browser, base_url, site_dir, PHONE, "dark", "phone", run_axe=True)


@pytest.fixture
def new_page(browser, base_url):
    """A fresh desktop page for interaction tests, with external hosts blocked."""
    recorder = Recorder(browser, base_url, DESKTOP)
    yield recorder
    recorder.close()


# --- the layout check (test_layout.py) --------------------------------------------------------

COMBOS = [(390, "light"), (390, "dark"), (1280, "light"), (1280, "dark")]


def pytest_generate_tests(metafunc):
    """test_layout.py runs once per built page and combination of width and theme."""
    if "layout_page" not in metafunc.fixturenames:
        return
    try:
        pages = [p for p in built_pages(built_site()) if p != "404.html"]
    except RuntimeError as exc:   # reported by the tests themselves (site_dir fails with it)
        pages = [f"(build failed: {str(exc).splitlines()[0]})"]
    params = [(width, scheme, page) for width, scheme in COMBOS for page in pages]
    metafunc.parametrize("layout_page", params, ids=[f"{w}-{s}-/{p}" for w, s, p in params])


_LAYOUT_ROWS: list = []   # (page, width, scheme, height in px, screens), from test_layout.py


def record_height(row: tuple) -> None:
    _LAYOUT_ROWS.append(row)


def pytest_terminal_summary(terminalreporter):
    """The page heights the layout check measured, in screens, and where its screenshots are."""
    if not _LAYOUT_ROWS:
        return
    table: dict = {}
    for page, width, scheme, px, screens in _LAYOUT_ROWS:
        table.setdefault(page, {})[(width, scheme)] = screens
    combos = [c for c in COMBOS if any(c in row for row in table.values())]
    tr = terminalreporter
    tr.section("layout check: page heights in screens (1280 x 900, 390 x 844)")
    tr.write_line("page".ljust(48) + "".join(f"{w} {s}".rjust(12) for w, s in combos))
    for page in sorted(table):
        cells = "".join((f"{table[page][c]:.1f}" if c in table[page] else "-").rjust(12) for c in combos)
        tr.write_line(f"/{page}"[:48].ljust(48) + cells)
    LAYOUT.mkdir(parents=True, exist_ok=True)
    (LAYOUT / "heights.json").write_text(json.dumps(
        [{"page": p, "width": w, "scheme": s, "px": px, "screens": round(sc, 2)} for p, w, s, px, sc in _LAYOUT_ROWS],
        indent=1) + "\n")
    tr.write_line(f"screenshots: {LAYOUT}/<width>-<theme>/<page>.png; heights: {LAYOUT / 'heights.json'}")


def java_available() -> bool:
    return shutil.which("java") is not None


@pytest.fixture(scope="session")
def kit():
    """The helpers above, for the test modules (conftest is not importable under importlib mode)."""
    return types.SimpleNamespace(
        CHROMIUM=CHROMIUM, CHROMIUM_ARGS=CHROMIUM_ARGS, AXE=AXE, SCREENSHOTS=SCREENSHOTS, PHONE=PHONE, DESKTOP=DESKTOP,
        Recorder=Recorder, built_pages=built_pages, java_available=java_available,
        missing_tool=missing_tool, LAYOUT=LAYOUT, OPEN_SECTIONS=OPEN_SECTIONS, record_height=record_height,
        slug=slug, load_axe=load_axe,
    )
