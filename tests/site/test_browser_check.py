""""Run the check here" (templates/static/check.js) in Debian's Chromium, on the built site.

The check runs each committed study's own reproduce.py in Pyodide and must match the page; a zip
the test server alters must show both the hash mismatch and the differing output; nothing of the
check is fetched before the click, and no request leaves the local server; the button and the
results work from the keyboard and carry the roles a screen reader needs; the reproduction record
a run offers is one the build reads as a browser run, unverified and never counted.

All tests share one browser profile on disk, as one reader's browser would: the runtime is
fetched over the network by the first test and comes from the browser's cache after that (the
runtime's load is the slow part; each test still starts its own Python, on its own page).
The time from click to result is measured by benchmarks/benchmark_browser_check.py, not here.
"""
from __future__ import annotations

import functools
import hashlib
import http.server
import io
import json
import re
import threading
import time
import types
import zipfile
from pathlib import Path
from urllib.parse import urlsplit

import pytest

REPO = Path(__file__).resolve().parents[2]
RESULT_TIMEOUT_MS = 120_000   # a ceiling against a hang, not a timing assertion
DONE = """(box) => { const s = box.getAttribute('data-check-state'); return s && s !== 'running'; }"""
_FRONT_BUNDLE = re.compile(r"^bundle:\s*([a-z0-9][a-z0-9_-]*)\s*$", re.M)


def study_pages() -> list[tuple[str, str]]:
    """(bundle, page URL) of every page in content/ that names a bundle."""
    found = []
    for path in sorted((REPO / "content").rglob("*.md")):
        text = path.read_text(encoding="utf-8")
        front = text.split("---", 2)[1] if text.startswith("---") else ""
        match = _FRONT_BUNDLE.search(front)
        if match and (REPO / "bundles" / match.group(1)).is_dir():
            rel = path.relative_to(REPO / "content").with_suffix("").as_posix()
            found.append((match.group(1), "" if rel == "index" else rel + "/"))
    return found


STUDIES = study_pages()


class _AlteringHandler(http.server.SimpleHTTPRequestHandler):
    """Serves the built site, except the paths in `altered`, served with the bytes given there."""

    altered: dict = {}

    def do_GET(self):  # noqa: N802 - the base class's name
        data = self.altered.get(urlsplit(self.path).path)
        if data is None:
            return super().do_GET()
        self.send_response(200)
        self.send_header("Content-Type", "application/zip")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        return None

    def log_message(self, format, *args):  # noqa: A002
        pass


@pytest.fixture(scope="module")
def server(site_dir):
    """The built site on 127.0.0.1, with a switch to alter a served file."""
    handler = type("Handler", (_AlteringHandler,), {"altered": {}})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(site_dir)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/", handler.altered
    httpd.shutdown()
    httpd.server_close()


class Reader:
    """One browser profile on disk; every request is recorded, any to another host is blocked."""

    def __init__(self, context, base_url: str):
        self.context, self.base_url = context, base_url
        self.requests: list[str] = []
        self.other_hosts: list[str] = []
        context.route("**/*", self._route)
        context.on("request", lambda request: self.requests.append(request.url))

    def _route(self, route):
        parts = urlsplit(route.request.url)
        if parts.scheme in ("http", "https", "ws", "wss") and parts.hostname != "127.0.0.1":
            self.other_hosts.append(route.request.url)
            route.abort("blockedbyclient")
            return
        route.continue_()

    def open(self, path: str):
        page = self.context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(f"uncaught: {exc}"))
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
        page.goto(self.base_url + path, wait_until="load")
        page.wait_for_load_state("networkidle")
        return page, errors

    def fetched(self, needle: str) -> list[str]:
        return [url for url in self.requests if needle in url]


