"""Reader features of the built site: offline search, the light/dark switch, the print stylesheet,
permalinks, the favicon, "Cite this study", OpenGraph previews and the footer's commit."""
from __future__ import annotations

import gzip
import json
import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin, urlsplit

REPO = Path(__file__).resolve().parents[2]
STUDY = "studies/organism/"
BG = "() => getComputedStyle(document.body).backgroundColor"


def _html(site_dir: Path, path: str) -> str:
    return (site_dir / path / "index.html").read_text("utf-8")


class _Meta(HTMLParser):
    def __init__(self):
        super().__init__()
        self.meta, self.links = {}, []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "meta" and a.get("property"):
            self.meta[a["property"]] = a.get("content")
        if tag == "link":
            self.links.append(a)


def _head(site_dir, path) -> _Meta:
    parser = _Meta()
    parser.feed(_html(site_dir, path))
    return parser


# --- search ---------------------------------------------------------------------------------

def _search(page, query: str) -> list[dict]:
    box = page.locator("form.search input[type=search]")
    assert box.is_visible(), "the search box is not shown"
    box.click()
    box.fill("")   # clears the results of any earlier query, so the wait below sees this one's
    page.wait_for_function("() => document.querySelector('.search-results').textContent === ''")
    box.fill(query)
    page.wait_for_function(
        "() => document.querySelector('.search-results li, .search-results p') !== null"
        " || (document.querySelector('form.search').getAttribute('data-search-state') || '').startsWith('error')",
        timeout=20000)
    state = page.locator("form.search").get_attribute("data-search-state")
    assert state == "ready", f"search did not start: {state}"
    return page.eval_on_selector_all(".search-results li", "els => els.map(li => ({href: li.querySelector('a').href,"
                                     " title: li.querySelector('a').textContent, excerpt: li.textContent}))")


def test_search_finds_pages_offline_and_its_results_open(new_page, site_dir):
    assert (site_dir / "pagefind" / "pagefind.js").is_file(), "the build wrote no search index"
    for start in ("", STUDY):  # from the home page and from a nested page: links must resolve from both
        page, visit = new_page.open(start)
        hits = _search(page, "patching")
        assert hits, f"/{start}: no result for a word the site uses"
        assert all(h["href"].startswith(new_page.base_url) for h in hits), hits
        assert any("patch" in h["excerpt"].lower() for h in hits), hits
        page.click(".search-results li a >> nth=0")
        page.wait_for_load_state("load")
        assert "patching" in page.content().lower(), f"the first result {hits[0]['href']} does not hold the word"
        none = _search(page, "zzqxjv")
        assert none == [] and "No page mentions" in page.locator(".search-results").inner_text()
        assert not visit.external_requests and not visit.failed_requests, (visit.external_requests, visit.failed_requests)
        assert not visit.console_errors, visit.console_errors
        page.close()


def test_search_results_are_reached_and_walked_with_the_arrow_keys(new_page):
    page, visit = new_page.open(STUDY)
    hits = _search(page, "patching")
    assert len(hits) >= 2, hits
    assert "arrow keys" in page.locator(".search-count").inner_text()
    focused = "() => document.activeElement && document.activeElement.getAttribute('href')"
    page.keyboard.press("ArrowDown")
    first = page.evaluate(focused)
    assert first and page.evaluate("document.activeElement.closest('.search-results') !== null")
    page.keyboard.press("ArrowDown")
    second = page.evaluate(focused)
    assert second and second != first
    page.keyboard.press("ArrowUp")
    assert page.evaluate(focused) == first
    page.keyboard.press("ArrowUp")
    assert page.evaluate("document.activeElement.id") == "search-q"
    page.keyboard.press("ArrowDown")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert page.url.split("#")[0].endswith(first.split("#")[0]), (page.url, first)
    assert not visit.console_errors, visit.console_errors
    page.close()


def test_search_ranks_a_study_first_for_its_own_subject_and_shows_prose(new_page):
    """The excerpts come from the pages' prose, never from code, program output or data tables, and a
    study page outranks the pages that only mention its subject."""
    page, visit = new_page.open("")
    calibrations = ("studies/planted/", "studies/routed/", "studies/transfer/")   # the three calibration studies
    for query, expected in (("calibration", calibrations), ("MiniLM", ("studies/minilm/",))):
        hits = _search(page, query)
        assert hits and hits[0]["href"].endswith(expected), (query, [h["href"] for h in hits])
    for query in ("rho", "golden", "reproduce", "rows"):
        for hit in _search(page, query):
            excerpt = hit["excerpt"]
            # a directive's source (the authoring page's examples) or the bundle check's output
            assert "{{" not in excerpt and "}}" not in excerpt and "```" not in excerpt, (query, excerpt)
            assert "bundle check:" not in excerpt and "rows read" not in excerpt, (query, excerpt)
    hits = _search(page, "rho")
    assert not hits[0]["href"].endswith("how-this-site-is-built/"), [h["href"] for h in hits]
    assert not visit.console_errors, visit.console_errors
    page.close()


