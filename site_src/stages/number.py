"""Stage 2, number the figures: every page is parsed (its blocks checked against their schema) and
every figure block gets its "Fig. N.M" before any page renders, so a [[fig:ID]] may point forward
or to another page."""
from __future__ import annotations

from ..blocks import figure
from ..incremental import PageMemo
from ..markdown import make_parser, parse_page
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
        memo.number_page(page, figures, site.errors, lambda: figure.number(   # replayed for an unchanged page
            page, parse_page(page, parser_for(parsers, page), site.errors).figures, figures, site.errors))
    memo.set_site(site.pages, site.order, figures)
    return Numbered(site, parsers, figures, memo)
