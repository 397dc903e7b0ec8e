"""Stage 2, number the figures: every figure block of every page gets its "Fig. N.M" before any
page renders, so a [[fig:ID]] may point forward or to another page."""
from __future__ import annotations

from ..incremental import PageMemo
from ..markdown import make_parser
from ..render import collect_figures
from .model import Numbered, Site


def parser_for(parsers: dict, page):
    """The page's parser: raw HTML is parsed only where the front matter says `raw_html: true`."""
    return parsers[page.meta.get("raw_html") is True]


def number_figures(site: Site, incremental: bool = False) -> Numbered:
    parsers = {flag: make_parser(raw_html=flag) for flag in (False, True)}
    figures: dict = {}
    memo = PageMemo(site.root, site.files, enabled=incremental)   # keyed by, among others, the numbers
    for name in site.order:
        page = site.pages[name]
        memo.number_page(page, figures, site.errors, lambda: collect_figures(   # replayed for an unchanged page
            page, parser_for(parsers, page), {"jinja": site.jinja}, site.errors, figures))
    memo.set_site(site.pages, site.order, figures)
    return Numbered(site, parsers, figures, memo)
