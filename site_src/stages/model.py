"""The typed objects the stages pass along: each stage takes the one before's and returns its own.

    load_site -> Site -> number_figures -> Numbered -> render_pages -> RenderedSite
      -> build_bundles -> Bundled -> publish -> Published -> write_and_swap -> BuildResult
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import jinja2

from ..config import SiteConfig
from ..errors import Errors
from ..fixtures import FixtureCache
from ..honesty import Honesty
from ..pages import Page
from ..paths import RepoFiles
from ..reader import Facts


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
    nav_html: dict = field(default_factory=dict, repr=False)   # stage 5: the navigation per folder depth


@dataclass
class Numbered:
    """Every figure numbered before any page renders, so [[fig:]] may point forward (stage number)."""

    site: Site
    parsers: dict                  # raw_html flag -> the page parser
    figures: dict                  # figure id -> FigureInfo
    memo: object                   # incremental.PageMemo: pages reused from the last build


@dataclass
class PageOutput:
    page: Page
    rendered: object               # render.Rendered: body HTML, receipts, headings, figure files
    bundle: object = None          # bundles.Bundle of a study page, once built
    reused: int | None = None      # figure count of a page replayed from the page cache (not rendered)
    used: dict = field(default_factory=dict)   # the fixtures this page cited (for the page cache)

    @property
    def figure_count(self) -> int:
        return self.reused if self.reused is not None else self.rendered.figure_count


@dataclass
class RenderedSite:
    """Each page's Markdown rendered, and every fixture a page used (stage render)."""

    numbered: Numbered
    outputs: list[PageOutput]
    used: dict[str, bool]          # repo-relative fixture -> needs a line-numbered view
    files: dict = field(default_factory=dict)   # files the pages' figures produced


@dataclass
class Bundled:
    """Study bundles built and attached to their pages (stage bundle)."""

    rendered: RenderedSite
    bundles: dict                  # study name -> bundles.Bundle


@dataclass
class BuildResult:
    """What a build made: its errors, and {path under the site root: bytes (or CopiedFile)}."""

    errors: Errors
    files: dict = field(default_factory=dict)
    bundle_pages: list = field(default_factory=list)   # (page output path, Bundle)
    note: str = ""                                     # e.g. how many pages were reused (site_src/incremental.py)
    memo: object = field(default=None, repr=False)     # the page cache of this build

    @property
    def ok(self) -> bool:
        return not self.errors
