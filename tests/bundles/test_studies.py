"""Every committed study under bundles/ builds into a bundle whose own check passes."""
from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from site_src import bundles

REPO = Path(__file__).resolve().parents[2]
STUDIES = sorted(p.name for p in (REPO / "bundles").iterdir() if p.is_dir()) if (REPO / "bundles").is_dir() else []


def test_the_studies_are_committed():
    assert STUDIES, "no study under bundles/: the site's study pages have nothing to ship"


@pytest.mark.parametrize("study", STUDIES)
def test_study_bundle_builds_and_reproduces(study):
    bundle = bundles.build_bundle(REPO / "bundles" / study, REPO)  # raises if reproduce.py fails
    assert "within tolerance                       yes" in bundle.expected_output
    with zipfile.ZipFile(io.BytesIO(bundle.zip_bytes)) as archive:
        names = archive.namelist()
    assert {"README.md", "golden.json", "reproduce.py", "rankstats.py"} <= set(names)
    # a second build's zip is the same bytes (the zip is made before the check runs, and apart
    # from it: its second run, the slow part, would say nothing more about the zip's bytes)
    again = bundles.deterministic_zip(bundles.collect_members(REPO / "bundles" / study))
    assert again == bundle.zip_bytes