def test_search_index_covers_content_pages_only(site_dir):
    entry = json.loads((site_dir / "pagefind" / "pagefind-entry.json").read_text())
    indexed = sum(lang["page_count"] for lang in entry["languages"].values())
    marked = [p for p in site_dir.rglob("*.html") if "data-pagefind-body" in p.read_text("utf-8")]
    assert indexed == len(marked), f"{indexed} pages indexed, {len(marked)} marked for the index"
    assert not [p for p in marked if p.relative_to(site_dir).parts[0] == "source"], "fixture views are indexed"
    pages = list((REPO / "content").rglob("*.md"))
    assert len(marked) >= len(pages), f"{len(marked)} pages marked for the index, {len(pages)} content pages"


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_search_index_is_what_pagefind_makes_of_the_whole_pages(site_dir, tmp_path, monkeypatch):
    """The build gives Pagefind each page as publish makes it, and only what Pagefind reads of it
    (site_src/reader/search.py: no page without data-pagefind-body, no site header or footer),
    through its service: the index is byte for byte the one the site's command line build made,
    and the one made from the whole pages given in the same order; its page fragments are those
    of Pagefind's own command-line run over the written site."""
    from site_src import site as site_build
    from site_src.reader import search

    fed: dict[str, bytes] = {}
    real_add = search.Indexing.add

    def add(self, pages):
        fed.update({rel: data if isinstance(data, bytes) else data.read_bytes()
                    for rel, data in pages.items() if search.indexed(rel)})
        real_add(self, pages)

    monkeypatch.setattr(search.Indexing, "add", add)
    result = site_build.collect(REPO, search=True)
    assert result.ok and result.search is not None, result.errors.lines()[:3]
    result.search.finish(tmp_path / "streamed")
    assert _tree(tmp_path / "streamed" / "pagefind") == _tree(site_dir / "pagefind"), "the built index is not this one"
    pages = {rel: data for rel, data in fed.items() if not rel.startswith("pagefind/")}
    cut = search.read_by_search(pages)
    assert sum(map(len, cut.values())) < 0.7 * sum(map(len, pages.values())), "nothing was cut: the test checks nothing"
    assert len(cut) < len(pages), "no page was left out: the test checks nothing"
    whole = search.Indexing()
    for rel, data in pages.items():   # every page whole, in the order the build gave them
        whole._add_file(rel, data)
    whole.marked = True
    whole.finish(tmp_path / "whole")
    assert _tree(tmp_path / "whole") == _tree(tmp_path / "streamed")

    from pagefind_bin import get_executable
    site = tmp_path / "site"
    for rel, data in pages.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_bytes(data)
    subprocess.run([str(get_executable()), "--site", str(site), "--glob", "**/index.html", "--silent"], check=True)
    assert _tree(site / "pagefind" / "fragment") == _tree(site_dir / "pagefind" / "fragment")


def _indexed_text(site_dir: Path) -> dict[str, str]:
    """{page URL: the text Pagefind indexed for it}, read from the index's page fragments (gzip, a
    "pagefind_dcd" signature, then JSON with the page's `url` and `content`)."""
    out = {}
    for path in sorted((site_dir / "pagefind" / "fragment").glob("*.pf_fragment")):
        data = gzip.decompress(path.read_bytes())
        assert data.startswith(b"pagefind_dcd"), f"{path.name}: not a Pagefind fragment as this test knows them"
        fragment = json.loads(data[len(b"pagefind_dcd"):])
        out[fragment["url"]] = fragment["content"]
    return out


# What a reader sees of an indexed page, every collapsed and hidden part shown
SHOWN_TEXT = """() => { const body = document.querySelector('[data-pagefind-body]');
    document.querySelectorAll('details').forEach(d => { d.open = true; });
    body.querySelectorAll('[hidden]').forEach(e => { e.hidden = false; });
    return body.innerText; }"""


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def test_search_keeps_the_words_apart_that_the_page_keeps_apart(new_page, site_dir):
    """Every word in the search index is a word a reader sees on its page: the index never runs two
    elements' words together ("claimobservational", "rank 8)mlp_L0" were indexed that way)."""
    indexed = _indexed_text(site_dir)
    assert len(indexed) >= 10, sorted(indexed)
    glued = {}
    for url, content in sorted(indexed.items()):
        page, _visit = new_page.open(url.lstrip("/"))
        shown = _words(page.evaluate(SHOWN_TEXT))
        page.close()
        unseen = sorted(_words(content) - shown)
        if unseen:
            glued[url] = unseen[:8]
    assert not glued, f"indexed words no reader sees (two words run together): {glued}"


