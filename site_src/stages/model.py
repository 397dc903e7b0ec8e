"""The typed objects the stages pass along: each stage takes the one before's and returns its own.

    load_site -> Site -> number_figures -> Numbered -> render_pages -> RenderedSite
      -> build_bundles -> Bundled -> publish -> BuildResult -> write_and_swap -> BuildResult

and the one hook a stage may get from site.py, `Reuse`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

import jinja2

from ..config import SiteConfig
from ..errors import Errors
from ..fixtures import FixtureCache
from ..honesty import Honesty
from ..pages import Page
from ..paths import RepoFiles
from ..bundles import Bundle
from ..reader import Facts
from ..render import Rendered


# reuse(what, subject, make) -> make()'s result for `subject`, or the same result the last build
# made when nothing it was made from changed (site.py passes the page cache's, incremental.PageMemo
# .reuse, which lists the `what`s). A stage calls it the same way either way, and cannot tell.
Reuse = Callable[[str, Any, Callable[[], Any]], Any]


def make_anew(what: str, subject, make):
    """The `Reuse` of a clean build: everything is made."""
    return make()


class PageCache(Protocol):
    """What site.py's page cache (incremental.PageMemo) offers: the stages' hook, and the save
    once the new site is in place."""

    def reuse(self, what: str, subject: Any, make: Callable[[], Any]) -> Any:
        """The `Reuse` hook."""

    def commit(self) -> None:
        """Keep what this build made, for the next one."""


@dataclass
class Site:
    """Everything read before any page is rendered (stage load)."""

    root: Path
    files: RepoFiles               # the path policy: what may be read
    errors: Errors
    config: SiteConfig
    pages: dict[str, Page]         # content-relative path -> page
    order: list[str]               # navigation order (the N of "Fig. N.M")
    jinja: jinja2.Environment
    facts: Facts                   # the commit the site is built from (site_src/reader)
    cache: FixtureCache
    honesty: Honesty
    nav_links: dict = field(default_factory=dict, repr=False)   # stage 5: the navigation's links per folder depth


@dataclass
class Numbered:
    """Every figure numbered before any page renders, so [[fig:]] may point forward (stage number)."""

    site: Site
    parsers: dict                  # raw_html flag -> the page parser
    figures: dict                  # figure id -> blocks.figure.FigureInfo


@dataclass
class PageOutput:
    """One page after stage render (its bundle attached by stage bundle)."""

    page: Page
    rendered: Rendered | None      # body HTML, receipts, headings, figure files (None: reused whole)
    bundle: Bundle | None = None   # the bundle of a study page, once built
    used: dict = field(default_factory=dict)   # the fixtures this page cited -> needs a line view
    figure_count: int = 0


@dataclass
class RenderedSite:
    """Each page's Markdown rendered, and every fixture a page used (stage render)."""

    numbered: Numbered
    outputs: list[PageOutput]
    used: dict[str, bool]          # repo-relative fixture -> needs a line-numbered view


@dataclass
class Bundled:
    """Study bundles built and attached to their pages (stage bundle)."""

    rendered: RenderedSite
    bundles: dict[str, Bundle]     # study name -> its bundle


@dataclass
class BuildResult:
    """What a build made: its errors, and {path under the site root: bytes (or CopiedFile)}."""

    errors: Errors
    files: dict = field(default_factory=dict)          # path -> bytes | sources.CopiedFile
    bundle_pages: list[tuple[str, Bundle]] = field(default_factory=list)   # (page output path, its bundle)
    note: str = ""                                     # e.g. how many pages were reused (site_src/incremental.py)
    memo: PageCache | None = field(default=None, repr=False)   # site.py's page cache of this build
    search: object = field(default=None, repr=False)   # the search index being made (reader.Indexing), or None
    digests: dict = field(default_factory=dict, repr=False)   # path -> sha256 the build already knows (a zip's)

    @property
    def ok(self) -> bool:
        """Whether the build found no error."""
        return not self.errors
