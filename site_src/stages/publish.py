"""Stage 5, publish: every page through its template (with its bundle and honesty sections), the
fixtures and their line views, the bundles' zips, the static and figure assets and the sitemap,
as one map {path under the site root: bytes}. Every output path is checked."""
from __future__ import annotations

import re
from typing import Callable

import jinja2
from markupsafe import Markup, escape

from .. import browser_check, bundles, reader
from ..errors import BuildError
from ..paths import check_out_rel
from ..reader.provenance import rows as provenance_rows
from ..sources import publish as publish_sources
from ..sources import sha256
from ..urls import href, url_path
from .model import BuildResult, Bundled, Reuse, Site, make_anew

DOCS_PAGE = "how-this-site-is-built.md"


def publish(bundled: Bundled, reuse: Reuse = make_anew, made: Callable[[dict], None] | None = None) -> BuildResult:
    """The whole site as one map {path under the site root: bytes}, every output path checked.
    `made`, when given, is handed the pages as they are made (each page's files in the order of
    their paths, then the registration pages, then every other file), so that the search index
    can read them meanwhile (site.py)."""
    rendered = bundled.rendered
    site = rendered.numbered.site
    errors = site.errors
    out: dict = {}
    given: set = set()

    def hand(files: dict) -> None:
        if made is not None:
            made(dict(sorted(files.items())))
            given.update(files)
    bundle_pages = []
    check = browser_check.find(site.root) if bundled.bundles else None   # "Run the check here"
    for output in rendered.outputs:
        page, bundle = output.page, output.bundle
        study = site.honesty.study(page, bundle) if bundle is not None else None
        if bundle is not None:
            bundle_pages.append((page.out_path, bundle))
        try:
            files = reuse("page files", output, lambda: _page_files(site, output, study, check))
            out.update(files)
            hand(files)
        except jinja2.TemplateError as exc:
            errors.add(BuildError(f"template error: {exc}", page.where()))
    if bundled.bundles:
        try:
            out.update(bundles.public_files(list(bundled.bundles.values())))
        except Exception as exc:  # a zip that cannot be described: reported, the build goes on
            errors.add(BuildError(f"bundles: {exc}"))
        out.update(check.public_files())
    try:
        # the same pages while the registrations' verdicts, values and study links, the navigation,
        # the commit and the generator are (site_src/incremental.py: "registration pages")
        files = reuse("registration pages", site.honesty.pages_inputs(), lambda: site.honesty.pages(
            lambda template, prefix, **ctx: reader.word_boundaries(reader.breakable_code(
                site.jinja.get_template(template).render(**_common(site, None, prefix),
                                                         description=ctx.get("summary", ""), **ctx)))))
        out.update(files)
        hand(files)
    except jinja2.TemplateError as exc:
        errors.add(BuildError(f"template error in the registration pages: {exc}"))
    used = dict(rendered.used)
    for rel, view in site.honesty.used.items():
        used[rel] = used.get(rel, False) or view
    out.update(publish_sources(site.files, used,
                               lambda rel, data: reuse("source view", rel, lambda: _source_view(site, rel, data)), errors))
    static, refused = site.files.listed("templates/static")
    for rel, why in refused:
        errors.add(BuildError(f"static file {why}", rel))
    for rel in static:
        out[f"assets/{rel[len('templates/static/'):]}"] = site.files.read_bytes(rel)
    if any(o.figure_count for o in rendered.outputs):
        try:
            assets = reuse("figure assets", None, lambda: _figure_assets(site))
            out.update({f"assets/{name}": data for name, data in assets.items()})
        except Exception as exc:  # vl-convert's runtime could not be produced
            errors.add(BuildError(f"figures: cannot produce the figure assets: {exc}"))
    if site.config.base_url:
        out["sitemap.xml"] = _sitemap(site)
    check_nav(site, out, errors)
    _check_outputs(out, errors)
    hand({rel: data for rel, data in out.items() if rel not in given})
    # a zip's sha256 is the bundle's own (printed on its page): nothing hashes 50 MB of zips again
    digests = {b.zip_href: b.sha256 for b in bundled.bundles.values()}
    return BuildResult(errors, out, bundle_pages, note=check.note if check else "", digests=digests)


