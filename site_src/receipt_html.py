"""How a resolved value looks on a page: the value, linked to its fixture line, with its receipt.

The receipt is a sibling `role=tooltip` element named by `aria-describedby`, so screen readers
read it with the value; CSS shows it on hover and on keyboard focus (no script).
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
    raw = raw_text(resolved.value)
    tip = f"{resolved.receipt}. Raw value: {raw}"
    attrs = (f' id="{rid}-v" aria-describedby="{rid}" data-value="{escape(raw)}" data-source="{escape(resolved.location)}"')
    # text values (a label, a citation) read as prose, not as a number: styled apart (site.css)
    numeric = isinstance(resolved.value, (int, float)) and not isinstance(resolved.value, bool)
    outer = "ref" if numeric else "ref ref-text"
    if resolved.href:
        value = f'<a class="ref-value" href="{escape(prefix + resolved.href)}"{attrs}>{escape(text)}</a>'
    else:  # only outside-repository files (the `ref` command) lack a published view
        value = f'<span class="ref-value" tabindex="0"{attrs}>{escape(text)}</span>'
    return Markup(f'<span class="{outer}">{value}<span class="ref-tip" role="tooltip" id="{rid}">'
                  f"{escape(tip)}</span></span>")
