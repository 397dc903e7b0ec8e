"""Stage 2, number the figures: every page is parsed (its blocks checked against their schema) and
every figure block gets its "Fig. N.M" before any page renders, so a [[fig:ID]] may point forward
or to another page."""
from __future__ import annotations

from ..blocks import figure
from ..markdown import make_parser, parse_page
from .model import Numbered, Reuse, Site, make_anew


def parser_for(parsers: dict, page):
    """The page's parser: raw HTML is parsed only where the front matter says `raw_html: true`."""
    return parsers[page.meta.get("raw_html") is True]


def number_figures(site: Site, reuse: Reuse = make_anew) -> Numbered:
    """Every page's figures numbered in navigation order; an id used twice is an error."""
    parsers = {flag: make_parser(raw_html=flag) for flag in (False, True)}
    figures: dict = {}
    for name in site.order:
        page = site.pages[name]
        places = reuse("figures", page, lambda: figure.places(parse_page(page, parser_for(parsers, page), site.errors)))
        figure.number(page, places, figures, site.errors)
    return Numbered(site, parsers, figures)
