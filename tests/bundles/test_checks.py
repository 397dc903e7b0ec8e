"""A bundle's check: its output kept by the zip's sha256 and the interpreter, and a time limit
that scales with the check and the machine (site_src/bundle_checks.py; issue 28 item 11: a fixed
120 s limit failed builds on a loaded two-core machine)."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from site_src import bundle_checks, bundles

TINY = Path(__file__).resolve().parent / "fixtures" / "tiny"
SLOW = "import time\ntime.sleep(2.5)\nprint('checked')\n"


def _zip(script: str) -> bytes:
    return bundles.deterministic_zip([("reproduce.py", script.encode())])


def _machine(monkeypatch, load: float, cpus: int = 2) -> None:
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(os, "cpu_count", lambda: cpus)


def test_a_second_build_of_the_same_zip_does_not_run_its_check_again(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    shutil.copytree(TINY, root / "bundles" / "tiny")
    runs = []
    real = subprocess.run

    def counted(args, *a, **k):
        if "reproduce.py" in args:
            runs.append(k.get("cwd"))
        return real(args, *a, **k)
    monkeypatch.setattr(subprocess, "run", counted)
    first = bundles.build_bundle(root / "bundles" / "tiny", root)
    second = bundles.build_bundle(root / "bundles" / "tiny", root)
    assert len(runs) == 1 and second == first and "tiny" in first.expected_output
    (root / "bundles/tiny/README.md").write_text("The tiny study, edited.\n")   # another zip: checked
    third = bundles.build_bundle(root / "bundles" / "tiny", root)
    assert len(runs) == 2 and third.sha256 != first.sha256 and third.expected_output == first.expected_output


def test_kept_only_for_the_same_zip_and_interpreter_and_never_a_failure(tmp_path, monkeypatch):
    ran = []

    def run(limit):
        ran.append(limit)
        return "output\n"
    zip_a, zip_b = _zip("print(1)\n"), _zip("print(2)\n")
    assert bundle_checks.output("s", zip_a, tmp_path, run) == "output\n" and len(ran) == 1
    assert bundle_checks.output("s", zip_a, tmp_path, run) == "output\n" and len(ran) == 1
    bundle_checks.output("s", zip_b, tmp_path, run)
    assert len(ran) == 2
    monkeypatch.setattr(bundle_checks, "interpreter", lambda: "another python")
    bundle_checks.output("s", zip_a, tmp_path, run)
    assert len(ran) == 3

    def fails(limit):
        raise bundles.BundleError("bundle s: reproduce.py exited 1")
    zip_c = _zip("print(3)\n")
    for _ in range(2):
        with pytest.raises(bundles.BundleError):
            bundle_checks.output("s", zip_c, tmp_path, fails)
    for damage in ("not json", "[]", '{"stdout": 3}'):
        for entry in (tmp_path / bundle_checks.FOLDER).glob("*.json"):
            entry.write_text(damage)
        assert bundle_checks.output("s", zip_a, tmp_path, run) == "output\n"
    assert len(ran) == 6


def test_the_limit_follows_the_last_run_the_zip_and_the_load():
    floor = bundle_checks.FLOOR_S
    assert bundle_checks.time_limit(0, None, load=0.5, cpus=2).seconds == pytest.approx(floor)
    assert bundle_checks.time_limit(12_000_000, None, load=0.5, cpus=2).seconds == pytest.approx(
        floor + 12 * bundle_checks.PER_MB_S)
    assert bundle_checks.time_limit(0, 30.0, load=0.5, cpus=2).seconds == pytest.approx(30 * bundle_checks.MULTIPLE)
    assert bundle_checks.time_limit(0, 1.0, load=0.5, cpus=2).seconds == pytest.approx(floor)
    loaded = bundle_checks.time_limit(0, 30.0, load=8.0, cpus=2)
    assert loaded.seconds == pytest.approx(4 * 30 * bundle_checks.MULTIPLE) and "load, 8.0 on 2 cores" in loaded.why


def test_the_last_run_here_sets_the_next_limit(tmp_path):
    limits = []

    def run(limit):
        limits.append(limit)
        return "output\n"
    bundle_checks.output("study", _zip("print(1)\n"), tmp_path, run)
    assert "never measured" in limits[0].why
    bundle_checks.output("study", _zip("print(2)\n"), tmp_path, run)
    assert "its last run here" in limits[1].why
    assert bundle_checks.last_run(tmp_path / bundle_checks.FOLDER, "study") is not None
    assert bundle_checks.last_run(tmp_path / bundle_checks.FOLDER, "other") is None


def test_a_check_slower_than_the_floor_passes_on_a_loaded_machine(monkeypatch):
    monkeypatch.setattr(bundle_checks, "FLOOR_S", 1.0)
    monkeypatch.setattr(bundle_checks, "PER_MB_S", 0.0)
    _machine(monkeypatch, load=16.0)          # eight runnable tasks per core: the limit is 8 s
    assert bundles.run_reproduce("slow", _zip(SLOW)) == "checked\n"
    _machine(monkeypatch, load=0.2)           # a quiet machine: 1 s, and the error says what to do
    with pytest.raises(bundles.BundleError) as caught:
        bundles.run_reproduce("slow", _zip(SLOW))
    message = str(caught.value)
    assert "\n" not in message and message.startswith("bundle slow: reproduce.py ran past 1 s (1 s and ")
    assert f"{bundle_checks.ENV}=SECONDS" in message and "build again when it is quieter" in message


def test_the_environment_sets_the_limit_outright(monkeypatch):
    monkeypatch.setenv(bundle_checks.ENV, "0.3")
    _machine(monkeypatch, load=8.0)
    limit = bundle_checks.time_limit(10**9, 500.0)
    assert limit.seconds == 0.3
    with pytest.raises(bundles.BundleError, match=r"ran past 0\.3 s \(SITE_CHECK_TIMEOUT_S=0\.3\): raise it"):
        bundles.run_reproduce("slow", _zip(SLOW), limit=limit)
    monkeypatch.setenv(bundle_checks.ENV, "soon")     # not a number: ignored, the scaled limit holds
    assert bundle_checks.time_limit(0, None, load=0.0, cpus=2).seconds == bundle_checks.FLOOR_S
