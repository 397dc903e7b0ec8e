"""Shared by every part of the suite: with `CI` set, a skipped test is a failed test.

Outside CI a test may skip when a tool is missing (a browser, Java, axe-core, an extra such as
torch), so that a partial checkout still runs what it can. CI installs everything (`make test`),
so a skip there means something the suite should have checked was not checked: this hook
reports it as a failure, naming the reason the test gave for skipping.
"""
from __future__ import annotations

import os

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
