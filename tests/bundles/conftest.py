"""Shared helpers for the bundle tests: the tiny fixture study and a way to run its check."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bundle_kit import contract

REPO = Path(__file__).resolve().parents[2]
TINY = Path(__file__).resolve().parent / "fixtures" / "tiny"
KIT = REPO / "bundle_kit"


@pytest.fixture
def unzipped(tmp_path) -> Path:
    """A copy of the tiny study with the kit files beside it, as a user's unzipped bundle."""
    folder = tmp_path / "tiny"
    shutil.copytree(TINY, folder)
    for name in contract.KIT_FILES:
        shutil.copy(KIT / name, folder / name)
    return folder


def _run(folder: Path, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *flags, "reproduce.py"], cwd=folder, capture_output=True,
                          text=True, timeout=60)


@pytest.fixture
def run_check():
    """Run a bundle folder's own reproduce.py from that folder (flags go to python, e.g. -I -S)."""
    return _run
