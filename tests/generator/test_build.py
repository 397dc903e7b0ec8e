"""Whole builds of the fixture repository: pages, receipts, sources, navigation, determinism."""
import re
import shutil

from generator_helpers import REPO, run, tree_digest, write_page


def test_build_writes_pages_with_clean_urls(site):
    assert run(site) == 0
    public = site / "public"
    for path in ["index.html", "explainer/index.html", "guides/second/index.html", "assets/site.css",
                 "source/data/golden.json", "source/data/golden.json.html", "source/data/rows.jsonl",
                 "source/bundles/demo/golden.json", "source/bundles/demo/golden.json.html", "sitemap.xml"]:
        assert (public / path).is_file(), path
    # fixtures are published byte for byte
    assert (public / "source/data/golden.json").read_bytes() == (site / "data/golden.json").read_bytes()
    # public is a link to the one build folder left; no other staging folder remains
    assert (site / "public").is_symlink()
    assert sorted(p.name for p in site.iterdir() if p.name.startswith(".public")) == [".public.builds"]
    kept = [p.name for p in (site / ".public.builds").iterdir() if p.name != ".lock"]
    assert kept == [(site / "public").resolve().name]


def test_receipt_markup(site):
    from site_src.receipt_html import source_from_href

    run(site)
    html = (site / "public/explainer/index.html").read_text()
    match = re.search(r'<a class="ref" href="([^"]+)" id="(ref-\d+)">([^<]+)</a>', html)
    assert match, "receipt element missing"
    href, rid, shown = match.groups()
    # the link names where the value was recorded, and the text is the raw value: neither is repeated
    assert href == "../source/data/golden.json.html#L5" and source_from_href(href, False) == "data/golden.json:5"
    assert rid == "ref-1" and shown == "-0.170885"
    # the tooltip is made by site.js from the element, not carried by the page
    assert "role=\"tooltip\"" not in html and "Recorded at" not in html
    # formatted values keep the raw value
    assert re.search(r'href="\.\./source/data/golden\.json\.html#L5" id="ref-\d+" data-value="-0\.170885">\u22120\.17</a>',
                     html)
    # a computed value names its expression; its link names its file
    computed = re.search(r'<a class="ref" href="([^"]+)" id="ref-\d+" '
                         r'data-expr="where dimension == safety \| count margin &lt; 0">1</a>', html)
    assert computed and source_from_href(computed.group(1), True) == "data/rows.jsonl"
    # every linked receipt's link says its source, so none repeats it in data-source
    assert "data-source=" not in html


def test_a_receipt_carries_only_what_its_link_and_text_do_not_say():
    """`data-source` only where the link cannot spell the source back as site.js reads it,
    `data-value` only where the text shown is not the raw value (site_src/receipt_html.py)."""
    from markupsafe import Markup

    from site_src.paths import RepoFiles
    from site_src.receipt_html import receipt_html, source_from_href
    from site_src.receipts import Resolved
    from site_src.stages.load import make_env
    from site_src.urls import source_href

    jinja = make_env(RepoFiles(REPO))

    def one(value, source, line, href, text):
        return str(receipt_html(jinja, Resolved(value, source, line, "x", href), text, "ref-7", "../../"))
    plain = one(3, "data/a%b?.json", 4, source_href("data/a%b?.json", 4), "3")
    assert plain == '<a class="ref" href="../../source/data/a%25b%3F.json.html#L4" id="ref-7">3</a>'
    assert source_from_href("../../source/data/a%25b%3F.json.html#L4", False) == "data/a%b?.json:4"
    assert 'data-value="0.25">0.250</a>' in one(0.25, "data/q.json", 2, source_href("data/q.json", 2), "0.250")
    # a computed value linked to a line names its file alone; linked to the file, the same
    assert "data-source" not in one(2, "data/r.jsonl", None, source_href("data/r.jsonl", 9), "2")
    assert "data-source" not in one(2, "data/r.jsonl", None, source_href("data/r.jsonl"), "2")
    # a raw file whose name ends in .html reads back as another file: the source is written out
    assert 'data-source="data/t.html"' in one(2, "data/t.html", None, source_href("data/t.html"), "2")
    # no link (a value read at an older commit): a span naming its source
    assert one(2, "abc123:data/q.json", 2, "", "2") == \
        '<span class="ref" tabindex="0" id="ref-7" data-source="abc123:data/q.json:2">2</span>'
    # a text shown escaped is still the raw value; markup that reads otherwise keeps data-value
    assert "data-value" not in one("a <b> c", "data/q.json", 2, source_href("data/q.json", 2), "a <b> c")
    assert 'data-value="&lt;i&gt;x&lt;/i&gt;"' in one("<i>x</i>", "data/q.json", 2, source_href("data/q.json", 2),
                                                         Markup("<i>x</i>"))


