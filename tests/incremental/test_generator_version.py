"""The generator's version, part of every incremental key (site_src/incremental.py), names the
libraries that shape the output by their installed versions, read without importlib.metadata (a
tenth of a no-op build): the same versions it would give."""
from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

from site_src import incremental

REPO = Path(__file__).resolve().parents[2]


def test_the_versions_are_the_ones_importlib_metadata_gives():
    names = incremental.LIBRARIES + ("no-such-distribution-here",)
    for name, version in incremental.library_versions(names):
        try:
            expected = metadata.version(name)
        except metadata.PackageNotFoundError:
            expected = None
        assert version == expected, name
    assert dict(incremental.library_versions(names))["no-such-distribution-here"] is None


def test_a_no_op_check_does_not_import_importlib_metadata(tmp_path):
    code = ("import sys; from pathlib import Path; from site_src import incremental; "
            "incremental.generator_version(incremental.Digests({}), Path(sys.argv[1])); "
            "print('importlib.metadata' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code, str(REPO)], capture_output=True, text=True, cwd=REPO,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
