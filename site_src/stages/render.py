"""Stage 3, render the pages: each page's Markdown becomes body HTML with its receipts, tables,
figures and math, by the site plugin's render rules (site_src/markdown.py); the number rule and the
robustness rule run over its prose. Errors are collected, never raised."""
from __future__ import annotations

from .. import reader
from ..errors import internal_error
from ..glossary import Glossary, load_glossary
from ..markdown import render_page
from ..pages import PROSE_FIELDS, Page
from ..render import PageContext, check_field
from ..resolve import Resolver
from .model import Numbered, PageOutput, RenderedSite, Reuse, make_anew
from .number import parser_for


def render_pages(numbered: Numbered, reuse: Reuse = make_anew) -> RenderedSite:
    """Every page in navigation order; then what rendering started is finished: the figures'
    drawings, the honesty checks, the preview images."""
    site = numbered.site
    out = RenderedSite(numbered, [], {})
    made: list[PageOutput] = []
    glossary = load_glossary(site.files, site.errors)   # content/glossary.yaml, once a build

    def render(page: Page) -> PageOutput | None:
        output = _render(numbered, page, glossary)
        if output is not None:
            made.append(output)
        return output

    for name in site.order:
        page = site.pages[name]
        for field_name in PROSE_FIELDS:
            if isinstance(page.meta.get(field_name), str):
                check_field(page.meta[field_name], page.field_where(field_name), site.errors)
        output = reuse("page", page, lambda: render(page))
        if output is None:
            continue   # an internal error, reported
        for rel, view in output.used.items():
            out.used[rel] = out.used.get(rel, False) or view
        out.outputs.append(output)
    # the figures' drawings were finished on their own thread while the pages went on rendering
    for output in made:
        page, rendered = output.page, output.rendered
        rendered.complete(page, site.errors)
        site.honesty.check_page(page, rendered)
        reader.start_preview(rendered.html, rendered.files, site.root / ".cache" / "og")
    return out


def _render(numbered: Numbered, page: Page, glossary: Glossary) -> PageOutput | None:
    site = numbered.site
    resolver = Resolver(site.root, page.meta.get("bundle"), site.cache, files=site.files)
    ctx = PageContext(page, site.errors, resolver, numbered.figures, site.jinja, site.root,
                      glossary=glossary, pages=site.pages)
    try:
        rendered = render_page(parser_for(numbered.parsers, page), ctx)
    except Exception as exc:  # a bug: reported at the page line, and the other pages still build
        site.errors.add(internal_error(exc, page.where(ctx.line)))
        return None
    return PageOutput(page, rendered, used=resolver.used, figure_count=rendered.figure_count)
