"""The registrations' own pages: one per record and an index, rendered from templates/honesty/.

A refuted prediction gets exactly the markup a confirmed one gets: the same heading, the same
chip, the same place in the index (sorted by id, never by verdict).
"""
from __future__ import annotations

from markupsafe import Markup

from ..receipt_html import provenance_row, receipt_html
from ..receipts import Resolved
from ..urls import source_href
from .registrations import FOLDER
from .superseded import NAME

INDEX = "registrations/index.html"
INDEX_URL = "registrations/"
INDEX_TITLE = "Preregistered predictions"     # its one name: the page's title, and the navigation's
INDEX_SUMMARY = ("Predictions frozen in git before the data they predict, each with the verdict the build "
                 "computes from that data.")


def record_url(reg_id: str) -> str:
    """The URL folder of a registration's page."""
    return f"registrations/{reg_id}/"


class _Receipts:
    """Numbers receipts on one page and collects them for its provenance table."""

    def __init__(self, jinja, prefix: str):
        self.jinja, self.prefix, self.rows = jinja, prefix, []

    def __call__(self, resolved: Resolved, text: str | None = None) -> Markup:
        rid = f"ref-{len(self.rows) + 1}"
        shown = text if text is not None else resolved.display
        self.rows.append(provenance_row(resolved, shown, rid, self.prefix))
        return receipt_html(self.jinja, resolved, shown, rid, self.prefix)


def registration_pages(honesty, render) -> dict[str, bytes]:
    """{path under public/: bytes}; `render(template, prefix, **context) -> str`."""
    verified = sorted(honesty.registrations, key=lambda v: v.registration.id)
    if not verified and not (honesty.root / "registrations").is_dir():
        return {}
    files = {}
    study_urls = getattr(honesty, "study_urls", {})
    for item in verified:
        reg = item.registration
        prefix = "../../"
        receipts = _Receipts(honesty.jinja, prefix)
        context = {
            "v": item, "reg": reg,
            "value_html": receipts(item.value) if item.value else "", "kill_value_html": receipts(item.kill_value) if item.kill_value else "",
            "record_href": f"{prefix}source/{reg.rel}.html", "index_href": "../",
            "study_href": (prefix + study_urls[reg.study]) if reg.study in study_urls else "",
            "replaced_href": f"../{item.superseded.replaced_by}/" if item.superseded and item.superseded.replaced_by else "",
            "superseded_href": prefix + source_href(f"{FOLDER}/{NAME}", item.superseded.line) if item.superseded else "",
        }
        html = render("honesty/registration.html", prefix, title=f"Preregistration {reg.id}",
                      summary=reg.claim, provenance=receipts.rows, **context)
        files[f"{record_url(reg.id)}index.html"] = html.encode()
    rows = [{"v": item, "href": record_url(item.registration.id).split("/", 1)[1],
             "study_href": ("../" + study_urls[item.registration.study]) if item.registration.study in study_urls else ""}
            for item in verified]
    files[INDEX] = render("honesty/registrations.html", "../", title=INDEX_TITLE, summary=INDEX_SUMMARY,
                          rows=rows, provenance=[]).encode()
    return files
