"""Fixtures of the browser suite: the site (built once per session by tests/conftest.py, shared
with the other folders), served on 127.0.0.1, and every page of it visited once per width in
Debian's Chromium (driven by Playwright).

The suite may skip only outside CI, when Chromium, Java or axe-core is missing; with `CI` set it
fails instead. `SITE_DIR=path` runs it against an already built site instead of building one.

Each visit is every page check of that width: the layout check (test_layout.py) in both themes
(the colour scheme switched on the loaded page, not loaded again), axe-core, the figures, the
page's width, its links and one screenshot, to test-artifacts/layout/<width>-<theme>/; the table
of page heights is printed at the end.
"""
from __future__ import annotations

import base64
import functools
import http.server
import json
import os
import shutil
import threading
import time
import types
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from sitebuild import built_pages, html_file   # tests/sitebuild.py, on the path by tests/conftest.py

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
LAYOUT = REPO / "test-artifacts" / "layout"     # one screenshot per page and width, and the heights
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


# --- the site (site_dir: tests/conftest.py) ----------------------------------------------

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


class _Shape(HTMLParser):
    """The kinds of element in a page's body: (tag, classes, role) of each."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.kinds: set[tuple] = set()
        self.body = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.body = self.body or tag == "body"
        if self.body:
            self.kinds.add((tag, " ".join(sorted((attrs.get("class") or "").split())), attrs.get("role") or ""))


def page_shapes(site_dir: Path, pages: list[str]) -> dict[str, list[str]]:
    """{representative: the pages of its shape}: pages built from one template with the same
    blocks (the same kinds of element, by tag, classes and role) form one shape, such as the
    registration pages or the fixture views; its representative is its largest page (the most
    content, so the likeliest to show a problem), the one axe-core is run on."""
    shapes: dict[frozenset, list[str]] = {}
    for path in pages:
        parser = _Shape()
        parser.feed(html_file(site_dir, path).read_text("utf-8"))
        shapes.setdefault(frozenset(parser.kinds), []).append(path)
    return {max(members, key=lambda p: (html_file(site_dir, p).stat().st_size, p)): members
            for members in shapes.values()}


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
    heights: dict = field(default_factory=dict)  # {theme: px}, as a reader first meets it (sections closed)
    layout: dict = field(default_factory=dict)   # {theme: what layout_probe.js found}, sections open
    axe_for: list[str] = field(default_factory=list)   # the pages of its shape axe-core was run for
    status: int | None = None                    # the HTTP status of the page itself
    in_flight: set = field(default_factory=set)  # requests the page has started and not yet ended
    last_activity: float = 0.0                   # when a request last started or ended (time.monotonic)


def _listen(page, visit_of) -> None:
    """Records into `visit_of()` (the visit under way) the page's console errors, failed requests
    and the requests in flight. A request's events count only for the visit that saw it start: in
    a reused tab, a request of the page before cannot fail or answer on the next one's record."""

    def on_console(msg):
        if msg.type == "error":
            loc = msg.location or {}
            visit_of().console_errors.append(f"{msg.text} ({loc.get('url', '')}:{loc.get('lineNumber', '')})")

    def on_request(request):
        visit = visit_of()
        visit.in_flight.add(request)
        visit.last_activity = time.monotonic()

    def on_response(response):
        visit = visit_of()
        if response.status >= 400 and response.request in visit.in_flight:
            visit.failed_requests.append(f"{response.url}: HTTP {response.status}")

    def on_finished(request):
        visit = visit_of()
        visit.in_flight.discard(request)
        visit.last_activity = time.monotonic()

    def on_failed(request):
        visit = visit_of()
        if request in visit.in_flight and request.url not in visit.external_requests:
            visit.failed_requests.append(f"{request.url}: {request.failure}")
        on_finished(request)

    page.on("console", on_console)
    page.on("pageerror", lambda exc: visit_of().console_errors.append(f"uncaught: {exc}"))
    page.on("request", on_request)
    page.on("response", on_response)
    page.on("requestfinished", on_finished)
    page.on("requestfailed", on_failed)


