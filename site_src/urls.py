"""The site's URL layout, in one place: where each kind of file is published and how it is linked.

    <page>/index.html          a page's clean URL (`content/a/b.md` -> `a/b/`; `index.md` -> ``)
    source/<repo path>         a fixture, byte for byte
    source/<repo path>.html    its line-numbered view, with `#L<n>` anchors
    bundles/<study>.zip        a study's bundle (and bundles/<study>/<kit file>)
    assets/<name>              CSS, scripts and figure files
    sitemap.xml, SHA256SUMS    at the root

Output paths are file names (raw); links are URLs: every path segment is percent-encoded, so a
file named `a%b?.json` gets a link that reaches it. Every link the site emits is relative.
"""
from __future__ import annotations

from urllib.parse import quote

SOURCE = "source"
ASSETS = "assets"
BUNDLES = "bundles"
RESERVED = (ASSETS, BUNDLES, SOURCE)      # top-level folders no page may take
_SAFE = "/-._~!$&'()*+,;=:@"               # RFC 3986 path characters, left as they are


def url_path(path: str) -> str:
    """A site-relative output path as a URL path (percent-encoded where needed)."""
    return quote(path, safe=_SAFE)


def source_path(rel: str) -> str:
    """Output path of a published fixture (repository-relative `rel`)."""
    return f"{SOURCE}/{rel}"


def source_view_path(rel: str) -> str:
    """Output path of a fixture's line-numbered view."""
    return f"{SOURCE}/{rel}.html"


def source_href(rel: str, line: int | None = None, view: bool = False) -> str:
    """Site-root-relative URL of a fixture: its line view (at `line`) or the raw file."""
    if line is not None:
        return f"{url_path(source_view_path(rel))}#L{line}"
    return url_path(source_view_path(rel) if view else source_path(rel))


def page_path(url: str) -> str:
    """Output path of a page whose clean URL folder is `url` ('' for the home page)."""
    return f"{url}index.html"


def href(prefix: str, path: str) -> str:
    """A relative link from a page `prefix` ('../' per level) to a site path or page folder."""
    return (prefix + url_path(path)) or "./"