def test_text_receipts_are_marked_apart_from_numbers():
    from site_src.paths import RepoFiles
    from site_src.receipt_html import receipt_html
    from site_src.receipts import Resolved
    from site_src.stages.load import make_env

    jinja = make_env(RepoFiles(REPO))

    def one(value):
        return str(receipt_html(jinja, Resolved(value, "data/q.json", 2, "data/q.json#v", "source/data/q.json.html#L2"),
                                str(value), "ref-1", "../"))
    assert one(0.5).startswith('<a class="ref" href="../source/data/q.json.html#L2" id="ref-1"')
    assert one("a <quoted> label").startswith('<a class="ref ref-text" ')
    assert one("a <quoted> label").endswith('id="ref-1">a &lt;quoted&gt; label</a>')   # text is its own raw value
    assert one(True).startswith('<a class="ref ref-text" ') and 'data-value="true">True</a>' in one(True)


def test_tables_give_each_cell_its_own_line(site):
    run(site)
    html = (site / "public/explainer/index.html").read_text()
    table = html[html.index('<table class="data"><caption>Rank correlation'):]
    table = table[: table.index("</table>")]
    assert re.findall(r'<a class="ref" href="\.\./source/([^"]+)\.html#L(\d+)"', table) == [
        ("data/golden.json", "5"), ("data/golden.json", "11"), ("data/golden.json", "12"), ("data/golden.json", "13")]
    assert '<th scope="row">helpfulness</th>\n<td class="num">' in table and "\u22120.306" in table
    grouped = html[html.index("<th scope=\"col\">mean margin</th>"):]
    rows = re.findall(r'<th scope="row">(\w+)</th>', grouped[: grouped.index("</table>")])
    assert rows == ["helpfulness", "safety"]  # sorted by the mean, descending


def test_provenance_table_lists_every_value(site):
    run(site)
    html = (site / "public/explainer/index.html").read_text()
    receipts = re.findall(r'id="(ref-\d+)"', html)
    # the page summarises per fixture and links its provenance page (site_src/reader/provenance.py)
    assert '<a href="provenance.html">Every value, one by one' in html[html.index('class="provenance"'):]
    section = (site / "public/explainer/provenance.html").read_text()
    listed = re.findall(r'<a href="\./#(ref-\d+)">', section)
    # grouped by fixture (site_src/reader's layout of the table): every receipt once
    assert sorted(receipts) == sorted(listed) and len(listed) == 29 == len(set(listed))
    notes = section[section.index("<code>data/notes.md</code>"):].split("</table>")[0]
    assert '<a href="../source/data/notes.md.html#L3">line 3</a>' in notes


def test_source_view_has_line_anchors(site):
    run(site)
    view = (site / "public/source/data/golden.json.html").read_text()
    assert '<tr id="L5"><td class="ln"><a href="#L5">5</a></td><td class="code"><code>  &#34;mean_rho&#34;: -0.170885,</code></td></tr>' in view
    assert view.count('<tr id="L') == len((site / "data/golden.json").read_text().splitlines())
    assert 'href="../../assets/site.css"' in view
    css = (site / "public/assets/site.css").read_text()
    assert "tr:target" in css and ".ref-tip {" in css


def test_math_becomes_mathml(site):
    run(site)
    html = (site / "public/explainer/index.html").read_text()
    assert '<math xmlns="http://www.w3.org/1998/Math/MathML" display="block">' in html
    assert "<mtext>chosen</mtext>" in html
    # no math script: the only scripts are the site's own (theme switch and search, site.js)
    assert re.findall(r'<script src="([^"]+)"', html) == ["../assets/site.js"]
    assert "mathjax" not in html.lower() and "katex" not in html.lower()


def _nav(html: str) -> str:
    return html[html.index('aria-label="Site">'): html.index("</nav>")]


def test_navigation_order_and_appended_pages(site):
    run(site)
    html = (site / "public/guides/second/index.html").read_text()
    nav = _nav(html)
    assert re.findall(r'<a href="([^"]+)"', nav) == ["../../", "../../explainer/", "../../guides/second/"]
    assert 'aria-current="page">A page missing from nav' in nav
    home = (site / "public/index.html").read_text()
    assert 'href="explainer/"' in home and '<h2 id="list-g0-pages">Pages</h2>' in home


