"""Build the whole site: pages, fixtures, bundles, figures and assets, into a file map; then write it
to a fresh directory and swap that into place only when the build had no error."""
from __future__ import annotations

import importlib
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape as xml_escape

import jinja2
from markupsafe import Markup

from .config import load_config, order_pages
from .errors import BuildError, Errors, internal_error
from .fixtures import FixtureCache
from .honesty import Honesty
from .incremental import PageMemo, record, up_to_date
from .markdown import make_parser
from .pages import PROSE_FIELDS, discover, load_page
from .render import PageRenderer, check_prose, collect_figures, install_render_rules
from .receipt_html import raw_text
from . import reader
from .paths import InputRefused, OutputFolder, OutputRefused, RepoFiles, check_out_rel
from .resolve import Resolver
from .urls import href, url_path
from .sources import CopiedFile, publish, sha256

DOCS_PAGE = "how-this-site-is-built.md"


@dataclass
class BuildResult:
    errors: Errors
    files: dict = field(default_factory=dict)
    bundle_pages: list = field(default_factory=list)   # (page output path, Bundle)
    note: str = ""                                     # e.g. how many pages were reused (site_src/incremental.py)
    memo: object = field(default=None, repr=False)     # the page cache of this build

    @property
    def ok(self) -> bool:
        return not self.errors


def rel_href(prefix: str, url: str) -> str:
    return href(prefix, url)


class RepoLoader(jinja2.BaseLoader):
    """Templates under templates/, read through the path policy (tracked, no symbolic link)."""

    def __init__(self, files: RepoFiles):
        self.files = files

    def get_source(self, environment, template):
        rel = f"templates/{template}"
        try:
            text = self.files.read_bytes(rel).decode("utf-8")
        except (InputRefused, OSError, UnicodeDecodeError) as exc:
            raise jinja2.TemplateNotFound(f"{rel}: {exc}") from None
        return text, rel, lambda: True


def make_env(files: RepoFiles) -> jinja2.Environment:
    env = jinja2.Environment(loader=RepoLoader(files), autoescape=True, undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True)
    return env


def collect(root: Path, incremental: bool = False) -> BuildResult:
    """Render everything in memory; every error is collected, none stops the build early.
    With `incremental`, pages whose inputs did not change come from the page cache."""
    root = root.resolve()
    errors = Errors()
    try:
        files = RepoFiles(root)
    except InputRefused as exc:
        errors.add(BuildError(str(exc)))
        return BuildResult(errors)
    config = load_config(files, errors)
    pages = {}
    by_url: dict[str, str] = {}
    for repo_rel in discover(files, errors):
        page = load_page(repo_rel, files, errors)
        if page is None:
            continue
        if page.url in by_url:
            errors.add(BuildError(f"page has the URL /{page.url} of {by_url[page.url]}: rename one of them",
                                  page.repo_rel))
            continue
        by_url[page.url] = page.repo_rel
        pages[page.rel] = page
    order = order_pages(config, pages, "content/site.yaml", errors)
    for number, name in enumerate(order, start=1):
        pages[name].number = number
    jinja = make_env(files)
    facts = reader.site_facts(root)
    jinja.globals.update(built=facts, og=None, cite=None)  # reader features (site_src/reader)
    parsers = {flag: make_parser(raw_html=flag) for flag in (False, True)}
    for md in parsers.values():
        install_render_rules(md)
    md_env = {"jinja": jinja}
    figures: dict = {}
    for name in order:
        collect_figures(pages[name], parsers[pages[name].meta.get("raw_html") is True], md_env, errors, figures)
    memo = PageMemo(root, files, enabled=incremental)
    memo.set_site(pages, order, figures)

    cache = FixtureCache()
    honesty = Honesty(root, errors, cache, files=files)
    honesty.study_urls = {p.meta["bundle"]: p.url for p in pages.values()
                          if p.is_study and isinstance(p.meta.get("bundle"), str)}
    used: dict[str, bool] = {}
    out: dict[str, bytes] = {}
    bundles = {}
    bundle_pages = []
    figure_count = 0
    for name in order:
        page = pages[name]
        for field_name in PROSE_FIELDS:
            if isinstance(page.meta.get(field_name), str):
                check_prose(page.meta[field_name], page.field_where(field_name), errors)
        reused = memo.replay(page, out, used)      # site_src/incremental.py: None means render it
        if reused is None:
            resolver = Resolver(root, page.meta.get("bundle"), cache, files=files)
            md = parsers[page.meta.get("raw_html") is True]
            renderer = PageRenderer(page, md, resolver, errors, figures, md_env, root)
            try:
                rendered = renderer.render()
            except Exception as exc:  # a bug: reported at the page line, and the other pages still build
                errors.add(internal_error(exc, page.where(renderer.line)))
                continue
            honesty.check_page(page, md, md_env, rendered)
            for rel, view in resolver.used.items():
                used[rel] = used.get(rel, False) or view
            out.update(rendered.files)
        figure_count += rendered.figure_count if reused is None else reused
        bundle = None
        if page.is_study and isinstance(page.meta.get("bundle"), str) and files.listed(f"bundles/{page.meta['bundle']}")[0]:
            bundle = _bundle(files, page, bundles, errors, memo)
        study = honesty.study(page, bundle) if bundle is not None else None
        if bundle is not None and not memo.verified_before(page, bundle):
            bundle_pages.append((page.out_path, bundle))
        if reused is not None:
            continue
        extra, extra_files = reader.page_extras(root, config, page, rendered, bundle, "../" * page.depth, facts)
        out.update(extra_files)
        try:
            out[page.out_path] = _page_html(jinja, config, page, pages, order, rendered, bundle, study, extra).encode()
            memo.store(page, {**rendered.files, **extra_files, page.out_path: out[page.out_path]}, resolver.used,
                       rendered.figure_count, bundle.name if bundle is not None else None)
        except jinja2.TemplateError as exc:
            errors.add(BuildError(f"template error: {exc}", page.where()))
    if bundles:
        try:
            out.update(importlib.import_module("site_src.bundles").public_files(list(bundles.values())))
        except Exception as exc:
            errors.add(BuildError(f"bundles: {exc}"))
    try:
        out.update(honesty.pages(lambda template, prefix, **ctx: jinja.get_template(template).render(
            **_common(config, pages, order, None, prefix), description=ctx.get("summary", ""), **ctx)))
    except jinja2.TemplateError as exc:
        errors.add(BuildError(f"template error in the registration pages: {exc}"))
    for rel, view in honesty.used.items():
        used[rel] = used.get(rel, False) or view
    out.update(publish(files, used, lambda rel, data: _source_view(jinja, config, pages, order, rel, data), errors))
    static, refused = files.listed("templates/static")
    for rel, why in refused:
        errors.add(BuildError(f"static file {why}", rel))
    for rel in static:
        out[f"assets/{rel[len('templates/static/'):]}"] = files.read_bytes(rel)
    if figure_count:
        try:
            assets = memo.figure_assets(lambda: importlib.import_module("site_src.figures").figure_assets(
                root / ".cache" / "figures"))
            out.update({f"assets/{name}": data for name, data in assets.items()})
        except Exception as exc:
            errors.add(BuildError(f"figures: cannot produce the figure assets: {exc}"))
    if config.base_url:
        out["sitemap.xml"] = _sitemap(config.base_url, [pages[n] for n in order])
    _check_outputs(out, errors)
    return BuildResult(errors, out, bundle_pages, note=memo.summary() if incremental else "", memo=memo)


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


