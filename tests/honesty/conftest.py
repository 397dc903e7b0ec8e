"""Shared helpers for the honesty tests: a built tiny bundle, and running its check as a user does."""
from __future__ import annotations

import io
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from site_src import bundles
from site_src.errors import Errors

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "tests" / "bundles" / "fixtures" / "tiny"


@pytest.fixture(scope="session")
def tiny_bundle() -> bundles.Bundle:
    return bundles.build_bundle(TINY, REPO)


def unzip(bundle: bundles.Bundle, target: Path) -> Path:
    with zipfile.ZipFile(io.BytesIO(bundle.zip_bytes)) as archive:
        archive.extractall(target)
    return target


def run_record(folder: Path, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`python3 -I -S reproduce.py --record`, run inside the unzipped folder."""
    return subprocess.run([sys.executable, "-I", "-S", "reproduce.py", "--record"], cwd=cwd or folder,
                          capture_output=True, text=True, timeout=60)


@pytest.fixture
def errors() -> Errors:
    return Errors()


STUDY_FRONT = ("title: Tiny study\nsummary: A study page.\nsubject: the tiny fixture\nquestion: Where is it?\n"
               "access: forward only\ntrust: exploratory\nclaim: observational vs causal\nbundle: tiny\n")


def make_study_site(tmp_path: Path, front: str = STUDY_FRONT, body: str = "## Result\n\nThe mean rho is {{ golden.json#mean_rho }}.\n") -> Path:
    """The generator tests' fixture repository, this repository's templates, and the tiny study."""
    import shutil
    root = tmp_path / "repo"
    shutil.copytree(REPO / "tests" / "generator" / "fixtures" / "repo", root)
    shutil.copytree(REPO / "templates", root / "templates")
    shutil.copytree(TINY, root / "bundles" / "tiny")
    page = root / "content" / "studies" / "tiny.md"
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(f"---\n{front}---\n{body}", encoding="utf-8")
    return root


def build_site(root: Path):
    """collect() the site: (BuildResult, error lines). The build reads only git-tracked files, so
    the folder becomes a git repository with every file staged first."""
    import subprocess
    from site_src.site import collect
    if not (root / ".git").exists():
        subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    result = collect(root)
    return result, result.errors.lines()
