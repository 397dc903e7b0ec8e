"""Helpers for the generator tests (imported by name: conftest puts this folder on sys.path)."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "repo"
sys.path.insert(0, str(REPO))  # build.py is a script at the repository root

import build as build_cli  # noqa: E402


GITIGNORE = "/public\n/.public.builds/\n.cache/\n"


def git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.org",
                           "-c", "commit.gpgsign=false", *args], capture_output=True, text=True, check=True)
    return done.stdout


def commit_all(root: Path) -> None:
    """Make `root` a git repository holding every file in it, committed."""
    if not (root / ".git").exists():
        git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "--allow-empty", "-m", "files")


def make_site(tmp_path) -> Path:
    """A copy of the fixture repository, with this repository's real templates, committed to a
    fresh git repository (the build reads only tracked files)."""
    root = tmp_path / "repo"
    shutil.copytree(FIXTURE, root)
    shutil.copytree(REPO / "templates", root / "templates",
                    ignore=shutil.ignore_patterns("bundle.html"))
    (root / ".gitignore").write_text(GITIGNORE)
    commit_all(root)
    return root


def run(root: Path, *args: str, stage: bool = True) -> int:
    """build.py's main; first `git add -A`, as an author adds the files they wrote (stage=False
    leaves new files untracked)."""
    if stage and (root / ".git").exists() and Path(root).resolve() != REPO:  # never touch this repo's index
        git(root, "add", "-A")
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


def snapshot(path: Path, skip: tuple[str, ...] = (".cache",)) -> dict[str, str]:
    """Everything under `path`, links not followed: {relative path: sha256 | 'link -> target' | 'dir MODE'}.
    Unlike tree_digest it sees .git, empty folders, symbolic links and permissions. `skip`: the
    generator's own figure cache (.cache/, git-ignored), which a build may fill before it fails."""
    out = {}
    for folder, dirs, names in os.walk(path, followlinks=False):
        base = Path(folder)
        if base == path:
            dirs[:] = [d for d in dirs if d not in skip]
        for name in dirs + names:
            item = base / name
            rel = item.relative_to(path).as_posix()
            if item.is_symlink():
                out[rel] = f"link -> {os.readlink(item)}"
            elif item.is_dir():
                out[rel] = f"dir {oct(item.stat().st_mode & 0o7777)}"
            else:
                out[rel] = hashlib.sha256(item.read_bytes()).hexdigest()
    return out


def refused(capsys, root: Path, *args: str, expect: tuple[str, ...], watch: tuple[Path, ...] = ()) -> str:
    """Stage every file, then build with `args`: the build must exit 1 printing every `expect`
    fragment on stderr, and leave the repository (with .git) and every folder in `watch` exactly
    as they were. Returns stderr."""
    git(root, "add", "-A")
    capsys.readouterr()
    before = [snapshot(root)] + [snapshot(w) for w in watch]
    code = run(root, *args, stage=False)
    err = capsys.readouterr().err
    assert code == 1, err
    for fragment in expect:
        assert fragment in err, f"{fragment!r} not in:\n{err}"
    assert "Traceback" not in err
    assert [snapshot(root)] + [snapshot(w) for w in watch] == before
    return err
