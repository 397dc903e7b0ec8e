"""Shared by every part of the suite: with `CI` set, a skipped test is a failed test; and the
repository's own site, built once per session for every folder that reads it (`site_dir`).

Outside CI a test may skip when a tool is missing (a browser, Java, axe-core, an extra such as
torch), so that a partial checkout still runs what it can. CI installs everything (`make test`),
so a skip there means something the suite should have checked was not checked: this hook
reports it as a failure, naming the reason the test gave for skipping.

The site build is the slow part of most folders that need one (figures drawn cold on a fresh
clone, every bundle's reproduce.py run): tests that only read the built site share this one, so
`make test` builds it once. `SITE_DIR=path` reads an already built site instead.
"""
from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


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

_BUILT: dict = {}


def built_site() -> Path:
    """The site, built once per session by the generator's own command line into a temporary
    folder (removed at exit); raises RuntimeError with the build's output if it fails."""
    given = os.environ.get("SITE_DIR")
    if given:
        return Path(given).resolve()
    if "out" not in _BUILT:
        folder = Path(tempfile.mkdtemp(prefix="site-test-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        out = folder / "public"
        cmd = [sys.executable, str(REPO / "build.py"), "build", "--out", str(out)]
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0 or not (out / "index.html").is_file():
            _BUILT["error"] = (f"site build failed ({' '.join(cmd[1:])}, exit {proc.returncode}):\n"
                               f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
        _BUILT["out"] = out
    if "error" in _BUILT:
        raise RuntimeError(_BUILT["error"])
    return _BUILT["out"]


@pytest.fixture(scope="session")
def site_dir() -> Path:
    """The repository's site, built once by the generator's own command line into a temporary
    folder and shared by every test that reads it (tests must not write into it)."""
    try:
        return built_site()
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)
