"""The provenance page of a content page: every measured value it shows, grouped by the fixture it
was read from, at `<page>/provenance.html` beside the page. The page itself keeps a short summary
per fixture and a link here, so the values' full list does not weigh on every reader's download.
"""
from __future__ import annotations

from site_src.receipt_html import provenance_row

NAME = "provenance.html"


def rows(rendered, prefix: str, shown_in: dict | None = None) -> list[dict]:
    """One row per value, in reading order (the template groups them by fixture). `shown_in`:
    {receipt id: the file beside the page that shows that value instead of the page}."""
    shown_in = shown_in or {}
    return [{**provenance_row(resolved, text, rid, prefix), "page": shown_in.get(rid, "")}
            for resolved, text, rid in rendered.values]


def provenance_page(jinja, common: dict, page, rendered, shown_in: dict | None = None) -> dict:
    """{path under public/: bytes} of the page's provenance page; {} for a page with no values.
    `common` is the layout context for a page in the page's own folder; `shown_in` as for `rows`."""
    if not rendered.values:
        return {}
    title = page.meta.get("title", page.rel)
    html = jinja.get_template("provenance_page.html").render(
        **common, title=f"Where the numbers come from: {title}", description="", page_title=title,
        page_href="./", provenance=rows(rendered, common["rel"], shown_in))
    return {f"{page.url}{NAME}": html.encode("utf-8")}
