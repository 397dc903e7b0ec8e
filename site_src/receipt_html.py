"""How a resolved value looks on a page: the value, linked to its fixture line, with its receipt.

One element per value, and the only place that writes it:

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

from markupsafe import Markup, escape

from .receipts import Resolved


def raw_text(value) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def receipt_html(resolved: Resolved, text: str, rid: str, prefix: str) -> Markup:
    numeric = isinstance(resolved.value, (int, float)) and not isinstance(resolved.value, bool)
    cls = "ref" if numeric else "ref ref-text"
    attrs = f' id="{rid}" data-value="{escape(raw_text(resolved.value))}"'
    if not resolved.line:  # a computed value: its receipt names the expression (Resolved.receipt)
        attrs += f' data-expr="{escape(resolved.expression)}"'
    attrs += f' data-source="{escape(resolved.location)}"'
    if resolved.href:
        return Markup(f'<a class="{cls}" href="{escape(prefix + resolved.href)}"{attrs}>{escape(text)}</a>')
    # only outside-repository files (the `ref` command) lack a published view
    return Markup(f'<span class="{cls}" tabindex="0"{attrs}>{escape(text)}</span>')
