"""What git's history says about when a file first held its current content.

The registration check needs three facts: the commit that first added a record (and the record's
bytes there), the earliest commit whose version of each data file equals the file as it is now,
and whether one commit is a strict ancestor of another. All of them come from `git` itself; a
missing git or a shallow clone (whose history is cut off) is an error, never a guess.
"""
from __future__ import annotations

import hashlib
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..errors import BuildError

TIMEOUT_S = 60


@dataclass(frozen=True)
class Commit:
    sha: str
    date: str   # committer date, ISO 8601

    @property
    def short(self) -> str:
        return self.sha[:12]


class History:
    """git queries against one repository, with a one-line error when git cannot answer."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self._dates: dict[str, str] = {}
        self._holding: dict[tuple, dict] = {}
        self._checked = False

    def git(self, *args: str, data: bytes | None = None) -> bytes:
        try:
            done = subprocess.run(["git", "-C", str(self.root), *args], input=data, capture_output=True,
                                  timeout=TIMEOUT_S)
        except FileNotFoundError:
            raise BuildError("registrations/: checking a registration needs git, and git is not installed") from None
        except subprocess.TimeoutExpired:
            raise BuildError(f"registrations/: git {args[0]} ran past {TIMEOUT_S} s") from None
        if done.returncode != 0:
            message = done.stderr.decode("utf-8", "replace").strip().splitlines()
            raise BuildError(f"registrations/: git {args[0]} failed: {message[0] if message else done.returncode}")
        return done.stdout

    def require_full_history(self) -> None:
        """Refuse a missing repository or a shallow clone: the order of commits cannot be checked."""
        if self._checked:
            return
        try:
            inside = self.git("rev-parse", "--is-inside-work-tree").strip()
        except BuildError as exc:
            if "not installed" in exc.message:
                raise
            raise BuildError("registrations/: checking a registration needs the git history, and "
                             f"{self.root} is not a git checkout") from None
        if inside != b"true":
            raise BuildError(f"registrations/: {self.root} is not a git work tree")
        if self.git("rev-parse", "--is-shallow-repository").strip() == b"true":
            raise BuildError("registrations/: this clone is shallow, so the order of commits cannot be checked; "
                             "run `git fetch --unshallow` (CI: fetch-depth 0)")
        self._checked = True

    def date(self, sha: str) -> str:
        if sha not in self._dates:
            self._dates[sha] = self.git("show", "-s", "--format=%cI", sha).decode().strip()
        return self._dates[sha]

    def first_commit(self, rel: str) -> Commit | None:
        """The oldest commit that touched `rel` (None when it was never committed)."""
        shas = self.git("log", "--format=%H", "--no-renames", "--", rel).decode().split()
        return Commit(shas[-1], self.date(shas[-1])) if shas else None

    def content_at(self, sha: str, rel: str) -> bytes:
        return self.git("show", f"{sha}:{rel}")

    def blob_ids(self, rels: list[str]) -> dict[str, str]:
        """git's blob id of each working-tree file, as it would be committed now."""
        if not rels:
            return {}
        out = self.git("hash-object", "--stdin-paths", data="".join(r + "\n" for r in rels).encode())
        return dict(zip(rels, out.decode().split()))

    def first_holding(self, folder: str, rels: list[str]) -> dict[str, Commit | None]:
        """For each file, the earliest commit whose version equals the working-tree file (None: never).

        Asked once per study and build: several records of one study share the answer."""
        token = (folder, tuple(rels))
        if token not in self._holding:
            self._holding[token] = self._first_holding(folder, rels)
        return self._holding[token]

    def _first_holding(self, folder: str, rels: list[str]) -> dict[str, Commit | None]:
        current = self.blob_ids(rels)
        raw = self.git("log", "--format=commit %H", "--raw", "--no-abbrev", "--no-renames", "--", folder)
        earliest: dict[str, str] = {}
        sha = ""
        for line in raw.decode("utf-8", "replace").splitlines():
            if line.startswith("commit "):
                sha = line.split()[1]
            elif line.startswith(":"):
                meta, _tab, path = line.partition("\t")
                new_blob = meta.split()[3]
                if current.get(path) == new_blob:
                    earliest[path] = sha  # the log runs newest first: the last hit is the earliest
        return {rel: (Commit(earliest[rel], self.date(earliest[rel])) if rel in earliest else None) for rel in rels}

    def is_strict_ancestor(self, older: str, newer: str) -> bool:
        if older == newer:
            return False
        try:
            subprocess.run(["git", "-C", str(self.root), "merge-base", "--is-ancestor", older, newer],
                           check=True, capture_output=True, timeout=TIMEOUT_S)
        except subprocess.CalledProcessError:
            return False
        return True


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
