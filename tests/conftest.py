"""Shared by every part of the suite: with `CI` set, a skipped test is a failed test; and the
repository's own site, built once per session for every folder that reads it (`site_dir`).

Outside CI a test may skip when a tool is missing (a browser, Java, axe-core, an extra such as
torch), so that a partial checkout still runs what it can. CI installs everything (`make test`),
so a skip there means something the suite should have checked was not checked: this hook
reports it as a failure, naming the reason the test gave for skipping.

The site build is the slow part of most folders that need one (figures drawn cold on a fresh
clone, every bundle's reproduce.py run): tests that only read the built site share this one
(sitebuild.py), so `make test` builds it once. `SITE_DIR=path` reads an already built site instead.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _reason(longrepr) -> str:
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # (path, line, "Skipped: why")
        return f"{longrepr[0]}:{longrepr[1]}: {longrepr[2]}"
    return str(longrepr)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if _in_ci() and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, where no test may skip: {_reason(report.longrepr)}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    report = outcome.get_result()
    if _in_ci() and report.skipped:
        report.outcome = "failed"
        report.longrepr = f"collection skipped in CI, where no test may skip: {_reason(report.longrepr)}"


# --- the site, built once -------------------------------------------------------------------

# importlib mode: make the helper importable; last on the path, so that the test folders (namespace
# packages to Python) never shadow a module of the same name. Imported where it is used: the
# hooks above work without it (tests/site/test_never_skip.py runs this file on its own).
sys.path.append(str(Path(__file__).resolve().parent))


@pytest.fixture(scope="session")
def site_dir() -> Path:
    """The repository's site, built once by the generator's own command line into a temporary
    folder and shared by every test that reads it (tests must not write into it)."""
    from sitebuild import built_site
    try:
        return built_site()
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)


def pytest_generate_tests(metafunc):
    """A test taking `site_page` runs once per page of the built site (built here, at collection,
    once for the session)."""
    if "site_page" not in metafunc.fixturenames:
        return
    from sitebuild import built_pages, built_site
    try:
        pages = built_pages(built_site())
    except RuntimeError as exc:   # reported by the tests themselves (site_dir fails with it)
        pages = [f"(build failed: {str(exc).splitlines()[0]})"]
    metafunc.parametrize("site_page", pages, ids=[f"/{p}" for p in pages])


def pytest_collection_finish(session):
    """The session's heap (torch, transformers, every module the tests import) is frozen once
    collected: the cycle collector's full passes skip it. The collector also runs less often
    (site_src/site.py's `fewer_collections` does the same for each build). Measured on
    tests/incremental, interleaved: 137 and 155 s at Python's defaults, 101 and 108 s with both."""
    import gc
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)