@pytest.fixture(scope="module")
def reader(browser, server, site_dir, tmp_path_factory, kit):
    if not (site_dir / "assets" / "pyodide").is_dir():   # the build said why (node_modules/pyodide)
        kit.missing_tool("the Pyodide runtime in node_modules/pyodide (`npm ci` installs it)")
    base_url, _altered = server
    profile = tmp_path_factory.mktemp("chromium-profile")
    context = browser.browser_type.launch_persistent_context(
        str(profile), executable_path=kit.CHROMIUM, args=kit.CHROMIUM_ARGS, headless=True, viewport=kit.DESKTOP)
    try:
        yield Reader(context, base_url)
    finally:
        context.close()


def run_check(page):
    """Click the button and wait for the check's result (not the last run's: its state is cleared
    first, as the click sets "running" only once check.js has been imported)."""
    box = page.locator(".bundle-check")
    box.evaluate("b => b.removeAttribute('data-check-state')")
    box.locator("button.check-run").click()
    handle = box.element_handle()
    page.wait_for_function(DONE, arg=handle, timeout=RESULT_TIMEOUT_MS)
    return box


@pytest.fixture(scope="module")
def smallest(site_dir) -> tuple[str, str]:
    """The study whose zip is smallest: the one the tests of the page's behaviour use."""
    return min(STUDIES, key=lambda study: (site_dir / "bundles" / f"{study[0]}.zip").stat().st_size)


def attrs(box) -> dict:
    return box.evaluate("b => Object.fromEntries(Array.from(b.attributes).filter(a => a.name.startsWith('data-check-'))"
                        ".map(a => [a.name.slice(11), a.value]))")


def test_every_committed_study_has_a_page_to_check():
    assert {name for name, _url in STUDIES} >= {"organism"}, STUDIES


def test_nothing_of_the_check_is_fetched_before_the_click(reader, smallest):
    bundle, url = smallest
    reader.requests.clear()
    page, errors = reader.open(url)
    try:
        button = page.get_by_role("button", name="Run the check here")
        assert button.is_visible(), "site.js did not show the button"
        before = [u for u in reader.requests if "/assets/pyodide/" in u or "/assets/check" in u or u.endswith(".zip")]
        assert before == [], f"fetched before the click: {before}"
        assert not errors, errors
    finally:
        page.close()


def test_a_page_opened_as_a_file_shows_no_button(browser, site_dir, smallest):
    """A study page opened from the folder (file:) cannot fetch its zip: no button is offered."""
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto((site_dir / smallest[1] / "index.html").as_uri(), wait_until="load")
        page.wait_for_function("() => document.querySelector('.theme-toggle') === null || "
                               "!document.querySelector('.theme-toggle').hidden")   # site.js ran
        assert page.locator(".bundle-check").count() == 1
        assert not page.locator(".bundle-check").is_visible()
    finally:
        context.close()


@pytest.mark.parametrize("bundle,url", STUDIES, ids=[name for name, _ in STUDIES])
def test_the_check_of_each_study_completes_and_matches(reader, site_dir, bundle, url):
    reader.requests.clear()
    reader.other_hosts.clear()
    page, errors = reader.open(url)
    try:
        box = run_check(page)
        state = attrs(box)
        assert state.get("state") == "done", state
        assert (state.get("hash"), state.get("output"), state.get("exit")) == ("match", "match", "0"), \
            page.locator(".check-results").inner_text()
        assert box.locator("tr.check-differs").count() == 0
        expected = page.locator(".bundle-output samp").text_content()
        caption = box.locator("table.check-diff caption").inner_text()
        assert caption == f"All {len(expected.splitlines())} lines equal the Expected output", caption
        assert "matches the sha256 printed on this page" in box.inner_text()
        # the runtime came from this site's own versioned folder, and nothing went anywhere else
        runtime = reader.fetched("/assets/pyodide/")
        published = {p.name for p in next((site_dir / "assets" / "pyodide").iterdir()).iterdir()}
        assert runtime and {u.rsplit("/", 1)[1] for u in runtime} <= published, runtime
        assert reader.other_hosts == [], reader.other_hosts
        assert all(urlsplit(u).hostname == "127.0.0.1" for u in reader.requests if urlsplit(u).scheme.startswith("http"))
        assert not errors, errors
    finally:
        page.close()


