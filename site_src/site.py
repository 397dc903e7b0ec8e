"""Build the whole site, as a straight line of named stages (one module each in site_src/stages/):

    load_site -> number_figures -> render_pages -> build_bundles -> publish -> write_and_swap

(build_bundles' work is started before render_pages and collected after it.)

An incremental build (site_src/incremental.py) stops before the stages when nothing changed.
Otherwise this module owns the page cache: each stage gets one hook of it, `reuse(what, subject,
make)` (stages/model.py), and cannot tell a result made now from one the last build made; the
cache is saved here once the new site is swapped in.

Every stage collects its errors (with the page and line) instead of stopping; the site is
written only when there is none, into a fresh folder that is swapped into place by one rename.
An exception nobody expected becomes one `internal error` line, never a traceback.
"""
from __future__ import annotations

import contextlib
import gc
import os
from pathlib import Path

from safe_io import git_state_per_build

from .errors import BuildError, Errors, internal_error
from .incremental import PageMemo, record, up_to_date
from .paths import OutputFolder
from .stages.bundle import build_bundles, start_bundles
from .stages.load import load_site
from .stages.model import BuildResult
from .stages.number import number_figures
from .stages.publish import publish
from .stages.render import render_pages
from .stages.write import check_in_temporary, write_and_swap

__all__ = ["BuildResult", "build", "collect"]


def collect(root: Path, incremental: bool = False, search: bool = False) -> BuildResult:
    """Everything the site would hold, in memory: stages 1 to 5. With `incremental`, pages whose
    inputs did not change come from the page cache (site_src/incremental.py). With `search`, the
    search index is started on the pages as publish makes them (`result.search`, finished or
    abandoned by stage 6)."""
    errors = Errors()
    site = load_site(root, errors)
    if site is None:
        return BuildResult(errors)
    indexing = _start_search(errors) if search else None
    try:
        result = _stages(site, errors, root, incremental, indexing)
    except BaseException:
        if indexing is not None:
            indexing.abandon()
        raise
    if indexing is not None and not result.ok:
        indexing.abandon()
        indexing = None
    result.search = indexing
    return result


def _start_search(errors: Errors):
    from . import reader
    try:
        return reader.Indexing()
    except reader.SearchError as exc:
        errors.add(BuildError(str(exc)))
        return None


def _stages(site, errors: Errors, root: Path, incremental: bool, indexing) -> BuildResult:
    memo = PageMemo(site.root, site.files, errors, enabled=incremental)
    numbered = number_figures(site, memo.reuse)
    memo.set_site(site.pages, site.order, numbered.figures)   # what every page's key holds
    if numbered.figures and not memo.has_figure_assets():   # bundled by a worker process meanwhile
        from . import figures
        figures.prefetch_runtime(root / ".cache" / "figures")
    started = start_bundles(numbered, memo.reuse)   # stage 4's checks run beside stage 3 (subprocesses)
    rendered = render_pages(numbered, memo.reuse)
    bundled = build_bundles(rendered, started)
    result = publish(bundled, memo.reuse, indexing.add if indexing is not None else None)
    site.cache.save()   # the aggregates computed now, kept for the next build (fixtures.KeptAggregates)
    # a reused page showing a reused bundle: its printed hashes were checked when both were made
    result.bundle_pages = [(path, b) for path, b in result.bundle_pages if not memo.verified_before(path, b)]
    result.note = "; ".join(n for n in (memo.summary() if incremental else "", result.note) if n)
    result.memo = memo
    return result


@contextlib.contextmanager
def fewer_collections():
    """Run the cycle collector less often while a build runs, and put its thresholds back after.
    A build makes millions of short-lived objects (tokens, rows, spec nodes); reference counting
    frees nearly all of them. At Python's default thresholds the collector runs every 700
    allocations and rescans the survivors thousands of times per build. With these thresholds,
    measured side by side: a one-page edit about 15 % faster, a clean build 8 %, a cold build 5 %;
    the pages are the same bytes."""
    before = gc.get_threshold()
    gc.set_threshold(50_000, 20, 20)
    try:
        yield
    finally:
        gc.set_threshold(*before)


@fewer_collections()
@git_state_per_build()   # one HEAD and one `git status` per build, asked afresh by the next (serve)
def build(root: Path, out: Path | None = None, keep: bool = True, incremental: bool = True,
          known_stale: bool = False) -> BuildResult:
    """Build into a fresh build folder beside `out`; on success point `out` at it with one rename,
    else leave `out` as it was (see site_src/paths.py for what may be written where).

    With keep=False (the `check` command) the site is written to a temporary folder, checked and
    removed; `out` is never touched. With `incremental` (not for `check`), a build whose inputs did
    not change stops before rendering, and unchanged pages are reused (site_src/incremental.py);
    incremental=False is a clean build.
    """
    root = root.resolve()
    folder = OutputFolder(Path(os.path.abspath(out or root / "public")), root)
    if keep and folder.refusal():
        errors = Errors()
        errors.add(BuildError(folder.refusal(), "--out"))
        return BuildResult(errors)
    incremental = incremental and keep
    if incremental and not known_stale:   # known_stale: the caller has just asked up_to_date
        same = up_to_date(root, folder.out)
        if same is not None:
            return BuildResult(Errors(), same, note="up to date: nothing changed")
    try:
        result = collect(root, incremental, search=True)
    except Exception as exc:  # a bug outside any page: one line, nothing written
        errors = Errors()
        errors.add(internal_error(exc, "build"))
        return BuildResult(errors)
    if not result.ok:
        return result
    if not keep:
        return check_in_temporary(result)

    def swapped_in(written: dict) -> None:   # the page cache and the input record, saved only for a site in place
        result.memo.commit()
        record(folder.root, folder.out, result.files, written)
    return write_and_swap(result, folder, swapped_in if incremental else None,
                          lambda: result.memo.previous_outputs(folder.out, result.files, result.digests))
