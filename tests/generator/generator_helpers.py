"""Helpers for the generator tests (imported by name: conftest puts this folder on sys.path)."""
from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "repo"
sys.path.insert(0, str(REPO))  # build.py is a script at the repository root

import build as build_cli  # noqa: E402


def make_site(tmp_path) -> Path:
    """A copy of the fixture repository, with this repository's real templates."""
    root = tmp_path / "repo"
    shutil.copytree(FIXTURE, root)
    shutil.copytree(REPO / "templates", root / "templates",
                    ignore=shutil.ignore_patterns("bundle.html"))
    return root


def run(root: Path, *args: str) -> int:
    return build_cli.main(["--root", str(root), *args])


def tree_digest(path: Path) -> dict[str, str]:
    """{relative path: sha256} of every file under `path`: a byte-for-byte snapshot."""
    return {p.relative_to(path).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*")) if p.is_file()}


def write_page(root: Path, name: str, body: str, front: str = "title: Bad page\nsummary: A page with a problem.\n") -> Path:
    path = root / "content" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\n{front}---\n{body}", encoding="utf-8")
    return path