def test_word_boundaries_leave_the_screen_alone_and_pre_untouched():
    from site_src.reader import word_boundaries

    html = ("<dl><dt>claim</dt><dd>causal</dd></dl><select><option>a</option><option>b</option></select>"
            "<table><caption>c</caption><tr><th>d</th><td>e</td></tr></table>"
            "<pre><code>x</dt><dd>y</code></pre><span>f</span><span>g</span>")
    assert word_boundaries(html) == (
        "<dl><dt>claim</dt>\n<dd>causal</dd>\n</dl><select><option>a</option>\n<option>b</option>\n</select>"
        "<table><caption>c</caption>\n<tr><th>d</th>\n<td>e</td></tr></table>"
        "<pre><code>x</dt><dd>y</code></pre><span>f</span><span>g</span>")
    assert word_boundaries(word_boundaries(html)) == word_boundaries(html)


def test_search_is_not_loaded_before_it_is_used(new_page):
    page, _ = new_page.open(STUDY)
    loaded = page.evaluate("performance.getEntriesByType('resource').map(e => e.name)")
    assert not [u for u in loaded if "/pagefind/" in u], loaded
    page.close()


# --- theme ----------------------------------------------------------------------------------

def test_theme_follows_the_system_and_the_switch_overrides_it(browser, base_url, kit):
    for scheme, other in (("light", "dark"), ("dark", "light")):
        recorder = kit.Recorder(browser, base_url, kit.DESKTOP, color_scheme=scheme)
        try:
            page, visit = recorder.open(STUDY)
            button = page.locator("button.theme-toggle")
            assert button.is_visible()
            assert page.evaluate("document.documentElement.getAttribute('data-theme')") is None
            # the label says what a press will do, not what is on
            assert button.inner_text().strip() == f"Switch to {other} theme"
            assert button.get_attribute("data-theme-next") == other
            system_bg = page.evaluate(BG)
            svg = page.locator(".fig-static svg").first
            before = svg.evaluate("s => s.outerHTML.length")
            # the figure is one SVG whose colours follow the theme (CSS custom properties)
            paint = "s => Array.from(s.querySelectorAll('[class*=tf]')).slice(0, 5).map(e => getComputedStyle(e).fill).join()"
            fills = svg.evaluate(paint)
            button.click()
            assert svg.evaluate(paint) != fills, "the static figure kept its colours when the theme changed"
            assert page.evaluate("document.documentElement.getAttribute('data-theme')") == other
            assert button.inner_text().strip() == f"Switch to {scheme} theme"
            assert page.evaluate(BG) != system_bg, "the page background did not change with the theme"
            visible = page.locator(".fig-static svg:visible").first
            assert visible.count() == 1 and visible.evaluate("s => s.outerHTML.length") > 0 and before > 0
            page.reload(wait_until="load")  # the choice is kept
            assert page.evaluate("document.documentElement.getAttribute('data-theme')") == other
            assert page.evaluate(BG) != system_bg
            assert not visit.console_errors, visit.console_errors
            page.close()
        finally:
            recorder.close()


# --- print ----------------------------------------------------------------------------------

def test_print_stylesheet_drops_the_chrome_and_prints_light(browser, base_url, kit):
    recorder = kit.Recorder(browser, base_url, kit.DESKTOP, color_scheme="dark")
    try:
        page, _ = recorder.open(STUDY)
        screen_bg = page.evaluate(BG)
        page.emulate_media(media="print")
        hidden = page.evaluate("""() => ['.site-header nav', '.reader-tools', '.toc', '.fig-controls', '.permalink']
            .filter(s => document.querySelector(s))
            .map(s => [s, getComputedStyle(document.querySelector(s)).display])""")
        assert hidden and all(display == "none" for _, display in hidden), hidden
        assert page.evaluate(BG) in ("rgb(255, 255, 255)", "rgba(0, 0, 0, 0)") and screen_bg != "rgb(255, 255, 255)"
        assert page.evaluate("getComputedStyle(document.body).color") == "rgb(0, 0, 0)"
        assert page.locator("article h1").is_visible() and page.locator(".provenance").count() == 1
        shown = page.eval_on_selector_all(".fig-static svg", "els => els.filter(s => s.checkVisibility()).length")
        figures = page.locator(".fig-static").count()
        assert figures and shown == figures, f"{shown} drawings visible in print for {figures} figures"
        pdf = page.pdf()
        assert pdf.startswith(b"%PDF") and len(pdf) > 10_000
        page.close()
    finally:
        recorder.close()


