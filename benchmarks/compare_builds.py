"""Build the committed site from two git revisions and compare the two output trees byte for byte.

Each revision is checked out into its own worktree in a temporary folder and built there with
that revision's own build.py (its own site_src/), into its own output folder. The trees are then
compared file by file. The site prints the commit it was built from (page footers, citations,
bundle descriptions), so two revisions always differ there: by default every occurrence of each
revision's commit id (full, 12 and 7 characters, `<wbr>` hints removed) is replaced by `<commit>` before comparing,
and so is the commit's date where the site prints it (a study's CITATION.cff, `date-released`),
and the report says how many files differed only in that. The offline search index (pagefind/) is
compressed page text, commit included, with content-hashed file names: it is compared by its
number of files only. `--strict` compares every file's raw bytes.

Usage: python benchmarks/compare_builds.py [REV_A] [REV_B] [--strict] [--keep]
       (defaults: main and HEAD)
Exit status: 0 when the trees are identical (after the commit normalization), 1 otherwise,
2 when a build fails.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def git(*args: str, cwd: Path = REPO) -> str:
    return subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, check=True).stdout.strip()


def build(rev: str, tmp: Path, label: str) -> tuple[Path, str]:
    """(output tree, full commit id) of `rev` built in a fresh worktree."""
    commit = git("rev-parse", "--verify", f"{rev}^{{commit}}")
    DATES[commit] = git("show", "-s", "--format=%cs", commit)
    tree = tmp / f"wt-{label}"
    git("worktree", "add", "--detach", "-q", str(tree), commit)
    cache = REPO / ".cache" / "figures"
    if cache.is_dir():   # SVG cache, keyed by the hash of each spec: shared only to save time
        shutil.copytree(cache, tree / ".cache" / "figures")
    out = tmp / f"out-{label}"
    done = subprocess.run([sys.executable, str(tree / "build.py"), "--root", str(tree), "--out", str(out)],
                          capture_output=True, text=True, cwd=tree)
    if done.returncode != 0:
        raise SystemExit(f"build of {rev} ({commit[:12]}) failed:\n{done.stdout}{done.stderr}")
    print(f"{label}: {rev} = {commit[:12]}: {done.stdout.strip()}")
    return Path(os.path.realpath(out)), commit


def files(tree: Path) -> dict[str, Path]:
    out = {}
    for folder, _dirs, names in os.walk(tree):
        for name in names:
            path = Path(folder) / name
            out[path.relative_to(tree).as_posix()] = path
    return out


DATES: dict[str, str] = {}   # commit -> its committer date (YYYY-MM-DD), as the site prints it


def normalized(data: bytes, commit: str) -> bytes:
    data = data.replace(b"<wbr>", b"")   # a page prints the commit in chunks with line-break hints
    for ident in (commit, commit[:12], commit[:7]):
        data = data.replace(ident.encode(), b"<commit>")
    if commit in DATES:   # reader/cite.py: CITATION.cff's release date is the commit's
        data = data.replace(f"date-released: '{DATES[commit]}'".encode(), b"date-released: '<commit date>'")
    return data


SEARCH_INDEX = "pagefind/"


def compare(a: Path, commit_a: str, b: Path, commit_b: str, strict: bool) -> int:
    fa, fb = files(a), files(b)
    if not strict:
        index_a = sorted(r for r in fa if r.startswith(SEARCH_INDEX))
        index_b = sorted(r for r in fb if r.startswith(SEARCH_INDEX))
        print(f"search index ({SEARCH_INDEX}): {len(index_a)} files in A, {len(index_b)} in B (not compared by bytes)")
        for rel in index_a:
            del fa[rel]
        for rel in index_b:
            del fb[rel]
    only_a, only_b = sorted(fa.keys() - fb.keys()), sorted(fb.keys() - fa.keys())
    same = commit_only = 0
    differ = []
    for rel in sorted(fa.keys() & fb.keys()):
        da, db = fa[rel].read_bytes(), fb[rel].read_bytes()
        if da == db:
            same += 1
        elif not strict and normalized(da, commit_a) == normalized(db, commit_b):
            commit_only += 1
        else:
            differ.append((rel, hashlib.sha256(da).hexdigest()[:12], hashlib.sha256(db).hexdigest()[:12]))
    print(f"files: {len(fa)} in A, {len(fb)} in B; identical bytes: {same}; "
          f"differing only in the commit id: {commit_only}; differing: {len(differ)}; "
          f"only in A: {len(only_a)}; only in B: {len(only_b)}")
    for rel in only_a:
        print(f"  only in A: {rel}")
    for rel in only_b:
        print(f"  only in B: {rel}")
    for rel, ha, hb in differ:
        print(f"  differs: {rel} ({ha} vs {hb})")
    differs = only_a or only_b or differ or (not strict and len(index_a) != len(index_b))
    return 1 if differs else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rev_a", nargs="?", default="main")
    parser.add_argument("rev_b", nargs="?", default="HEAD")
    parser.add_argument("--strict", action="store_true", help="compare raw bytes (no commit-id normalization)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder and print its path")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="compare-builds-"))
    try:
        a, commit_a = build(args.rev_a, tmp, "A")
        b, commit_b = build(args.rev_b, tmp, "B")
        return compare(a, commit_a, b, commit_b, args.strict)
    except SystemExit as exc:
        print(exc, file=sys.stderr)
        return 2
    finally:
        for label in ("A", "B"):
            if (tmp / f"wt-{label}").exists():
                subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tmp / f"wt-{label}")],
                               capture_output=True)
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