def _bundle(files: RepoFiles, page, bundles: dict, errors, memo=None):
    name = page.meta["bundle"]
    if name in bundles:
        return bundles[name]
    if files.refusal("templates/partials/bundle.html"):
        errors.add(BuildError("study pages need templates/partials/bundle.html", page.field_where("bundle")))
        return None
    try:
        module = importlib.import_module("site_src.bundles")
        members = [rel[len(f"bundles/{name}/"):] for rel in files.listed(f"bundles/{name}")[0]]
        make = lambda: module.build_bundle(files.root / "bundles" / name, files.root, members=members)  # noqa: E731
        bundles[name] = memo.bundle(name, members, make) if memo is not None else make()
    except Exception as exc:
        errors.add(BuildError(f"bundle {name!r}: {exc}", page.field_where("bundle")))
        return None
    return bundles[name]


def _nav(pages, order, current, prefix):
    # nav_title: a short label for the navigation bar, where a page's title is a whole question
    return [{"title": pages[n].meta.get("nav_title") or pages[n].meta.get("title", n), "href": rel_href(prefix, pages[n].url),
             "current": current is not None and pages[n] is current} for n in order]


def _common(config, pages, order, current, prefix):
    docs = pages.get(DOCS_PAGE)
    return {
        "site": config, "rel": prefix, "nav": _nav(pages, order, current, prefix),
        "home_href": rel_href(prefix, ""), "docs_href": rel_href(prefix, docs.url if docs else ""),
        "extra_css": [], "extra_js": [], "extra_head": "",
    }


def _page_html(jinja, config, page, pages, order, rendered, bundle, honesty=None, extra=None) -> str:
    prefix = "../" * page.depth
    provenance = []
    for resolved, text, rid in rendered.values:
        provenance.append({"text": text, "raw": raw_text(resolved.value), "receipt": resolved.receipt,
                           "href": prefix + resolved.href if resolved.href else "", "anchor": rid,
                           "source": resolved.source, "line": resolved.line, "expression": resolved.expression})
    listing = None
    if page.url == "":
        others = [pages[n] for n in order if pages[n] is not page]
        groups = [("explainers", "Explainers", [p for p in others if not p.is_study]),
                  ("studies", "Studies", [p for p in others if p.is_study])]
        listing = [{"id": gid, "title": title,
                    "pages": [{"title": p.meta.get("title", p.rel), "summary": p.meta.get("summary", ""),
                               "href": rel_href(prefix, p.url), "trust": p.meta.get("trust")} for p in group]}
                   for gid, title, group in groups if group]
    common = _common(config, pages, order, page, prefix)
    if rendered.figure_count:
        head = importlib.import_module("site_src.figures").figure_head_html(prefix + "assets/")
        common["extra_head"] = Markup(head)
    template = jinja.get_template("page.html")
    return template.render(
        **common,
        page=page, title=page.meta.get("title", ""), summary=page.meta.get("summary", ""),
        description=page.meta.get("summary", ""), body=Markup(reader.add_permalinks(rendered.html)),
        headings=rendered.headings, provenance=provenance, listing=listing, bundle=bundle, honesty=honesty,
        **(extra or {}),
    )