class Recorder:
    """Opens pages in one browser context and records console errors, failed and external
    requests. Requests to any host but 127.0.0.1 are blocked and counted."""

    def __init__(self, browser, base_url: str, viewport: dict, color_scheme: str = "light"):
        self.base_url, self.color_scheme = base_url, color_scheme
        self.context = browser.new_context(viewport=viewport, color_scheme=color_scheme)
        self.context.route("**/*", self._route)
        self.current: Visit | None = None
        self.tab = None   # the one tab `open(reuse=True)` loads pages in

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

    def open(self, path: str, open_sections: bool = True, settle: bool = True, reuse: bool = False):
        """Loads the page; `settle` waits for the network to go quiet too (Visits.visit waits later,
        while it works), `open_sections` opens its collapsed sections. `reuse` loads it in the
        recorder's one tab, which the caller leaves open: a new tab starts a renderer process, about
        0.3 s of a page's visit on this machine (Visits, one visit after another, each left quiet)."""
        visit = Visit(url=self.base_url + path)
        self.current = visit
        if reuse:
            if self.tab is None:
                self.tab = self.context.new_page()
                _listen(self.tab, lambda: self.current)
            page = self.tab
            page.emulate_media(color_scheme=self.color_scheme)   # a visit may have left the other theme
        else:
            page = self.context.new_page()
            _listen(page, lambda: visit)
        response = page.goto(visit.url, wait_until="load")
        visit.status = response.status if response else None
        if settle:
            wait_for_quiet(page, visit)
        # a page's collapsed sections (details.more) hold tables and figures a reader opens: open
        # them, so that every check sees what they hold
        if open_sections:
            page.evaluate(OPEN_SECTIONS)
        page.evaluate(PLACE_DRAWINGS)
        return page, visit

    def close(self):
        self.context.close()


QUIET_S = 0.15        # none in flight, none started or ended for this long: the page has settled
SETTLE_LIMIT_S = 30   # a page still loading after this long fails


def wait_for_quiet(page, visit: Visit) -> None:
    """Wait until no request of the page is in flight and none has started or ended for QUIET_S.
    Playwright's "networkidle" waits for 500 ms without a connection, most of a short page's visit;
    the site's pages start no request on a timer (figures.js places drawings when asked,
    PLACE_DRAWINGS, and Pagefind loads on the search box's focus), so a request they make starts
    while another is in flight or right after the load. A page already quiet (the checks before
    took longer) returns at once. Every request is still seen, and a failed one recorded."""
    started = time.monotonic()
    page.evaluate("0")   # a round trip: Playwright delivers the request events sent before it
    while True:
        now = time.monotonic()
        quiet_for = now - visit.last_activity
        loading = [r for r in visit.in_flight if r.resource_type != "eventsource"]   # `serve`'s stream never ends
        if not loading and quiet_for >= QUIET_S:
            return
        if now - started > SETTLE_LIMIT_S:
            pending = ", ".join(sorted(r.url for r in loading)[:3])
            pytest.fail(f"{visit.url}: requests still in flight after {SETTLE_LIMIT_S} s: {pending}", pytrace=False)
        page.wait_for_timeout(25 if loading else max(25, 1000 * (QUIET_S - quiet_for)))   # a round trip too


def slug(path: str) -> str:
    text = path.strip("/").replace("/", "__").replace(".html", "")
    return text or "home"


def load_axe(page) -> None:
    """Puts axe-core (from node_modules) in the page. Evaluated through the browser's debugging
    protocol, not added as a <script>: the page's Content-Security-Policy (site_src/csp.py)
    refuses inline scripts, and holds for everything else the tests see."""
    page.evaluate(AXE.read_text(encoding="utf-8") + "\n;undefined")


# A fixture's line view (templates/source.html) has a table row per line of the file, thousands on
# the largest, every one alike, and axe-core's time grows with the whole DOM, not with what a rule
# reads: 25 s of a visit's 27 on /source/bundles/planted-v2/key_check.json.html (4,700 lines), 6 s
# even with the rows past the first 200 left out of its context. So axe-core reads a line view with
# its first LINE_ROWS rows in the table (the rest taken out for the run and put back after), and each
# row taken out must be one of those read in everything axe's rules look at (LINE_ROW, for the row
# and each element in it: tag, attributes with the line's number set aside, whether it holds text,
# colours, font, opacity, shadow, display) and have an id no other row has; a row that is not is a
# violation of its own, naming it.
LINE_ROWS = 200
LINE_TABLE_ROWS = "table.lines > tbody > tr"
LINE_ROW = """(tr) => [tr, ...tr.querySelectorAll('*')].map(e => {
    const s = getComputedStyle(e);
    return [e.tagName, ...Array.from(e.attributes, a => a.name + '=' + a.value.replace(/[0-9]+/g, '#')),
            e.textContent.trim() ? 'text' : 'no text', s.color, s.backgroundColor, s.backgroundImage, s.fontFamily,
            s.fontSize, s.fontWeight, s.fontStyle, s.opacity, s.textShadow, s.visibility, s.display].join('|');
}).join(' / ')"""