# --- static features ------------------------------------------------------------------------

def test_favicon_is_linked_and_served(site_dir, new_page):
    for path in ("", STUDY):
        icons = [link for link in _head(site_dir, path).links if link.get("rel") == "icon"]
        assert icons, f"/{path}: no <link rel=icon>"
        target = site_dir / path / icons[0]["href"]
        assert target.resolve().is_file(), target
    page, visit = new_page.open("")
    page.wait_for_timeout(300)
    assert not [u for u in visit.failed_requests if "favicon" in u], visit.failed_requests
    page.close()


def test_headings_and_figures_have_permalinks(site_dir):
    html = _html(site_dir, STUDY)
    toc = html.split('<nav class="toc"', 1)[1].split("</nav>", 1)[0]
    sections = re.findall(r'<a href="#([^"]+)">', toc)  # the author's sections, as the page lists them
    assert len(sections) >= 2
    for anchor in sections:
        heading = re.search(rf'<h2 id="{re.escape(anchor)}">(.*?)</h2>', html, re.S)
        assert heading and f'class="permalink" href="#{anchor}"' in heading.group(1), f"#{anchor} has no permalink"
    figures = re.findall(r'<figure class="fig" id="(fig-[^"]+)">', html)
    assert figures
    for fig in figures:
        assert f'<a class="permalink" href="#{fig}" aria-label="Permalink to Fig.' in html, fig


