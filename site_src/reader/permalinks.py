"""A permalink beside every section heading of a page body: hover or focus the heading, copy the
link. The anchor carries no text a search index or a screen reader's heading list would pick up
as part of the title: its visible mark is drawn by CSS and its name is given by aria-label."""
from __future__ import annotations

import re
from html import escape, unescape

_HEADING = re.compile(r'<h([2-4]) id="([^"]+)">(.*?)</h\1>', re.S)
_TAGS = re.compile(r"<[^>]+>")


def permalink(anchor: str, what: str) -> str:
    """The permalink element of an anchor."""
    return (f'<a class="permalink" href="#{escape(anchor)}" aria-label="Permalink to {escape(what)}"'
            f' data-pagefind-ignore></a>')


def add_permalinks(html: str) -> str:
    """A page body with a permalink after each section heading."""
    def one(match: re.Match) -> str:
        level, anchor, inner = match.groups()
        title = " ".join(unescape(_TAGS.sub(" ", inner)).split())
        return f'<h{level} id="{anchor}">{inner}{permalink(anchor, f"section “{title}”")}</h{level}>'
    return _HEADING.sub(one, html)