def altered_zip(original: bytes) -> bytes:
    """The zip with one published rho in golden.json changed (a new, valid zip: the CRCs agree)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(original)) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as target:
        for info in source.infolist():
            data = source.read(info)
            if info.filename == "golden.json":
                golden = json.loads(data)
                dimension = sorted(golden["per_dimension_rho"])[0]
                old = json.dumps(golden["per_dimension_rho"][dimension])
                text = data.decode()
                needle = f'"{dimension}": {old}'
                assert needle in text, needle
                data = text.replace(needle, f'"{dimension}": {golden["per_dimension_rho"][dimension] + 0.25:.6f}', 1).encode()
            target.writestr(info, data)
    return out.getvalue()


@pytest.fixture(scope="module")
def altered_page(reader, server, site_dir, smallest):
    """The smallest study's page, its check run once on a zip the server altered; the next test
    runs it again on the same page, with the real zip (its Python already loaded)."""
    _base, altered = server
    bundle, url = smallest
    zip_path = f"/bundles/{bundle}.zip"
    altered[zip_path] = altered_zip((site_dir / zip_path.lstrip("/")).read_bytes())
    page, _errors = reader.open(url)
    try:
        run_check(page)
    finally:
        del altered[zip_path]
    yield page
    page.close()


def test_an_altered_zip_shows_the_hash_mismatch_and_the_differing_output(altered_page):
    box = altered_page.locator(".bundle-check")
    state = attrs(box)
    assert (state.get("state"), state.get("hash"), state.get("output"), state.get("exit")) == \
        ("done", "mismatch", "differs", "1"), state
    assert box.get_by_text("does NOT match the sha256 printed on this page").is_visible()
    differing = box.locator("tr.check-differs")
    assert differing.count() >= 2 and differing.first.is_visible()
    assert differing.nth(0).locator(".check-mark").inner_text() == "page (differs)"
    assert differing.nth(1).locator(".check-mark").inner_text() == "this run (differs)"
    page_line, run_line = (differing.nth(n).locator("code").inner_text() for n in (0, 1))
    assert page_line != run_line
    assert "disagrees by" in box.locator("details.check-printed samp").text_content()   # the run's own words
    assert "differ from the Expected output" in box.locator("table.check-diff caption").inner_text()


def test_a_second_run_on_the_page_starts_a_fresh_python_and_the_real_zip_matches(altered_page, reader):
    """Every run has its own Python: nothing the altered zip's code did to the first reaches it, and
    the first run's worker is ended. (The runtime comes over the network here: Playwright's request
    routing, which blocks other hosts, turns the browser's cache off.)"""
    box = run_check(altered_page)
    state = attrs(box)
    assert (state.get("hash"), state.get("output"), state.get("exit")) == ("match", "match", "0"), state
    assert "a fresh one for this run" in box.inner_text()
    assert len(altered_page.workers) == 1, "the first run's worker was not ended"


