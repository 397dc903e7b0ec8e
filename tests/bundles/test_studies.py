"""Every committed study under bundles/ builds into a bundle whose own check passes."""
from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from site_src import bundles

REPO = Path(__file__).resolve().parents[2]
STUDIES = sorted(p.name for p in (REPO / "bundles").iterdir() if p.is_dir()) if (REPO / "bundles").is_dir() else []


@pytest.mark.skipif(not STUDIES, reason="no study committed under bundles/ yet")
@pytest.mark.parametrize("study", STUDIES)
def test_study_bundle_builds_and_reproduces(study):
    bundle = bundles.build_bundle(REPO / "bundles" / study, REPO)  # raises if reproduce.py fails
    assert "within tolerance                       yes" in bundle.expected_output
    with zipfile.ZipFile(io.BytesIO(bundle.zip_bytes)) as archive:
        names = archive.namelist()
    assert {"README.md", "golden.json", "reproduce.py", "rankstats.py"} <= set(names)
    assert bundles.build_bundle(REPO / "bundles" / study, REPO).zip_bytes == bundle.zip_bytes