def test_navigation_groups_children_and_one_name_per_page(site):
    """site.yaml's groups title the navigation and the home page's listing; a page under another's
    URL is listed under it; each page has one name (nav_title, else title) in both."""
    write_page(site, "guides.md", "Text.\n", "title: All the guides, a long title\nnav_title: Guides\nsummary: S.\n")
    (site / "content/site.yaml").write_text(
        "title: Fixture site\nbase_url: ''\nnav:\n  - index.md\n  - Explainers:\n      - explainer.md\n"
        "  - Guides:\n      - guides.md\n      - guides/second.md\n")
    assert run(site) == 0
    html = (site / "public/guides/second/index.html").read_text()
    nav = _nav(html)
    assert re.findall(r'class="nav-group-title" id="nav-g\d">([^<]+)<', nav) == ["Explainers", "Guides"]
    # the child sits in its parent's list item, and the current page is marked
    assert re.search(r'>Guides</a>\s*<ul class="nav-children">\s*<li><a href="../../guides/second/" aria-current="page">', nav)
    assert '<p class="crumbs">Guides <span aria-hidden="true">›</span> <a href="../../guides/">Guides</a></p>' in html
    home = (site / "public/index.html").read_text()
    listing = home[home.index('<section class="listing"'):]
    assert '<h2 id="list-g1-explainers">Explainers</h2>' in listing and '<h2 id="list-g2-guides">Guides</h2>' in listing
    assert '<a href="guides/">Guides</a>' in listing and "All the guides, a long title" not in listing


def test_navigation_entry_of_a_page_the_build_does_not_make(site, capsys):
    (site / "content/site.yaml").write_text(
        "title: Fixture site\nnav:\n  - index.md\n  - Records:\n      - registrations/\n  - explainer.md\n")
    assert run(site) == 1
    err = capsys.readouterr().err
    assert "content/site.yaml:5: nav entry 'registrations/' names no page the build makes" in err
    assert "content/site.yaml:6: nav entry 'explainer.md' follows a group" in err


def test_nav_title_labels_the_navigation_and_the_title_stays(site):
    write_page(site, "long.md", "## A section\n\nText.\n",
               "title: A page whose title is a whole long question?\nnav_title: Short\nsummary: Short label.\n")
    assert run(site) == 0
    html = (site / "public/long/index.html").read_text()
    assert 'aria-current="page">Short</a>' in _nav(html)
    assert "<h1" in html and "A page whose title is a whole long question?" in html


def test_all_links_are_relative(site):
    run(site)
    for path in (site / "public").rglob("*.html"):
        html = path.read_text()
        for url in re.findall(r'(?:href|src)="([^"]+)"', html):
            assert not re.match(r"[a-z]+:|//|/", url), f"{path}: {url}"


def test_html_basics(site):
    run(site)
    html = (site / "public/explainer/index.html").read_text()
    assert html.startswith("<!DOCTYPE html>\n<html lang=\"en\">")
    assert html.count("<h1") == 1 and "<main id=\"main\">" in html
    assert len(set(re.findall(r' id="([^"]+)"', html))) == len(re.findall(r' id="([^"]+)"', html))


def test_two_builds_are_byte_identical(site, tmp_path):
    run(site)
    first = tree_digest(site / "public")
    copy = tmp_path / "again"
    shutil.copytree(site, copy, ignore=shutil.ignore_patterns("public"))
    run(copy)
    assert tree_digest(copy / "public") == first
    run(site)
    assert tree_digest(site / "public") == first


def test_check_does_not_touch_public(site, capsys):
    run(site)
    before = tree_digest(site / "public")
    write_page(site, "explainer.md", "Changed {{ data/golden.json:5 }}.\n",
               "title: Changed\nsummary: Changed.\n")
    assert run(site, "check") == 0
    assert "check ok" in capsys.readouterr().out
    assert tree_digest(site / "public") == before
    assert run(site, "check", "--out", str(site / "elsewhere")) == 0
    assert not (site / "elsewhere").exists()


def test_build_replaces_public_on_success(site):
    run(site)
    (site / "public" / "stale.txt").write_text("from an older build")
    assert run(site) == 0
    assert not (site / "public" / "stale.txt").exists()


def test_out_option(site, tmp_path):
    out = tmp_path / "site-out"
    assert run(site, "--out", str(out)) == 0
    assert (out / "index.html").is_file() and not (site / "public").exists()


def test_scrolling_blocks_are_focusable(site):
    write_page(site, "code.md", "## Code\n\n```\nwide code\n```\n\n    indented\n\n$$\nx^2\n$$\n")
    assert run(site) == 0
    html = (site / "public/code/index.html").read_text()
    # (search leaves code out: site_src/reader/wrapping.py marks each <pre> for Pagefind to ignore)
    assert html.count('<pre data-pagefind-ignore tabindex="0"><code>') == 2
    assert '<div class="math-block" tabindex="0"><math' in html