def test_keyboard_and_screen_reader_use_and_the_record(reader, kit, smallest, site_dir, tmp_path):
    bundle, url = smallest
    page, errors = reader.open(url)
    try:
        expected = page.locator(".bundle-output samp").text_content()
        assert page.get_by_role("button", name="Run the check here").count() == 1
        button = page.locator(".bundle-check button.check-run")
        description = page.locator("#" + button.get_attribute("aria-describedby"))
        assert "reproduce.py" in description.inner_text()
        status = page.locator(".bundle-check .check-status[role=status]")
        assert status.count() == 1, "the live region must exist before anything is announced in it"
        # Tab from the command above reaches the button; Enter starts the check
        page.locator(".bundle-command").focus()
        page.keyboard.press("Tab")
        assert page.evaluate("document.activeElement.classList.contains('check-run')")
        page.keyboard.press("Enter")
        page.wait_for_function("() => document.querySelector('.bundle-check').getAttribute('data-check-state') === 'running'")
        assert button.get_attribute("aria-disabled") == "true"
        assert page.evaluate("document.activeElement.classList.contains('check-run')"), "focus left the button"
        box = page.locator(".bundle-check")
        page.wait_for_function(DONE, arg=box.element_handle(), timeout=RESULT_TIMEOUT_MS)
        assert attrs(box).get("output") == "match"
        assert status.inner_text().startswith("Check finished. The zip is the one this page describes")
        assert button.get_attribute("aria-disabled") is None
        assert page.get_by_role("button", name="Run the check again").is_visible()
        # the result table is a labelled region the keyboard reaches next
        page.keyboard.press("Tab")
        focused = page.evaluate("[document.activeElement.getAttribute('role'), document.activeElement.getAttribute('aria-labelledby')]")
        assert focused[0] == "region" and focused[1], focused
        assert page.get_by_role("region", name=re.compile("lines equal the Expected output")).is_visible()
        assert page.get_by_role("table").filter(has=page.locator("caption", has_text="Expected output")).count() == 1
        # then the run's whole output (folded), then the record's button; Enter writes the record,
        # shown (and copied where the browser allows)
        page.keyboard.press("Tab")
        assert page.evaluate("document.activeElement.textContent") == "What this browser's run printed"
        page.keyboard.press("Tab")
        assert page.evaluate("document.activeElement.textContent") == "Copy a reproduction record"
        page.keyboard.press("Enter")
        page.wait_for_function("() => document.querySelector('.bundle-check').getAttribute('data-check-record') === 'ready'",
                               timeout=RESULT_TIMEOUT_MS)
        assert page.locator(".check-record [role=status]").inner_text().startswith(("Record copied", "The clipboard"))
        record_text = page.get_by_role("textbox", name="Reproduction record").input_value()
        if not kit.AXE.is_file():
            kit.missing_tool(f"axe-core at {kit.AXE} (run `npm ci`)")
        kit.load_axe(page)
        violations = page.evaluate("""async () => (await axe.run(document.querySelector('.bundle-check'),
            {resultTypes: ['violations']})).violations.filter(v => ['serious', 'critical'].includes(v.impact))
            .map(v => v.id + ': ' + v.nodes.map(n => n.target.join(' ')).join(', '))""")
        assert violations == [], violations
        # after a run, the results fit a phone's width (wide lines scroll inside their own box)
        page.set_viewport_size(kit.PHONE)
        assert page.evaluate("document.documentElement.scrollWidth") <= kit.PHONE["width"] + 1
        assert not errors, errors
    finally:
        page.close()
    check_browser_record(record_text, bundle, expected, site_dir, tmp_path)


def check_browser_record(text: str, bundle: str, expected: str, site_dir: Path, tmp_path: Path) -> None:
    """The browser's record, read as the build reads records: well formed, its checksum intact,
    marked as a browser run, and listed as unverified (unsigned), never counted."""
    from bundle_kit import record as kit_record
    from site_src.honesty import reproductions
    from site_src.honesty.yamlfile import load_record

    assert text.startswith("# browser run, unsigned\n# A reproduction record, written by `python reproduce.py --record`.")
    above, written, _line = kit_record.split_checksum(text)
    assert written == kit_record.checksum(above)
    path = tmp_path / "reproductions" / bundle / "browser.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(text, encoding="utf-8")
    doc = load_record(path, f"reproductions/{bundle}/browser.yaml")
    reproductions.validate(doc, bundle)
    assert doc.data["exit_status"] == 0 and doc.data["output"] == expected
    assert doc.data["platform"].startswith("Emscripten"), doc.data["platform"]   # CPython in WebAssembly
    with zipfile.ZipFile(site_dir / "bundles" / f"{bundle}.zip") as archive:
        files = [types.SimpleNamespace(name=i.filename, sha256=hashlib.sha256(archive.read(i)).hexdigest())
                 for i in archive.infolist()]
    served = types.SimpleNamespace(files=files, expected_output=expected)
    listed = reproductions.classify(doc, served, machines=set())
    assert listed.status == reproductions.UNVERIFIED and listed.claims == reproductions.REPRODUCED, listed.status
    assert not listed.independent


