"""Raw HTML in a page's Markdown: off unless the page's front matter says `raw_html: true`, and
even then refused where it would fetch or link another host, run script, or restyle the site.

The site promises that no file it serves names another host; a page's own HTML must keep it.
"""
from __future__ import annotations

import re
from html.parser import HTMLParser

FORBIDDEN_TAGS = frozenset("script iframe frame frameset object embed applet base link meta form style "
                           "portal svg math template noscript".split())
_URL_ATTRS = frozenset("href src srcset action formaction poster data cite background longdesc "
                       "manifest ping xlink:href".split())
_OTHER_HOST = re.compile(r"^\s*(?:[a-zA-Z][a-zA-Z0-9+.-]*:|[\\/]{2})")
_CSS_URL = re.compile(r"url\s*\(|@import|expression\s*\(", re.IGNORECASE)


class _Checker(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in FORBIDDEN_TAGS:
            self.problems.append(f"<{tag}> is not allowed in a page's HTML")
        for name, value in attrs:
            value = value or ""
            if name.startswith("on"):
                self.problems.append(f"<{tag} {name}=...>: event handlers (script) are not allowed")
            elif name in _URL_ATTRS and any(_OTHER_HOST.match(part) for part in value.split(",")):
                self.problems.append(f"<{tag} {name}={value[:60]!r}>: names another host (or a scheme); "
                                     "the site links only its own files")
            elif name == "style" and _CSS_URL.search(value):
                self.problems.append(f"<{tag} style=...>: url(), @import and expression() are not allowed")

    handle_startendtag = handle_starttag


def html_problems(fragment: str) -> list[str]:
    """What is wrong with one raw HTML fragment of a page that allows raw HTML."""
    checker = _Checker()
    checker.feed(fragment)
    checker.close()
    return checker.problems