def _source_view(jinja, config, pages, order, rel: str, data: bytes) -> bytes:
    depth = rel.count("/") + 1  # source/<rel>.html
    prefix = "../" * depth
    text = data.decode("utf-8", errors="replace")
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    html = jinja.get_template("source.html").render(
        **_common(config, pages, order, None, prefix), path=rel, title=rel, description="",
        raw_href=url_path(rel.rsplit("/", 1)[-1]), size=len(data), sha256=sha256(data), lines=lines)
    return html.encode()


def _sitemap(base_url: str, pages) -> bytes:
    base = base_url.rstrip("/") + "/"
    urls = "".join(f"  <url><loc>{xml_escape(base + url_path(p.url))}</loc></url>\n" for p in pages)
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
            f"{urls}</urlset>\n").encode()


def write_tree(files: dict, target: Path) -> None:
    for rel in sorted(files):
        path = target / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        data = files[rel]
        if isinstance(data, CopiedFile):
            shutil.copyfile(data.path, path)
        else:
            path.write_bytes(data)


def verify_bundles(target: Path, result: BuildResult) -> None:
    """Check every sha256 a page prints against the file written (the check is site_src.bundles')."""
    if not result.bundle_pages:
        return
    verify = importlib.import_module("site_src.bundles").verify_published
    for out_path, bundle in result.bundle_pages:
        try:
            verify(target, result.files[out_path].decode(), bundle, out_path)
        except Exception as exc:
            result.errors.add(BuildError(f"published bundle check failed: {exc}", out_path))


def _index_search(target: Path, result: BuildResult) -> None:
    """Offline search over the written pages (site_src/reader/search.py), before the swap."""
    if result.ok:
        try:
            reader.index_search(target)
        except reader.SearchError as exc:
            result.errors.add(BuildError(str(exc)))


def build(root: Path, out: Path | None = None, keep: bool = True, incremental: bool = True) -> BuildResult:
    """Build into a fresh build folder beside `out`; on success point `out` at it with one rename,
    else leave `out` as it was (see site_src/paths.py for what may be written where).

    With keep=False (the `check` command) the site is written to a temporary folder, checked and
    removed; `out` is never touched. With `incremental` (not for `check`), a build whose inputs did
    not change stops before rendering, and unchanged pages are reused (site_src/incremental.py);
    incremental=False is a clean build.
    """
    root = root.resolve()
    out = Path(os.path.abspath(out or root / "public"))
    target_folder = OutputFolder(out, root)
    if keep:
        why = target_folder.refusal()
        if why:
            errors = Errors()
            errors.add(BuildError(why, "--out"))
            return BuildResult(errors)
    incremental = incremental and keep
    if incremental:
        same = up_to_date(root, out)
        if same is not None:
            return BuildResult(Errors(), same, note="up to date: nothing changed")
    try:
        result = collect(root, incremental)
    except Exception as exc:
        errors = Errors()
        errors.add(internal_error(exc, "build"))
        return BuildResult(errors)
    if not result.ok:
        return result
    if not keep:
        with tempfile.TemporaryDirectory(prefix="site-check-") as tmp:
            try:
                write_tree(result.files, Path(tmp))
            except OSError as exc:
                result.errors.add(BuildError(f"cannot write the site to a temporary folder: {_os_reason(exc)}"))
                return result
            verify_bundles(Path(tmp), result)
            _index_search(Path(tmp), result)
        return result
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with target_folder.locked():
            staging = target_folder.new_build()
            swapped = False
            try:
                write_tree(result.files, staging)
                verify_bundles(staging, result)
                _index_search(staging, result)
                if result.ok:
                    target_folder.swap(staging)
                    swapped = True
                    if incremental:
                        result.memo.commit()
                        record(root, out, result.files)
            finally:
                if not swapped:
                    target_folder.discard(staging)
    except OutputRefused as exc:
        result.errors.add(BuildError(str(exc), "--out"))
    except OSError as exc:
        result.errors.add(BuildError(f"cannot write the site to {out}: {_os_reason(exc)}"))
    except Exception as exc:
        result.errors.add(internal_error(exc, "write"))
    return result


def _os_reason(exc: OSError) -> str:
    where = f" ({exc.filename})" if exc.filename else ""
    return f"{exc.strerror or exc}{where}"