# ---------------------------------------------------------------- a bundle that tries it on

def with_script_prefix(original: bytes, code: str) -> bytes:
    """The zip with `code` run first by its reproduce.py (right after its __future__ import)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(original)) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as target:
        for info in source.infolist():
            data = source.read(info)
            if info.filename == "reproduce.py":
                head = b"from __future__ import annotations\n"
                assert head in data
                data = data.replace(head, head + code.encode() + b"\n", 1)
            target.writestr(info, data)
    return out.getvalue()


@pytest.fixture
def serve_altered(server, site_dir, smallest):
    """serve_altered(code): serve the smallest study's zip altered by `with_script_prefix(code)`,
    until the test ends or serve_altered(None)."""
    _base, altered = server
    path = f"/bundles/{smallest[0]}.zip"

    def alter(code: str | None) -> None:
        if code is None:
            altered.pop(path, None)
        else:
            altered[path] = with_script_prefix((site_dir / path.lstrip("/")).read_bytes(), code)

    yield alter
    altered.pop(path, None)


def workers_ended(page) -> bool:
    """Whether the page's workers are all gone (Playwright hears of an ended worker a moment later)."""
    for _ in range(50):
        if not page.workers:
            return True
        page.wait_for_timeout(100)
    return False


def hash_line(box) -> str:
    return box.locator(".check-step", has_text="sha256 of the downloaded zip").inner_text()


def test_without_web_crypto_a_zip_cannot_vouch_for_itself_on_a_second_run(browser, server, kit, smallest,
                                                                           serve_altered):
    """Served over plain http from a host that is not localhost, the page has no Web Crypto and
    Python hashes the zip. The altered zip's reproduce.py replaces hashlib's sha256 with one that
    answers the printed hash: the second click must not believe it (each run has a fresh Python,
    which hashes the zip before any of the zip's code runs)."""
    bundle, url = smallest
    base_url, _altered = server
    port = urlsplit(base_url).port
    box_attr = "document.querySelector('.bundle-check').getAttribute('data-check-sha256')"
    chromium = browser.browser_type.launch(executable_path=kit.CHROMIUM, headless=True,
                                           args=[*kit.CHROMIUM_ARGS, "--host-resolver-rules=MAP check.test 127.0.0.1"])
    try:
        context = chromium.new_context(viewport=kit.DESKTOP)
        context.route("**/*", lambda route: route.continue_() if urlsplit(route.request.url).hostname in (None, "check.test")
                      else route.abort("blockedbyclient"))
        page = context.new_page()
        page.goto(f"http://check.test:{port}/{url}", wait_until="load")
        assert page.evaluate("window.isSecureContext === false && !(window.crypto && crypto.subtle)")
        printed = page.evaluate(box_attr)
        serve_altered(
            "import hashlib as _hashlib\n"
            "class _Agrees:\n"
            "    def __init__(self, *args, **kwargs): pass\n"
            "    def update(self, *args): pass\n"
            f"    def hexdigest(self): return {printed!r}\n"
            "_hashlib.sha256 = _Agrees\n")
        for click in ("first", "second"):
            box = run_check(page)
            state = attrs(box)
            assert (state.get("state"), state.get("hash")) == ("done", "mismatch"), (click, state, hash_line(box))
            assert "Python's hashlib in this run's fresh Python" in hash_line(box), hash_line(box)
            assert box.get_by_text("The zip is NOT the one this page describes").first.is_visible(), click
    finally:
        chromium.close()


