"""How a resolved value looks on a page: the value, linked to its fixture line, with its receipt,
and its row in the page's provenance table.

One element per value, written by templates/partials/receipt.html (escaped by Jinja) alone:

    <a class="ref" href="../source/PATH.html#L12" id="ref-N" data-value="RAW">SHOWN</a>

The link to the fixture line is the receipt and works without script; the class `ref` marks a
receipt and nothing else. The tooltip is not in the page: templates/static/site.js makes it on
hover or keyboard focus (the same words as `Resolved.receipt`: where the value was recorded,
`PATH:LINE`, or `PATH` and the expression of a computed value, then the raw value), so a page
with hundreds of values does not carry a copy of each tip. Its parts are read from the element,
and the page carries only what the element does not already say, since a detail page shows
hundreds of values (docs/ARCHITECTURE.md, "Receipts"):

- where: the link's own target. `source/PATH.html#L12` names `PATH:12`; a computed value, which
  also carries `data-expr` (the expression it was computed with), names `PATH` alone.
  `data-source="WHERE"` is written only where the link does not name it (`source_from_href`
  below, and site.js's `sourceOf`, read a link the same way): a value with no published view (a
  `<span>`, e.g. a superseded record's value, read at an older commit) or a path the link cannot
  spell back.
- the raw value: `data-value="RAW"`, left out when it is the text shown.

Text values (a label, a citation) add the class `ref-text` and read as prose (site.css).
"""
from __future__ import annotations

import functools
import json
import re
from urllib.parse import unquote

from markupsafe import Markup, escape

from .receipts import Resolved
from .urls import url_path

TEMPLATE = "partials/receipt.html"


def raw_text(value) -> str:
    """A value as its receipt's `data-value` and the provenance table show it: text as is, anything
    else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


# A receipt's link to a fixture from any page: `../`s up to the site root, `source/`, the fixture's
# URL path, `.html` for its line view, `#L<line>`. The same pattern as site.js's `sourceOf` (ASCII
# digits only, the whole href); the path is percent-decoded as decodeURIComponent does.
_SOURCE_LINK = re.compile(r"(?:\.\./)*source/([^#]*?)(?:\.html)?(?:#L([0-9]+))?")


# Both read only their strings, and a site's receipts repeat them (the same fixture lines from
# pages at the same depth): each answer is kept for the build.
@functools.lru_cache(maxsize=1 << 15)
def source_from_href(href: str, computed: bool) -> str | None:
    """Where a receipt's link says its value came from (`PATH:LINE`, or `PATH` for a computed
    value), as site.js reads it when the element carries no `data-source`; None for another link."""
    match = _SOURCE_LINK.fullmatch(href)
    if not match:
        return None
    path = unquote(match.group(1), errors="strict")
    return path if computed or not match.group(2) else f"{path}:{match.group(2)}"


def receipt_html(jinja, resolved: Resolved, text: str, rid: str, prefix: str) -> Markup:
    """The receipt element of a value shown as `text`, with the id `rid`, on a page `prefix` away
    from the site root; `jinja` holds the site's templates. `data-source` and `data-value` are
    written only where the link and the text do not already say them (the module's docstring)."""
    numeric = isinstance(resolved.value, (int, float)) and not isinstance(resolved.value, bool)
    href = prefix + resolved.href if resolved.href else ""
    computed = not resolved.line        # a computed value names its expression
    source = resolved.location
    if href and _derivable(href, computed, source):
        source = ""
    raw = raw_text(resolved.value)
    shown = str(escape(raw)) == str(escape(text))   # the element's text reads back as the raw value
    html = jinja.get_template(TEMPLATE).render(
        numeric=numeric, href=href, rid=rid, raw=None if shown else raw, computed=computed,
        expression=resolved.expression, source=source, text=text)
    return Markup(html)


@functools.lru_cache(maxsize=1 << 15)
def _derivable(href: str, computed: bool, source: str) -> bool:
    """Whether site.js reads `source` back from `href`. Only a path spelled as urls.url_path spells
    it counts, where decodeURIComponent and unquote agree (no stray `%` for script to throw on)."""
    match = _SOURCE_LINK.fullmatch(href)
    # a path that url_path spells back is valid percent-encoded UTF-8: the strict decode cannot fail
    if match is None or url_path(unquote(match.group(1))) != match.group(1):
        return False
    return source_from_href(href, computed) == source


def provenance_row(resolved: Resolved, text: str, rid: str, prefix: str) -> dict:
    """A value's row in a provenance table (templates/partials/provenance_table.html): what the
    page shows, the raw value, where it was recorded or how it was computed, and its receipt's id."""
    return {"text": text, "raw": raw_text(resolved.value), "receipt": resolved.receipt,
            "href": prefix + resolved.href if resolved.href else "", "anchor": rid,
            "source": resolved.source, "line": resolved.line, "expression": resolved.expression,
            "page": ""}   # the file beside the page that shows the value, when the page itself does not
