"""Offline search: Pagefind (`pagefind[bin]` from PyPI, binary included) indexes the written site
into pagefind/ before the new tree is swapped into place. Only the content pages are indexed
(their <article data-pagefind-body>), not the line views of fixtures. The site's own script
(templates/static/site.js) loads pagefind/pagefind.js the first time a reader focuses the search
box, so no page pays for search before it is used.

Pagefind writes ready-made UI bundles too; the site does not use them, so they are removed, and
the index is byte-identical for the same pages (checked by the tests).
"""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

FOLDER = "pagefind"
UNUSED = ("pagefind-ui.js", "pagefind-ui.css", "pagefind-component-ui.js", "pagefind-component-ui.css",
          "pagefind-modular-ui.js", "pagefind-modular-ui.css", "pagefind-highlight.js")


class SearchError(RuntimeError):
    pass


def available() -> bool:
    return importlib.util.find_spec("pagefind") is not None


def index_search(site: Path) -> int:
    """Index the site in `site`; returns the number of files Pagefind wrote. Raises SearchError."""
    if not available():
        raise SearchError("search: Pagefind is not installed; run `pip install 'pagefind[bin]'` (or `make site`)")
    cmd = [sys.executable, "-m", "pagefind", "--site", str(site), "--output-subdir", FOLDER, "--silent"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError) as exc:
        raise SearchError(f"search: Pagefind did not run: {exc}") from None
    out = Path(site) / FOLDER
    if proc.returncode != 0 or not (out / "pagefind.js").is_file():
        raise SearchError(f"search: Pagefind failed (exit {proc.returncode}): {(proc.stderr or proc.stdout)[-2000:]}")
    for name in UNUSED:
        (out / name).unlink(missing_ok=True)
    return sum(1 for p in out.rglob("*") if p.is_file())
