"""How a resolved value looks on a page: the value, linked to its fixture line, with its receipt,
and its row in the page's provenance table.

One element per value, written by templates/partials/receipt.html (escaped by Jinja) alone:

    <a class="ref" href="SOURCE-VIEW#Lnn" id="ref-N" data-value="RAW" data-source="PATH:LINE">SHOWN</a>

The link to the fixture line is the receipt and works without script. `data-source` is where the
value was recorded (`PATH:LINE`, or `PATH` for a computed value, which also carries `data-expr`,
the expression it was computed with); `data-value` is the raw value. The tooltip is not in the
page: templates/static/site.js makes it on hover or keyboard focus from these attributes (the
same words as `Resolved.receipt`), so a page with hundreds of values does not carry a copy of
each tip. Text values (a label, a citation) add the class `ref-text` and read as prose (site.css).
"""
from __future__ import annotations

import json

from markupsafe import Markup

from .receipts import Resolved

TEMPLATE = "partials/receipt.html"


def raw_text(value) -> str:
    """A value as its receipt's `data-value` and the provenance table show it: text as is, anything
    else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def receipt_html(jinja, resolved: Resolved, text: str, rid: str, prefix: str) -> Markup:
    """The receipt element of a value shown as `text`, with the id `rid`, on a page `prefix` away
    from the site root; `jinja` holds the site's templates."""
    numeric = isinstance(resolved.value, (int, float)) and not isinstance(resolved.value, bool)
    html = jinja.get_template(TEMPLATE).render(
        numeric=numeric, href=prefix + resolved.href if resolved.href else "", rid=rid,
        raw=raw_text(resolved.value), computed=not resolved.line,   # a computed value names its expression
        expression=resolved.expression, source=resolved.location, text=text)
    return Markup(html)


def provenance_row(resolved: Resolved, text: str, rid: str, prefix: str) -> dict:
    """A value's row in a provenance table (templates/partials/provenance_table.html): what the
    page shows, the raw value, where it was recorded or how it was computed, and its receipt's id."""
    return {"text": text, "raw": raw_text(resolved.value), "receipt": resolved.receipt,
            "href": prefix + resolved.href if resolved.href else "", "anchor": rid,
            "source": resolved.source, "line": resolved.line, "expression": resolved.expression}