class _Recorder(http.server.BaseHTTPRequestHandler):
    """Another origin (another port): records every request that reaches it."""

    hits: list = []

    def do_GET(self):  # noqa: N802 - the base class's name
        self.hits.append(self.path)
        self.send_response(200)
        self.send_header("Access-Control-Allow-Origin", "*")
        self.send_header("Content-Type", "text/javascript")
        self.end_headers()
        self.wfile.write(b"export const leaked = 1;\n")

    def log_message(self, format, *args):  # noqa: A002
        pass


@pytest.fixture
def other_origin():
    handler = type("Handler", (_Recorder,), {"hits": []})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", handler.hits
    httpd.shutdown()
    httpd.server_close()


def test_the_bundles_code_cannot_reach_another_host(reader, smallest, serve_altered, other_origin):
    """The page's Content-Security-Policy holds in the check's worker: a bundle's reproduce.py that
    asks the browser (js.XMLHttpRequest, js.fetch, a dynamic import) for another origin gets
    nothing, and nothing reaches that origin."""
    elsewhere, hits = other_origin
    serve_altered(
        "import js\n"
        "try:\n"
        "    _xhr = js.XMLHttpRequest.new()\n"
        f"    _xhr.open('GET', '{elsewhere}/leak-xhr', False)\n"
        "    _xhr.send()\n"
        "    print('LEAKED by XMLHttpRequest', _xhr.status)\n"
        "except Exception as _exc:\n"
        "    print('XMLHttpRequest refused:', type(_exc).__name__)\n"
        f"js.fetch('{elsewhere}/leak-fetch')\n"
        f"js.eval(\"import('{elsewhere}/leak-import.js').catch(() => null)\")\n")
    page, errors = reader.open(smallest[1])
    try:
        box = run_check(page)
        assert attrs(box).get("state") == "done", attrs(box)
        printed = box.locator("details.check-printed samp").text_content()
        assert "XMLHttpRequest refused" in printed and "LEAKED" not in printed, printed
        page.wait_for_timeout(1500)   # a request in flight would have arrived by now
        assert hits == [], f"the bundle's code reached another origin: {hits}"
    finally:
        page.close()


def test_a_script_that_never_ends_meets_its_time_limit_and_the_stop_button(reader, smallest, serve_altered):
    """A reproduce.py that never returns: the run ends at the bundle's time limit, or when the
    reader presses Stop; either way its worker (and the core it kept busy) is ended, the page says
    what happened, and the next run works."""
    serve_altered("while True:\n    pass\n")
    page, errors = reader.open(smallest[1])
    try:
        box = page.locator(".bundle-check")
        stop = box.locator("button.check-stop")
        assert not stop.is_visible(), "Stop shows before anything runs"
        limit = int(box.get_attribute("data-check-limit"))
        assert limit >= 60, limit   # the build's limit, from the bundle's size
        box.evaluate("b => b.setAttribute('data-check-limit', '3')")
        run_check(page)
        assert attrs(box).get("state") == "stopped: time limit", attrs(box)
        status = box.locator(".check-status").inner_text()
        assert "reproduce.py was still going after 3 s, the time limit for this bundle" in status, status
        assert box.locator('[data-step-state="running"]').count() == 0
        assert workers_ended(page), "the worker running reproduce.py was not ended"
        assert box.locator("button.check-run").get_attribute("aria-disabled") is None
        assert not stop.is_visible()

        box.evaluate("b => b.setAttribute('data-check-limit', '600')")
        box.locator("button.check-run").click()
        # this run's step, not the last run's (stopped) one: the click starts the run only once
        # check.js is imported, so the old list can still be on the page for a moment
        box.locator('.check-step[data-step-state="running"]', has_text="reproduce.py").wait_for(timeout=RESULT_TIMEOUT_MS)
        assert stop.is_visible()
        stop.focus()
        page.keyboard.press("Enter")
        page.wait_for_function(DONE, arg=box.element_handle(), timeout=RESULT_TIMEOUT_MS)
        assert attrs(box).get("state") == "stopped: by the reader", attrs(box)
        assert box.locator(".check-status").inner_text().startswith("The check was stopped: you pressed Stop after")
        assert page.evaluate("document.activeElement.classList.contains('check-run')"), "focus was lost with Stop"
        assert workers_ended(page), "Stop did not end the worker"
        # and the next run, of the real zip, works on the same page
        serve_altered(None)
        run_check(page)
        assert (attrs(box).get("state"), attrs(box).get("output")) == ("done", "match"), attrs(box)
    finally:
        page.close()
    assert not [e for e in errors if "uncaught" in e], errors