def _page_files(site: Site, output, study, check) -> dict:
    """A rendered page's published files: its HTML, its provenance page, the files its figures
    and reader features made."""
    page = output.page
    prefix = "../" * page.depth
    extra, files = reader.page_extras(site.root, site.config, page, output.rendered, output.bundle, prefix, site.facts)
    files[page.out_path] = _page_html(site, page, output.rendered, output.bundle, study,
                                      {**extra, "check": check if check and check.present else None}).encode()
    shown_in = {}
    if study is not None and study.corrections_page:   # in the page's folder: its receipts' links hold there
        html = reader.word_boundaries(reader.breakable_code(site.jinja.get_template("corrections_page.html").render(
            **_common(site, None, prefix), title=f"Corrections: {page.meta.get('title', page.rel)}", description="",
            page_title=page.meta.get("title", page.rel), page_href="./", honesty=study)))
        files[f"{page.url}{study.corrections_page}"] = html.encode()
        shown_in = dict.fromkeys(_RECEIPT_ID.findall(html), study.corrections_page)
    files.update(reader.provenance_page(site.jinja, _common(site, None, prefix), page, output.rendered, shown_in))
    return {**output.rendered.files, **files}


_RECEIPT_ID = re.compile(r'<a class="ref"[^>]*\sid="(ref-\d+)"')


def _figure_assets(site: Site) -> dict:
    from .. import figures   # imported only when the assets are not in the page cache

    return figures.figure_assets(site.root / ".cache" / "figures")


def _check_outputs(out: dict, errors) -> None:
    """Every output path stays inside the site, and no path is both a file and a folder."""
    folders = set()
    for rel in out:
        parts = rel.split("/")
        folders.update("/".join(parts[:i]) for i in range(1, len(parts)))
    for rel in sorted(out):
        why = check_out_rel(rel)
        if why:
            errors.add(BuildError(f"output path {rel[:80]!r} {why}"))
        elif rel in folders:
            errors.add(BuildError(f"output path {rel!r} is both a file and a folder of the site"))


def _generated_pages() -> dict:
    """Pages the build makes itself that the navigation may name, by URL: (name, summary)."""
    from ..honesty.site_pages import INDEX_SUMMARY, INDEX_TITLE, INDEX_URL
    return {INDEX_URL: (INDEX_TITLE, INDEX_SUMMARY)}


def nav_groups(site: Site) -> list[dict]:
    """The navigation as groups of items, in site.yaml's order; pages it does not list follow in
    an untitled group. A page whose URL lies under another item's (studies/minilm/detail/ under
    studies/minilm/) is that item's child. Each item: name, url, summary, trust, children."""
    if "groups" in site.nav_links:
        return site.nav_links["groups"]
    generated = _generated_pages()
    listed = set()
    groups = []

    def item(entry: str) -> dict | None:
        if entry.endswith("/") and not entry.endswith(".md"):
            if entry not in generated:
                return None
            name, summary = generated[entry]
            return {"name": name, "url": entry, "summary": summary, "trust": None, "children": [], "entry": entry}
        name = entry if entry.endswith(".md") else f"{entry.rstrip('/')}.md"
        page = site.pages.get(name)
        if page is None:
            return None
        listed.add(name)
        return {"name": page.name, "url": page.url, "summary": page.meta.get("summary", ""),
                "trust": page.meta.get("trust"), "children": [], "entry": name, "study": page.is_study}

    for number, group in enumerate(site.config.groups):
        items = [i for i in (item(e) for e in group.entries) if i is not None]
        groups.append({"title": group.title, "id": f"g{number}", "items": items})
    rest = [item(n) for n in site.order if n not in listed]
    if rest and groups and groups[-1]["title"] is None:
        groups[-1]["items"].extend(rest)
    elif rest:
        groups.append({"title": None, "id": f"g{len(groups)}", "items": rest})
    for group in groups:   # children under their parent, within a group
        kept = []
        for entry in group["items"]:
            parent = next((k for k in kept if k["url"] and entry["url"].startswith(k["url"])), None)
            (parent["children"] if parent else kept).append(entry)
        group["items"] = kept
    site.nav_links["groups"] = groups
    return groups


def check_nav(site: Site, out: dict, errors) -> None:
    """Every navigation entry names a page: a content page (checked when the pages load) or one
    the build made."""
    for group in site.config.groups:
        for entry in group.entries:
            if entry.endswith("/") and f"{entry}index.html" not in out:
                errors.add(BuildError(f"nav entry {entry!r} names no page the build makes",
                                      f"content/site.yaml:{site.config.nav_lines.get(entry, 1)}"))


