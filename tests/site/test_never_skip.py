"""With CI set, the suite's conftest turns every skip (in a test, a fixture or at import) into a
failure; without it, a skip stays a skip."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SKIPPING = '''
import pytest

def test_skips_inside():
    pytest.skip("no browser here")

@pytest.mark.skipif(True, reason="no Java here")
def test_marked():
    pass

@pytest.mark.xfail(reason="known", strict=False)
def test_expected_failure():
    assert False

def test_passes():
    pass
'''
IMPORT_SKIP = 'import pytest\npytest.importorskip("a_module_nobody_installed")\n\ndef test_never_runs():\n    pass\n'


def _run(tmp_path: Path, ci: str | None, *names: str) -> subprocess.CompletedProcess:
    shutil.copy(REPO / "tests" / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_skipping.py").write_text(SKIPPING)
    (tmp_path / "test_import_skip.py").write_text(IMPORT_SKIP)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider",
                           *(names or [str(tmp_path)])],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def test_in_ci_every_skip_fails(tmp_path):
    proc = _run(tmp_path, "true", "test_skipping.py")
    out = proc.stdout
    summary = out.strip().splitlines()[-1]
    assert proc.returncode == 1, out
    assert "skipped in CI, where no test may skip" in out and "no browser here" in out and "no Java here" in out
    # a skip in the call fails the test; a skipif mark (setup) makes it an error: either fails the run
    assert "1 failed" in summary and "1 error" in summary and "1 passed" in summary and "1 xfailed" in summary, summary
    assert "skipped" not in summary, summary
    # a module that skips while it is imported fails the collection, so the run fails
    proc = _run(tmp_path, "true", "test_import_skip.py")
    assert proc.returncode != 0 and "collection skipped in CI" in proc.stdout, proc.stdout
    assert "a_module_nobody_installed" in proc.stdout


def test_outside_ci_a_skip_stays_a_skip(tmp_path):
    for ci in (None, "false"):
        proc = _run(tmp_path, ci)
        summary = proc.stdout.strip().splitlines()[-1]
        assert proc.returncode == 0, proc.stdout
        assert "3 skipped" in summary and " failed" not in summary, summary