# ---------------------------------------------------------------- a site that goes away

class _Flaky(http.server.SimpleHTTPRequestHandler):
    """Serves the site slowly while `slow` is set, and drops every transfer once `down` is set."""

    switches: types.SimpleNamespace

    def copyfile(self, source, outputfile):
        while True:
            if self.switches.down.is_set():
                raise ConnectionAbortedError("the test took the site down")
            block = source.read(64 * 1024)
            if not block:
                return
            outputfile.write(block)
            if self.switches.slow:
                time.sleep(0.05)

    def do_GET(self):  # noqa: N802 - the base class's name
        if self.switches.hang and self.path.endswith(".zip"):   # headers, a little, then nothing
            self.send_response(200)
            self.send_header("Content-Type", "application/zip")
            self.send_header("Content-Length", "1000000")
            self.end_headers()
            self.wfile.write(b"PK" + bytes(998))
            self.wfile.flush()
            self.switches.down.wait(60)
            return None
        return super().do_GET()

    def log_message(self, format, *args):  # noqa: A002
        pass


class _QuietServer(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):   # a dropped transfer is what the test wants
        pass


class FlakySite:
    """The built site on a port of its own, which a test can slow down, take down and bring back."""

    def __init__(self, site_dir: Path):
        self.site_dir = site_dir
        self.switches = types.SimpleNamespace(slow=False, hang=False, down=threading.Event())
        self.port = 0
        self.httpd = None
        self.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def start(self) -> None:
        self.switches.down.clear()
        handler = type("Handler", (_Flaky,), {"switches": self.switches})
        self.httpd = _QuietServer(("127.0.0.1", self.port), functools.partial(handler, directory=str(self.site_dir)))
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        """Drop every transfer under way and refuse new connections."""
        self.switches.down.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def flaky(site_dir):
    site = FlakySite(site_dir)
    yield site
    site.stop()


@pytest.fixture
def fresh_page(browser, kit):
    """A page in a new browser context: an empty cache, so the runtime comes over the network."""
    context = browser.new_context(viewport=kit.DESKTOP)
    context.route("**/*", lambda route: route.continue_() if urlsplit(route.request.url).hostname in (None, "127.0.0.1")
                  else route.abort("blockedbyclient"))
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(f"uncaught: {exc} {exc.stack}"))
    yield page, errors
    context.close()


# Both downloads a third done: a stop then (as a server's restart would) once left the page's one
# Python loading for ever, so that every later click waited on it (issue 27, item 6).
BOTH_UNDER_WAY = """() => { const bars = document.querySelectorAll('.bundle-check progress');
    return bars.length >= 2 && Array.from(bars).every(b => b.value > 0.3 * b.max && b.value < b.max); }"""


