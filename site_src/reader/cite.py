""""Cite this study": a BibTeX entry on the page and a CITATION.cff beside it, both naming the
authors (site.yaml's `authors`), the page's address, the bundle's sha256 and the commit the site
was built from, so a citation pins the exact data.

The address is absolute when site.yaml gives a `base_url`. Without one the site has no known
address: the entry then holds the page's path, marked so that site.js writes in its place the
address the page is read at (and the CITATION.cff names no url)."""
from __future__ import annotations

import re

import yaml

from .facts import Facts

_BIBTEX_SPECIAL = re.compile(r"([{}%&#_$\\])")
URL_MARK = "\x00url\x00"   # where the address goes in the entry, split out for the page's markup


def _bib(text: str) -> str:
    return _BIBTEX_SPECIAL.sub(lambda m: "\\" + m.group(1) if m.group(1) != "\\" else r"\textbackslash{}", text)


def page_address(config, page) -> str:
    """The page's absolute URL with a base_url, else its path from the site root."""
    if config.base_url:
        return config.base_url.rstrip("/") + "/" + page.url
    return page.url or "./"


def _authors(config) -> str:
    # each name in braces: BibTeX keeps a name like "X maintainers" whole instead of splitting it
    return " and ".join("{" + _bib(name) + "}" for name in (config.authors or (config.title,)))


def bibtex(config, page, bundle, facts: Facts, url: str | None = None) -> str:
    """The study's BibTeX entry, naming its authors, the page's address, the bundle's sha256 and
    the commit; `url` replaces the address (URL_MARK marks where it goes)."""
    key = re.sub(r"[^A-Za-z0-9-]", "-", f"{bundle.name}-study")
    commit = facts.commit or "unknown"
    state = ", with uncommitted changes" if facts.dirty else ""
    fields = [
        ("author", None),
        ("title", _bib(page.meta.get("title", bundle.name))),
        ("howpublished", _bib(config.title)),
        ("url", None),
    ]
    if facts.date:
        fields.append(("year", facts.date[:4]))
    fields.append(("note", _bib(f"Reproducibility bundle {bundle.name}.zip, sha256 {bundle.sha256}; "
                                f"site built from commit {commit}{state}")))
    width = max(len(name) for name, _ in fields)
    values = {"author": _authors(config), "url": page_address(config, page) if url is None else url}
    body = ",\n".join(f"  {name.ljust(width)} = {{{values[name] if value is None else value}}}"
                      for name, value in fields)
    return f"@misc{{{key},\n{body}\n}}\n"


def citation_cff(config, page, bundle, facts: Facts) -> str:
    """The study's CITATION.cff, naming the bundle's sha256 and the commit."""
    message = "If you use this study's data, cite it as below; the identifier is the sha256 of its bundle."
    if facts.dirty:
        message += " This site was built from a checkout with uncommitted changes: the commit alone does not give it."
    data = {
        "cff-version": "1.2.0",
        "message": message,
        "type": "dataset",
        "title": page.meta.get("title", bundle.name),
        "authors": [{"name": name} for name in (config.authors or (config.title,))],
        "abstract": page.meta.get("summary", ""),
    }
    if facts.commit:
        data["version"] = facts.commit[:12]
        data["commit"] = facts.commit
    if facts.date:
        data["date-released"] = facts.date
    data["identifiers"] = [{"type": "other", "value": f"sha256:{bundle.sha256}",
                            "description": f"sha256 of {bundle.name}.zip, the study's reproducibility bundle"}]
    if config.base_url:
        data["url"] = page_address(config, page)
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)


def cite_context(config, page, bundle, facts: Facts) -> tuple[dict, dict]:
    """(template context, files) of a study page's "Cite this study" block."""
    cff_path = f"{page.url}CITATION.cff"
    entry = bibtex(config, page, bundle, facts)
    before, after = bibtex(config, page, bundle, facts, url=URL_MARK).split(URL_MARK)
    context = {"bibtex": entry, "bibtex_before_url": before, "bibtex_after_url": after,
               "url": page_address(config, page), "absolute_url": bool(config.base_url),
               "cff_href": "CITATION.cff", "sha256": bundle.sha256, "commit": facts.commit or "",
               "dirty": facts.dirty, "name": bundle.name}
    return context, {cff_path: citation_cff(config, page, bundle, facts).encode("utf-8")}
