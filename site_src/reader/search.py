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

from ..errors import BuildError

FOLDER = "pagefind"
UNUSED = ("pagefind-ui.js", "pagefind-ui.css", "pagefind-component-ui.js", "pagefind-component-ui.css",
          "pagefind-modular-ui.js", "pagefind-modular-ui.css", "pagefind-highlight.js")


class SearchError(BuildError, RuntimeError):
    """The search index could not be made."""


def available() -> bool:
    """Whether Pagefind is installed."""
    return importlib.util.find_spec("pagefind") is not None


INDEXED = "**/index.html"   # the content and registration pages; the line views are source/*.html


def indexed(rel: str) -> bool:
    """Whether Pagefind reads the output file `rel` (the pages the --glob below matches)."""
    return rel == "index.html" or rel.endswith("/index.html")


def _command(site: Path) -> list[str]:
    # the binary itself when pagefind_bin can name it: `python -m pagefind` only finds and execs
    # it, at the cost of one more interpreter start
    try:
        from pagefind_bin import get_executable
        head = [str(get_executable())]
    except Exception:   # another layout of the package (or PAGEFIND_BINARY_PATH): let it find itself
        head = [sys.executable, "-m", "pagefind"]
    return [*head, "--site", str(site), "--output-subdir", FOLDER, "--glob", INDEXED, "--silent"]


class Indexing:
    """One Pagefind run over `site`, started as soon as the indexed pages are written, so that it
    works on the second core while the build writes and checks everything else."""

    def __init__(self, site: Path):
        if not available():
            raise SearchError("search: Pagefind is not installed; run `pip install 'pagefind[bin]'` (or `make site`)")
        self.site = Path(site)
        try:
            self.proc = subprocess.Popen(_command(self.site), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         text=True)
        except OSError as exc:
            raise SearchError(f"search: Pagefind did not run: {exc}") from None

    def finish(self) -> int:
        """Wait for Pagefind; the number of files it wrote. Raises SearchError."""
        try:
            stdout, stderr = self.proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            raise SearchError("search: Pagefind ran past 120 s") from None
        out = self.site / FOLDER
        if self.proc.returncode != 0 or not (out / "pagefind.js").is_file():
            raise SearchError(f"search: Pagefind failed (exit {self.proc.returncode}): {(stderr or stdout)[-2000:]}")
        for name in UNUSED:
            (out / name).unlink(missing_ok=True)
        return sum(1 for p in out.rglob("*") if p.is_file())

    def abandon(self) -> None:
        """Stop the indexer and wait for it (the build failed)."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate()


def index_search(site: Path) -> int:
    """Index the written site in `site`; returns the number of files Pagefind wrote. Raises SearchError."""
    return Indexing(site).finish()