def inject_axe(page) -> list[dict]:
    """Runs axe-core (from node_modules) in the page; returns its violations of every impact
    (minor and moderate included: issue 27 asks for none at all). A line view's rows past its
    first LINE_ROWS are read as alike to those (above), not by axe-core."""
    load_axe(page)
    result = page.evaluate(
        """async ([rows, selector]) => {
            const row = """ + LINE_ROW + """;
            const lines = Array.from(document.querySelectorAll(selector)), later = lines.slice(rows);
            const read = new Set(lines.slice(0, rows).map(row)), ids = new Set(lines.map(tr => tr.id));
            const unlike = later.filter(tr => !read.has(row(tr)));
            const places = later.map(tr => [tr, tr.parentNode, tr.nextSibling]);
            later.forEach(tr => tr.remove());
            let r;
            try {
                r = await axe.run(document, {resultTypes: ['violations']});
            } finally {
                places.reverse().forEach(([tr, parent, next]) => parent.insertBefore(tr, next));
            }
            const found = r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
                nodes: v.nodes.slice(0, 5).map(n => n.target.join(' ') + ' :: ' + n.failureSummary)}));
            if (unlike.length || ids.size < lines.length) found.push({id: 'line-view-rows-alike', impact: 'serious',
                help: `a line view's rows past the first ${rows} (not read by axe-core) are each like one it read, ids unique`,
                nodes: [`${lines.length - ids.size} repeated id(s)`, ...unlike.slice(0, 4).map(tr => `#${tr.id}: ${row(tr)}`)]});
            return found;
        }""",
        [LINE_ROWS, LINE_TABLE_ROWS],
    )
    return result


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


LAYOUT_PROBE = "\n".join(line for line in (Path(__file__).with_name("layout_probe.js")).read_text().splitlines()
                         if not line.startswith("//"))
LAYOUT_LIMITS = {"text": 11.0, "contrast": 3.0}   # chart text in CSS px as drawn; marks' contrast ratio
SCREENSHOT_SCREENS = 20     # a page's screenshot covers at most this many screens
SOURCE_SCREENS = 2          # a fixture's line view (one template, often thousands of lines): its top
THEMES = ("light", "dark")

_LAYOUT_ROWS: list = []   # (page, width, theme, height in px, screens), from the visits


def _screenshot(page, path: str, viewport: dict, height: int, file: Path) -> None:
    """The page's top (at most SCREENSHOT_SCREENS screens) as a reader first meets it."""
    screens = SOURCE_SCREENS if path.startswith("source/") else SCREENSHOT_SCREENS
    tall = min(height, screens * viewport["height"])
    # the DevTools call itself: Playwright's full-page screenshot resizes the viewport to the
    # page's height and lays the page out again, several times slower on a long page; PNG's
    # fastest compression (optimizeForSpeed): a third less time on every page, a third larger files
    cdp = page.context.new_cdp_session(page)
    data = cdp.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "optimizeForSpeed": True,
                                               "clip": {"x": 0, "y": 0, "width": viewport["width"],
                                                        "height": tall, "scale": 1}})
    cdp.detach()
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_bytes(base64.b64decode(data["data"]))


def _check_page(page, path: str, visit: Visit, viewport: dict, scheme: str, axe_for: list[str] | None) -> None:
    """Every check of one loaded page, in both themes: the other theme is the colour scheme
    switched on this page (the same layout as a fresh load in that theme), not a second load."""
    other = next(t for t in THEMES if t != scheme)
    page.evaluate("document.fonts.ready.then(() => true)")
    # the height a reader first meets, collapsed sections closed, and the screenshot of it
    visit.heights[scheme] = page.evaluate("document.documentElement.scrollHeight")
    visit.screenshot = LAYOUT / f"{viewport['width']}-{scheme}" / f"{slug(path)}.png"
    _screenshot(page, path, viewport, visit.heights[scheme], visit.screenshot)
    page.emulate_media(color_scheme=other)
    visit.heights[other] = page.evaluate("document.documentElement.scrollHeight")
    # every other check with the collapsed sections open: what they hold must hold the layout too
    page.evaluate(OPEN_SECTIONS)
    visit.layout[other] = page.evaluate(LAYOUT_PROBE, LAYOUT_LIMITS)
    page.emulate_media(color_scheme=scheme)
    visit.layout[scheme] = page.evaluate(LAYOUT_PROBE, LAYOUT_LIMITS)
    # every request the page started has ended, none started or ended for QUIET_S (after the work above)
    wait_for_quiet(page, visit)
    visit.links = page.eval_on_selector_all("a[href]", "els => els.map(a => a.href)")
    visit.figures = page.evaluate(FIGURE_PROBE)
    visit.width = page.evaluate(WIDTH_PROBE, viewport["width"])
    if axe_for:
        visit.axe, visit.axe_for = inject_axe(page), axe_for
    for theme in THEMES:
        _LAYOUT_ROWS.append((path, viewport["width"], theme, visit.heights[theme],
                             visit.heights[theme] / viewport["height"]))