def test_cite_block_and_citation_file_name_the_bundle_and_commit(site_dir):
    html = _html(site_dir, STUDY)
    sums = dict(line.split()[::-1] for line in (site_dir / "SHA256SUMS").read_text().splitlines())
    sha = sums["bundles/organism.zip"]
    assert 'id="cite-title">Cite this study<' in html
    bibtex = re.search(r'<pre class="cite-bibtex"[^>]*><code>(.*?)</code></pre>', html, re.S).group(1)
    assert bibtex.startswith("@misc{organism-study,") and f"sha256 {sha}" in bibtex
    # the authors site.yaml names, and the page's address (its path here: the site has no base_url)
    assert re.search(r"\n  author +=\s*\{\{[^}]+\}\}", bibtex), bibtex
    assert re.search(r'\n  url +=\s*\{<span class="cite-url" data-cite-url>studies/organism/</span>\}', bibtex), bibtex
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert f"commit {head}" in bibtex
    import yaml
    cff = yaml.safe_load((site_dir / STUDY / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0" and cff["commit"] == head and cff["authors"]
    assert {"type": "other", "value": f"sha256:{sha}"}.items() <= cff["identifiers"][0].items()
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", cff["date-released"])


def test_citation_copies_with_the_address_the_page_is_read_at(browser, base_url):
    context = browser.new_context()
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base_url.rstrip("/"))
    try:
        page = context.new_page()
        page.goto(base_url + STUDY, wait_until="load")
        page.locator("#cite-title").click()   # the citation is folded into the records block
        entry = page.locator("#cite-bibtex").inner_text()
        assert re.search(r"\n  url +=\s*\{" + re.escape(base_url + STUDY) + r"\}", entry), entry
        button = page.locator("button.copy-button")
        assert button.is_visible() and button.inner_text() == "Copy the BibTeX entry"
        button.click()
        page.wait_for_function("() => document.querySelector('.copy-status').textContent !== ''")
        assert page.locator(".copy-status").inner_text() == "Copied."
        assert page.evaluate("navigator.clipboard.readText()") == entry
    finally:
        context.close()


def test_opengraph_preview_is_the_main_figure_as_png(site_dir):
    meta = _head(site_dir, STUDY).meta
    assert meta["og:title"] and meta["og:description"] and meta["og:type"] == "article"
    image = urlsplit(urljoin("http://site/" + STUDY, meta["og:image"])).path.lstrip("/")
    data = (site_dir / image).read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert width >= 400 and height >= 200, (width, height)
    assert meta["og:image:alt"]
    assert "og:title" in _head(site_dir, "").meta  # every page has the card, with or without a figure


def test_footer_names_the_commit(site_dir):
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    for path in ("", STUDY):
        footer = _html(site_dir, path).split('<footer class="site-footer">')[1]
        assert f"Built from commit {head[:12]}" in footer and head in footer, footer[:400]


def test_live_figures_load_nothing_until_a_reader_interacts(new_page):
    page, visit = new_page.open(STUDY)
    fetched = lambda: page.evaluate("performance.getEntriesByType('resource').map(e => e.name)")
    page.mouse.move(1, 1)
    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")  # scrolling past is not interacting
    page.wait_for_timeout(500)
    early = [u for u in fetched() if u.endswith("vega-runtime.js") or "/assets/figures/" in u and u.endswith(".json")]
    assert not early, f"fetched before any interaction: {early}"
    fig = page.locator("div.fig:has(.fig-live[data-figure-spec])").first
    fig.scroll_into_view_if_needed()
    fig.hover()
    page.wait_for_function("(f) => f.getAttribute('data-figure-ready') === 'true' || f.hasAttribute('data-figure-error')",
                           arg=fig.element_handle(), timeout=20000)
    assert fig.get_attribute("data-figure-error") is None, fig.get_attribute("data-figure-error")
    late = fetched()
    assert any(u.endswith("vega-runtime.js") for u in late) and any(u.endswith(".json") and "/assets/figures/" in u for u in late)
    assert not visit.console_errors and not visit.failed_requests, (visit.console_errors, visit.failed_requests)
    page.close()


def test_provenance_page_lists_every_value_of_its_page(site_dir):
    html = _html(site_dir, STUDY)
    section = html[html.index('<details class="more provenance"'):]
    assert '<a href="provenance.html">Every value, one by one' in section
    listed_here = re.findall(r"<li>.*?: (\d+) values?</li>", section)
    receipts = re.findall(r'id="(ref-\d+)"', html)
    page = (site_dir / STUDY / "provenance.html").read_text("utf-8")
    rows = re.findall(r'<a href="\./#(ref-\d+)">', page)
    assert sorted(rows) == sorted(receipts) and len(rows) == len(set(rows))
    total = len(re.findall(r"<tr><td class=\"num\">", page))
    assert sum(map(int, listed_here)) == total >= len(receipts)


def test_every_study_page_opens_with_its_findings_and_ends_on_the_takeaway(site_dir):
    """Issue 22 item 1, on the real site: each study page (an article of class study) states three
    to five findings before its first section, each with a receipt (a value reference), and the
    takeaway rule after its argument."""
    studies = []
    for path in sorted(site_dir.rglob("index.html")):
        html = path.read_text("utf-8")
        if '<article class="page study"' not in html:
            continue
        where = path.parent.relative_to(site_dir).as_posix()
        studies.append(where)
        box = re.search(r'<section class="findings"[^>]*>(.*?)</section>', html, re.S)
        assert box, f"/{where}/ has no findings box"
        claims = re.findall(r'<p class="finding">(.*?)</p>', box.group(1), re.S)
        assert 3 <= len(claims) <= 5, f"/{where}/ states {len(claims)} findings"
        for claim in claims:
            assert re.search(r'<a class="ref(?: [^"]*)?" href="(?:\.\./)*source/|<span class="ref(?: [^"]*)?"[^>]*data-source="',
                             claim), f"/{where}/: a finding without a receipt: {claim[:120]}"
        before = html[html.index('<article'):box.start()]
        assert "<h2" not in before, f"/{where}/: a section comes before the findings box"
        assert '<aside class="takeaway"' in html[box.end():], f"/{where}/ does not end on the takeaway rule"
    assert len(studies) >= 3, studies


def test_a_study_pages_records_are_one_block_of_at_most_a_screen(browser, base_url, site_dir):
    """Issue 27 item 2: the bundle, how to run its check, the reproductions recorded, the citation
    and where the numbers come from sit in one block at the end of each study page, its long parts
    folded, at most a screen tall at 1280 x 800 and on a 390 px phone."""
    studies = sorted(p.parent.relative_to(site_dir).as_posix() for p in site_dir.rglob("index.html")
                     if '<article class="page study"' in p.read_text("utf-8"))
    assert len(studies) >= 3, studies
    for width, height in ((1280, 800), (390, 844)):
        context = browser.new_context(viewport={"width": width, "height": height})
        try:
            page = context.new_page()
            for where in studies:
                page.goto(f"{base_url}{where}/", wait_until="load")
                blocks = page.locator(".records-block")
                assert blocks.count() == 1, f"/{where}/ has {blocks.count()} records blocks"
                for part in ("section.bundle", "#reproductions", "#cite", ".provenance"):
                    assert blocks.locator(part).count() == 1, f"/{where}/: {part} is not in the records block"
                tall = blocks.evaluate("e => e.getBoundingClientRect().height")
                assert tall <= height, f"/{where}/ at {width} px: the records block is {tall:.0f} px tall, over a screen"
        finally:
            context.close()