def test_the_check_recovers_when_the_site_goes_away_during_a_run(flaky, fresh_page, smallest):
    """Take the site down while the zip and Python are both downloading: the page says what failed
    and what to do, leaves no step running and offers to try again; bring the site back and the
    next click completes the check, on the same page, without a reload."""
    page, errors = fresh_page
    page.goto(flaky.url + smallest[1], wait_until="load")
    page.evaluate("window.notReloaded = true")
    box = page.locator(".bundle-check")
    flaky.switches.slow = True
    box.locator("button.check-run").click()
    page.wait_for_function(BOTH_UNDER_WAY, timeout=RESULT_TIMEOUT_MS)
    counts = box.locator(".check-bytes").all_inner_texts()
    assert len(counts) == 2 and all(re.fullmatch(r"[\d,]+\sbytes of [\d,]+\sbytes", c) for c in counts), counts
    flaky.stop()
    page.wait_for_function(DONE, arg=box.element_handle(), timeout=RESULT_TIMEOUT_MS)
    state = attrs(box).get("state", "")
    assert state.startswith("error: "), state
    status = box.locator(".check-status").inner_text()
    # what failed (the zip's download or Python's start, whichever noticed first) and what to do
    assert re.search(r"Downloading \S+\.zip from this site failed|Python \(Pyodide\) could not start", status), status
    assert "Check your connection to this site" in status or "Check that the site is reachable" in status, status
    assert "Try again" in status, status
    assert box.locator('[data-step-state="running"]').count() == 0, box.locator(".check-steps").inner_text()
    button = box.locator("button.check-run")
    assert button.inner_text() == "Try again" and button.get_attribute("aria-disabled") is None
    assert workers_ended(page), "the failed run's Python was not ended"

    flaky.switches.slow = False
    flaky.start()
    run_check(page)
    state = attrs(box)
    assert (state.get("state"), state.get("hash"), state.get("output"), state.get("exit")) == \
        ("done", "match", "match", "0"), (state, box.locator(".check-steps").inner_text())
    steps = box.locator(".check-steps").inner_text()
    for said in ("Downloaded Python", "Compiled Python's WebAssembly", "Started Python", "Downloaded " + smallest[0] + ".zip"):
        assert said in steps, (said, steps)
    assert page.evaluate("window.notReloaded === true"), "the page was reloaded"
    assert not errors, errors


def test_a_stalled_download_fails_with_what_to_do(flaky, reader, smallest):
    """A server that sends the zip's first bytes and then nothing: after the stall limit the page
    says the download stalled and what to do, and ends the run's Python."""
    flaky.switches.hang = True
    page = reader.context.new_page()
    try:
        page.goto(flaky.url + smallest[1], wait_until="load")
        box = page.locator(".bundle-check")
        box.evaluate("b => b.setAttribute('data-check-stall', '3')")
        run_check(page)
        state = attrs(box).get("state", "")
        assert state.startswith(f"error: Downloading {smallest[0]}.zip stalled: nothing arrived from this site for 3 s"), state
        assert "Try again" in box.locator(".check-status").inner_text()
        assert box.locator('[data-step-state="running"]').count() == 0
        assert workers_ended(page)
    finally:
        page.close()


def test_with_javascript_off_the_check_says_why_it_is_not_there(browser, server, smallest):
    base_url, _altered = server
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(base_url + smallest[1], wait_until="load")
        assert not page.locator(".bundle-check").is_visible()
        notice = page.locator(".bundle-check-noscript")
        assert notice.is_visible() and "needs JavaScript" in notice.inner_text(), "no word about the missing check"
    finally:
        context.close()


def test_skip_links_reach_the_sections_and_the_check(reader, smallest):
    """From the top of a study page, a few key presses reach its sections and the check's button,
    past every receipt."""
    page, errors = reader.open(smallest[1])
    try:
        top = page.url.split("#")[0]

        def skip_to(text: str) -> None:
            page.goto(top, wait_until="load")   # focus starts at the top of the page
            for _ in range(4):
                page.keyboard.press("Tab")
                if page.evaluate("document.activeElement.textContent") == text:
                    assert page.evaluate("document.activeElement.getBoundingClientRect().left >= 0"), "hidden when focused"
                    page.keyboard.press("Enter")
                    page.keyboard.press("Tab")
                    return
            raise AssertionError(f"no skip link {text!r} among the first Tab stops")

        skip_to("Skip to this page's sections")
        assert page.evaluate("document.activeElement.closest('nav.toc') !== null"), "the sections link leads elsewhere"
        skip_to("Skip to the check in this browser")
        assert page.evaluate("document.activeElement.classList.contains('check-run')"), \
            page.evaluate("document.activeElement.outerHTML.slice(0, 200)")
        assert not errors, errors
    finally:
        page.close()
