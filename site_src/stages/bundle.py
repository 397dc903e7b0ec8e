"""Stage 4, build the bundles: each study page's `bundles/<study>/` becomes a deterministic zip
whose own check is run (site_src/bundles.py); the bundle is attached to its page.

The work starts before the pages render (`start_bundles`, right after stage 2): a bundle depends
on its files only, and its check is a `reproduce.py` subprocess per study, so the checks run on
the second core while this process renders. `build_bundles` collects them in page order; every
error is reported here, in the main thread, as before.
"""
from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

from .. import bundles
from ..errors import BuildError
from .model import Bundled, Numbered, RenderedSite, Reuse, make_anew

WORKERS = 3   # threads that wait on subprocesses and zip in C; the studies of this site are three


def _wanted(site, page) -> str | None:
    name = page.meta.get("bundle")
    if page.is_study and isinstance(name, str) and site.files.listed(f"bundles/{name}")[0]:
        return name
    return None


def start_bundles(numbered: Numbered, reuse: Reuse = make_anew) -> dict[str, Future]:
    """Start every study's bundle, each once, in background threads: {name: future Bundle}."""
    site = numbered.site
    started: dict[str, Future] = {}
    pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="bundle")
    for name in site.order:
        wanted = _wanted(site, site.pages[name])
        if wanted is None or wanted in started:
            continue
        members = [rel[len(f"bundles/{wanted}/"):] for rel in site.files.listed(f"bundles/{wanted}")[0]]

        def make(wanted=wanted, members=members):
            return bundles.build_bundle(site.files.root / "bundles" / wanted, site.files.root, members=members)
        started[wanted] = pool.submit(reuse, "bundle", (wanted, members), make)
    pool.shutdown(wait=False)
    return started


def build_bundles(rendered: RenderedSite, started: dict[str, Future]) -> Bundled:
    """Collect what `start_bundles` started, in page order."""
    site = rendered.numbered.site
    built: dict = {}
    for output in rendered.outputs:
        page = output.page
        name = _wanted(site, page)
        if name is not None:
            output.bundle = _bundle(site, page, name, built, started)
    return Bundled(rendered, built)


def _bundle(site, page, name: str, built: dict, started: dict[str, Future]):
    if name in built:
        return built[name]
    if site.files.refusal("templates/partials/bundle.html"):
        site.errors.add(BuildError("study pages need templates/partials/bundle.html", page.field_where("bundle")))
        return None
    try:
        built[name] = started[name].result()
    except Exception as exc:  # BundleError names the bundle and file; anything else is reported here too
        site.errors.add(BuildError(f"bundle {name!r}: {exc}", page.field_where("bundle")))
        return None
    return built[name]