def test_every_table_sits_in_one_focusable_named_wrapper(site):
    """Markdown tables, table blocks and the templates' tables (provenance) all scroll in the same
    keyboard-reachable region, so a wide table never widens the page."""
    import re
    write_page(site, "tables.md", "## Tables\n\n| key `a` | value |\n|---|---|\n| x | {{ data/golden.json:5 }} |\n\n"
               "```table\nsource: data/golden.json#per_dimension_rho\ncolumns: [dimension, rho]\n```\n")
    assert run(site) == 0
    html = (site / "public/tables/index.html").read_text() + (site / "public/tables/provenance.html").read_text()
    tables = html.count("<table")
    wrappers = re.findall(r'<div class="table-wrap"([^>]*)>\s*<table', html)
    assert tables >= 3 and len(wrappers) == tables
    assert all('role="region" tabindex="0"' in w and "aria-label" in w for w in wrappers)
    assert 'aria-label="Table: key a, value"' in html


def test_an_empty_corner_header_cell_is_an_ordinary_cell(site):
    """A Markdown table's empty header cell (above a column of row labels) names nothing: it is
    written as <td>, so no header without text reaches a screen reader (axe: empty-table-header)."""
    write_page(site, "corner.md", "## Corner\n\n|   | low | high |\n|---|--:|--:|\n| spread | 1 | 2 |\n")
    assert run(site) == 0
    html = (site / "public/corner/index.html").read_text()
    head = html[html.index("<thead>"): html.index("</thead>")]
    assert re.findall(r"<t[hd][^>]*>[^<]*</t[hd]>", head) == \
        ["<td></td>", '<th style="text-align:right">low</th>', '<th style="text-align:right">high</th>'], head
    assert not re.search(r"<th\b[^>]*>\s*</th>", html)


def test_study_page_header_and_bundle(site, monkeypatch):
    """The generator's side of the bundle contract, with stand-ins for site_src.bundles."""
    import site_src.bundles as bundles

    class FakeBundle:
        name = "demo"
        zip_href = "bundles/demo.zip"
        sha256 = "0" * 64  # the page cites the bundle by it (site_src/reader/cite.py)

    calls = []
    monkeypatch.setattr(bundles, "build_bundle", lambda study_dir, repo_root, members=None: calls.append(study_dir.name) or FakeBundle())
    monkeypatch.setattr(bundles, "public_files", lambda found: {"bundles/demo.zip": b"zip", "SHA256SUMS": b"sums\n"})
    monkeypatch.setattr(bundles, "verify_published", lambda public, html, bundle, page: calls.append(page))
    (site / "templates/partials/bundle.html").write_text(
        '<section id="bundle-{{ bundle.name }}"><h2>Reproduce this</h2><a href="{{ rel }}{{ bundle.zip_href }}">zip</a></section>\n')
    write_page(site, "studies/demo.md", "## Result\n\nThe mean rho is {{ golden.json:3 }}.\n",
               "title: Demo study\nsummary: A study page.\nsubject: tiny/Reward-Model\nquestion: Where is it?\n"
               "access: forward only\ntrust: exploratory\nclaim: observational vs causal\n"
               "bundle: demo\n")
    assert run(site) == 0
    html = (site / "public/studies/demo/index.html").read_text()
    assert '<dt>subject</dt>\n<dd data-pagefind-weight="6">tiny/Reward-Model</dd>' in html
    assert "<dt>reproduction</dt>\n<dd>No independent reproduction recorded</dd>" in html  # computed, never typed
    # 'calibrated' needs a scorecard (tests/honesty); a chip is text, colour and a symbol
    assert '<span class="chip trust trust-exploratory"><span class="chip-mark" aria-hidden="true" data-pagefind-ignore>▮▯▯</span> exploratory</span>' in html
    assert '<span class="chip claim claim-observational-vs-causal">observational vs causal</span>' in html
    assert '<a href="../../bundles/demo.zip">zip</a>' in html
    assert 'href="../../source/bundles/demo/golden.json.html#L3"' in html   # FILE resolved inside the bundle first
    assert calls == ["demo", "studies/demo/index.html"]
    assert (site / "public/bundles/demo.zip").read_bytes() == b"zip"
    home = (site / "public/index.html").read_text()
    assert '<h2 id="list-g0-pages">Pages</h2>' in home and 'href="studies/demo/"' in home