WIDTHS = {"desktop": (DESKTOP, "light"), "phone": (PHONE, "dark")}   # viewport, and the theme axe-core reads


class Visits:
    """The session's page loads: each page once per width (`visit`), every check of that width
    made on that load (_check_page) and kept for the tests that read it. A page visited by
    test_browser.py's per-page test is not loaded again by the others."""

    def __init__(self, browser, base_url: str, site_dir: Path):
        self.browser, self.base_url, self.site_dir = browser, base_url, site_dir
        self.pages = built_pages(site_dir)
        self.groups = page_shapes(site_dir, self.pages)
        self.grouped = {member for members in self.groups.values() for member in members}
        self.recorders: dict[str, Recorder] = {}
        self.seen: dict[str, dict[str, Visit]] = {width: {} for width in WIDTHS}

    def _recorder(self, width: str) -> Recorder:
        if width not in self.recorders:
            viewport, scheme = WIDTHS[width]
            if not AXE.is_file():
                missing_tool(f"axe-core at {AXE} (run `npm ci`)")
            folder = LAYOUT / f"{viewport['width']}-{scheme}"
            if folder.is_dir():   # only this run's pages remain
                for old in folder.glob("*.png"):
                    old.unlink()
            self.recorders[width] = Recorder(self.browser, self.base_url, viewport, scheme)
        return self.recorders[width]

    def visit(self, width: str, path: str) -> Visit:
        """The page at this width, loaded and checked once."""
        if path not in self.seen[width]:
            viewport, scheme = WIDTHS[width]
            page, visit = self._recorder(width).open(path, open_sections=False, settle=False, reuse=True)
            # axe-core once per shape of page (a page outside the build: on its own)
            axe_for = self.groups[path] if path in self.groups else None if path in self.grouped else [path]
            _check_page(page, path, visit, viewport, scheme, axe_for)
            self.seen[width][path] = visit
        return self.seen[width][path]

    def all(self, width: str) -> dict[str, Visit]:
        """Every built page at this width, and every page their links reach (a crawl from the
        home page: a link to a page the build did not write is visited and fails there)."""
        queue = ["", *self.pages]
        done: dict[str, Visit] = {}
        while queue:
            path = queue.pop(0)
            if path in done:
                continue
            done[path] = visit = self.visit(width, path)
            for href in visit.links:
                if href.startswith(self.base_url):
                    rel = urlsplit(href).path[len(urlsplit(self.base_url).path):]
                    if (rel.endswith("/") or rel.endswith(".html") or rel == "") and rel not in done:
                        queue.append(rel)
        return done

    def close(self) -> None:
        for recorder in self.recorders.values():
            recorder.close()


@pytest.fixture(scope="session")
def visits(browser, base_url, site_dir):
    """The session's page loads, one per page and width (Visits)."""
    store = Visits(browser, base_url, site_dir)
    yield store
    store.close()


@pytest.fixture(scope="session")
def desktop_visits(visits) -> dict[str, Visit]:
    """Every page at 1280 wide: axe-core and the screenshot in the light scheme, the layout
    check in both."""
    return visits.all("desktop")


@pytest.fixture(scope="session")
def phone_visits(visits) -> dict[str, Visit]:
    """Every page at 390 wide: axe-core and the screenshot in the dark scheme (contrast is
    checked in both themes), the layout check in both."""
    return visits.all("phone")


@pytest.fixture
def new_page(browser, base_url):
    """A fresh desktop page for interaction tests, with external hosts blocked."""
    recorder = Recorder(browser, base_url, DESKTOP)
    yield recorder
    recorder.close()


def pytest_terminal_summary(terminalreporter):
    """The page heights the visits measured, in screens, and where the screenshots are."""
    if not _LAYOUT_ROWS:
        return
    table: dict = {}
    for page, width, scheme, px, screens in _LAYOUT_ROWS:
        table.setdefault(page, {})[(width, scheme)] = screens
    combos = sorted({(w, s) for row in table.values() for w, s in row})
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
        CHROMIUM=CHROMIUM, CHROMIUM_ARGS=CHROMIUM_ARGS, AXE=AXE, SCREENSHOTS=LAYOUT, PHONE=PHONE, DESKTOP=DESKTOP,
        Recorder=Recorder, built_pages=built_pages, java_available=java_available, html_file=html_file,
        page_shapes=page_shapes,
        missing_tool=missing_tool, LAYOUT=LAYOUT, OPEN_SECTIONS=OPEN_SECTIONS, LAYOUT_LIMITS=LAYOUT_LIMITS,
        LAYOUT_PROBE=LAYOUT_PROBE, PLACE_DRAWINGS=PLACE_DRAWINGS,
        slug=slug, load_axe=load_axe, inject_axe=inject_axe, LINE_ROWS=LINE_ROWS,
    )
