"""The committed trained-organism study comes out of today's code byte for byte.

The bundles are registered and reproduced data: a code change that moves any committed number,
even in its last digit, must show up here rather than in the next author's rerun.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUNDLE = REPO / "bundles" / "organism"
DATA = ("attribution_per_pair.jsonl", "patching_per_pair.jsonl", "heads_attribution_per_pair.jsonl",
        "heads_patching_per_pair.jsonl", "lens_per_pair.jsonl", "pairs.jsonl", "key.json", "golden.json",
        "README.md")


def test_the_organism_study_reruns_to_the_committed_bytes(tmp_path):
    out = tmp_path / "organism"
    done = subprocess.run(
        [sys.executable, "-m", "measure", "run", "--model", "organism", "--study", "organism",
         "--out", str(out), "--runs-dir", str(tmp_path / "runs"), "--no-progress"],
        cwd=REPO, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    differ = [name for name in DATA if (out / name).read_bytes() != (BUNDLE / name).read_bytes()]
    assert not differ, f"today's code no longer reproduces bundles/organism/: {differ}"