def _crumbs(site: Site, current, prefix) -> list[dict]:
    """Where the current page sits: its group, and its parent page for a child page."""
    if current is None or current.url == "":
        return []
    for group in nav_groups(site):
        for entry in group["items"]:
            if entry["url"] == current.url:
                return [{"name": group["title"]}] if group["title"] else []
            for child in entry["children"]:
                if child["url"] == current.url:
                    return ([{"name": group["title"]}] if group["title"] else []) + [
                        {"name": entry["name"], "href": href(prefix, entry["url"])}]
    return []


def _nav(site: Site, current, prefix) -> Markup:
    """The navigation (templates/partials/nav.html) for a page at `prefix`, the current page marked.

    The template is rendered once per folder depth with no page current; the current page's links
    are then marked as the template marks them (`aria-current="page"`), a replacement instead of
    a render per page. tests/generator/test_nav.py compares both ways on every page."""
    key = ("html", prefix)
    if key not in site.nav_links:
        site.nav_links[key] = render_nav(site, None, prefix)
    html = site.nav_links[key]
    if current is None:
        return Markup(html)
    link = f'<a href="{escape(href(prefix, current.url))}">'
    return Markup(html.replace(link, f'{link[:-1]} aria-current="page">'))


def render_nav(site: Site, current_url: str | None, prefix: str) -> str:
    """templates/partials/nav.html rendered for a page at `prefix` whose URL is `current_url`."""
    return site.jinja.get_template("partials/nav.html").render(
        groups=nav_groups(site), rel=prefix, href=href, current=current_url)


def _common(site: Site, current, prefix):
    docs = site.pages.get(DOCS_PAGE)
    return {
        "site": site.config, "rel": prefix, "nav": _nav(site, current, prefix), "crumbs": _crumbs(site, current, prefix),
        "home_href": href(prefix, ""), "docs_href": href(prefix, docs.url if docs else ""),
        "extra_css": [], "extra_js": [], "extra_head": "",
    }


def _page_html(site: Site, page, rendered, bundle, honesty=None, extra=None) -> str:
    prefix = "../" * page.depth
    listing = None
    if page.url == "":   # the home page lists every group, each page under its one name
        listing = [{"id": f"list-{g['id']}-" + "-".join((g["title"] or "pages").lower().split()), "title": g["title"] or "Pages",
                    "pages": [{"title": i["name"], "summary": i["summary"], "href": href(prefix, i["url"]),
                               "trust": i["trust"], "children": [{"title": c["name"], "href": href(prefix, c["url"]),
                                                                  "summary": c["summary"]} for c in i["children"]]}
                              for i in g["items"] if i["url"] != ""]}
                   for g in nav_groups(site)]
        listing = [g for g in listing if g["pages"]]
    common = _common(site, page, prefix)
    if rendered.figure_count:
        from .. import figures   # imported by the first page with figures
        common["extra_head"] = Markup(figures.figure_head_html(prefix + "assets/"))
    template = site.jinja.get_template("page.html")
    return reader.word_boundaries(reader.breakable_code(template.render(
        **common,
        page=page, title=page.meta.get("title", ""), name=page.name, summary=page.meta.get("summary", ""),
        description=page.meta.get("summary", ""), body=Markup(reader.unindexed_blocks(reader.add_permalinks(rendered.html))),
        headings=rendered.headings, provenance=provenance_rows(rendered, prefix), listing=listing, bundle=bundle, honesty=honesty,
        **(extra or {}),
    )))


def _source_view(site: Site, rel: str, data: bytes) -> bytes:
    depth = rel.count("/") + 1  # source/<rel>.html
    prefix = "../" * depth
    text = data.decode("utf-8", errors="replace")
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    html = site.jinja.get_template("source.html").render(
        **_common(site, None, prefix), path=rel, title=rel, description="",
        raw_href=url_path(rel.rsplit("/", 1)[-1]), size=len(data), sha256=sha256(data), lines=lines)
    return html.encode()


def _sitemap(site: Site) -> bytes:
    """sitemap.xml (templates/sitemap.xml): every page's absolute URL, in navigation order."""
    base = site.config.base_url.rstrip("/") + "/"
    locs = [base + url_path(site.pages[name].url) for name in site.order]
    return site.jinja.get_template("sitemap.xml").render(locs=locs).encode()
