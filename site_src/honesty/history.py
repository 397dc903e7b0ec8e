"""What git's history says about when a file first held its current content.

The registration check needs three facts: the commit that first added a record (and the record's
bytes there), the earliest commit whose version of each data file equals the file as it is now,
and whether one commit is a strict ancestor of another. All of them come from `git` itself; a
missing git or a shallow clone (whose history is cut off) is an error, never a guess.

A build asks these questions dozens of times, so git is asked a fixed number of times instead:
one `git log` of HEAD's whole history (every commit's date and parents, and what it changed
against its parent), one `git diff-tree` for what each merge changed against each of its parents
(none in a history without merges), the build's one `git status` (a data file it does not list
holds HEAD's blob) and, only for data files it lists, one `git hash-object` process. The questions are then answered here the way git answers them: "the commits
that touched PATH" walks the history as `git log -- PATH` does (its default history
simplification, commits in committer-date order), so the oldest commit is the one that command
lists last. tests/honesty/test_history.py compares every answer with git's own on repositories
with merges, deleted and re-added files and reverted content.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from safe_io import git_changes

from ..errors import BuildError

TIMEOUT_S = 60
GLOB = set("*?[\\")           # pathspec wildcards: such a path is asked of git itself
BLOB_MODES = ("100644", "100755", "120000")


@dataclass(frozen=True)
class Commit:
    sha: str
    date: str   # committer date, ISO 8601

    @property
    def short(self) -> str:
        return self.sha[:12]


@dataclass
class _Graph:
    """HEAD's history: per commit its committer time (seconds), ISO date and parents, and per
    (commit, parent) what changed: {path: (new mode, new blob)}, parent None for a root commit."""

    head: str
    time: dict = field(default_factory=dict)
    date: dict = field(default_factory=dict)
    parents: dict = field(default_factory=dict)
    changes: dict = field(default_factory=dict)
    touched: dict = field(default_factory=dict)   # the same keys: changed paths and their folders

    def add_change(self, key: tuple, path: str, mode: str, blob: str) -> None:
        self.changes.setdefault(key, {})[path] = (mode, blob)
        seen = self.touched.setdefault(key, set())
        while path and path not in seen:
            seen.add(path)
            path = path.rpartition("/")[0]


class History:
    """git queries against one repository, with a one-line error when git cannot answer."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self._holding: dict[tuple, dict] = {}
        self._shown: dict[str, list] = {}
        self._ancestors: dict[str, set] = {}
        self._checked = False
        self._prefix = ""               # the root's place in the work tree, as git's pathspecs see it
        self._graph_value: _Graph | None = None
        self._graph_error = ""
        self._hasher: subprocess.Popen | None = None
        self._blob_ids: dict[str, str] = {}

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
            answers = self.git("rev-parse", "--is-inside-work-tree", "--is-shallow-repository",
                               "--show-prefix").decode("utf-8", "surrogateescape").split("\n")
        except BuildError as exc:
            if "not installed" in exc.message:
                raise
            raise BuildError("registrations/: checking a registration needs the git history, and "
                             f"{self.root} is not a git checkout") from None
        if answers[0] != "true":
            raise BuildError(f"registrations/: {self.root} is not a git work tree")
        if answers[1] == "true":
            raise BuildError("registrations/: this clone is shallow, so the order of commits cannot be checked; "
                             "run `git fetch --unshallow` (CI: fetch-depth 0)")
        self._prefix = answers[2] if len(answers) > 2 else ""
        self._checked = True

    # ------------------------------------------------------------ the history, read once

    def _graph(self) -> _Graph:
        if self._graph_value is None:
            if self._graph_error:     # a repository without commits: every question gets git's answer
                raise BuildError(self._graph_error)
            try:
                self._graph_value = self._read_graph()
            except BuildError as exc:
                self._graph_error = exc.message
                raise
        return self._graph_value

    def _read_graph(self) -> _Graph:
        # No revision named: on a branch without commits git says so, as `git log -- PATH` does.
        raw = self.git("log", "-z", "--raw", "--root", "--no-renames", "--no-abbrev",
                       "--format=%x01%H %ct %cI %P")
        graph: _Graph | None = None
        sha, key = "", None
        tokens = raw.split(b"\0")
        i = 0
        while i < len(tokens):
            token = tokens[i].lstrip(b"\n")
            i += 1
            if token.startswith(b"\x01"):
                sha, stamp, date, *parents = token[1:].decode().split(" ")
                parents = tuple(p for p in parents if p)
                graph = graph or _Graph(head=sha)
                graph.time[sha], graph.date[sha], graph.parents[sha] = int(stamp), date, parents
                # git log shows no diff for a merge; those come from diff-tree below
                key = None if len(parents) > 1 else (sha, parents[0] if parents else None)
                if key is not None:
                    graph.changes.setdefault(key, {})
                    graph.touched.setdefault(key, set())
            elif token.startswith(b":"):
                path = tokens[i].decode("utf-8", "surrogateescape")
                i += 1
                if key is not None:
                    meta = token.decode().split(" ")
                    graph.add_change(key, path, meta[1], meta[3])
        if graph is None:
            raise BuildError("registrations/: git log failed: it listed no commits")
        self._merge_changes(graph)
        return graph

    def _merge_changes(self, graph: _Graph) -> None:
        """What each merge changed against each of its parents: one diff-tree for all of them."""
        pairs = [(sha, parent) for sha, parents in graph.parents.items() if len(parents) > 1 for parent in parents]
        if not pairs:
            return
        lines = "".join(f"{sha} {parent}\n" for sha, parent in pairs).encode()
        raw = self.git("diff-tree", "--stdin", "-z", "-r", "--always", "--no-renames", "--no-abbrev", data=lines)
        tokens = raw.split(b"\0")
        block, i = -1, 0
        while i < len(tokens):
            token = tokens[i].lstrip(b"\n")
            i += 1
            if token.startswith(b":"):
                meta = token.decode().split(" ")
                graph.add_change(pairs[block], tokens[i].decode("utf-8", "surrogateescape"), meta[1], meta[3])
                i += 1
            elif token:
                block += 1    # --always: one header per line given, even for an empty diff
                graph.changes.setdefault(pairs[block], {})
                graph.touched.setdefault(pairs[block], set())
        if block != len(pairs) - 1:
            raise BuildError(f"registrations/: git diff-tree answered {block + 1} of {len(pairs)} merge parents")

    def shown(self, spec: str) -> list[str]:
        """The commits `git log -- SPEC` lists, in its order (newest first, as it prints them).

        git's walk: take the newest commit in the queue (by committer time; ties in the order
        they were queued); a commit whose SPEC equals that of one of its parents (the first such)
        is not shown and only that parent is followed; any other commit is shown and all its
        parents are followed; a root commit is shown when it holds SPEC."""
        spec = spec.rstrip("/")
        if spec not in self._shown:
            graph = self._graph()
            queue, seen, out = [graph.head], {graph.head}, []
            while queue:
                sha = queue.pop(0)
                parents = graph.parents[sha]
                if not parents:
                    same, follow = spec not in graph.touched[(sha, None)], ()
                else:
                    twin = next((p for p in parents if spec not in graph.touched[(sha, p)]), None)
                    same, follow = twin is not None, (twin,) if twin is not None else parents
                for parent in follow:
                    if parent not in seen:
                        seen.add(parent)
                        at = 0
                        while at < len(queue) and graph.time[queue[at]] >= graph.time[parent]:
                            at += 1
                        queue.insert(at, parent)
                if not same:
                    out.append(sha)
            self._shown[spec] = out
        return self._shown[spec]

    # ------------------------------------------------------------ the questions

    def date(self, sha: str) -> str:
        graph = self._graph()
        if sha not in graph.date:
            graph.date[sha] = self.git("show", "-s", "--format=%cI", sha).decode().strip()
        return graph.date[sha]

    def first_commit(self, rel: str) -> Commit | None:
        """The oldest commit that touched `rel` (None when it was never committed)."""
        if GLOB & set(rel) or rel.startswith(":"):
            shas = self.git("log", "--format=%H", "--no-renames", "--", rel).decode().split()
        else:
            shas = self.shown(self._prefix + rel)
        return Commit(shas[-1], self.date(shas[-1])) if shas else None

    def content_at(self, sha: str, rel: str) -> bytes:
        return self.git("show", f"{sha}:{rel}")

    def holds(self, sha: str, rel: str, data: bytes) -> bool | None:
        """Whether `sha:rel` (as `git show` names it) is exactly `data`, when the history read
        says which blob it is (None: ask content_at). Equal blob ids mean equal bytes."""
        graph = self._graph()
        parents = graph.parents.get(sha)
        if parents is None:
            return None
        entry = graph.changes.get((sha, parents[0] if parents else None), {}).get(rel)
        if entry is None or entry[0] not in BLOB_MODES:
            return None
        blob = entry[1]
        algorithm = {40: "sha1", 64: "sha256"}.get(len(blob))
        if algorithm is None:
            return None
        return hashlib.new(algorithm, b"blob %d\0" % len(data) + data).hexdigest() == blob

    def blob_ids(self, rels: list[str]) -> dict[str, str]:
        """git's blob id of each working-tree file, as it would be committed now.

        A file `git status` does not list holds what HEAD holds, so its id is HEAD's (the status
        is the build's own, safe_io.git_changes); any other file is hashed by one hash-object
        process for the whole build, fed a path at a time."""
        changed = git_changes(self.root)
        for rel in rels:
            if rel not in self._blob_ids:
                self._blob_ids[rel] = (changed is not None and self._head_blob(rel, changed)) or self._hash(rel)
        return {rel: self._blob_ids[rel] for rel in rels}

    def _head_blob(self, rel: str, changed: frozenset) -> str | None:
        # The newest commit `git log -- PATH` shows is joined to HEAD by commits that left PATH as
        # it was, so its version of PATH is HEAD's.
        path = self._prefix + rel
        if path in changed or os.path.islink(self.root / rel):
            return None
        shown = self.shown(path)
        if not shown:
            return None
        graph = self._graph()
        parents = graph.parents[shown[0]]
        mode, blob = graph.changes[(shown[0], parents[0] if parents else None)].get(path, ("", ""))
        return blob if mode in ("100644", "100755") else None

    def _hash(self, rel: str) -> str:
        if self._hasher is None:
            try:
                self._hasher = subprocess.Popen(
                    ["git", "-C", str(self.root), "hash-object", "--stdin-paths"], stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "GIT_FLUSH": "1"})
            except FileNotFoundError:
                raise BuildError("registrations/: checking a registration needs git, and git is not installed") from None
        hasher = self._hasher
        try:
            hasher.stdin.write(rel.encode("utf-8", "surrogateescape") + b"\n")
            hasher.stdin.flush()
            line = hasher.stdout.readline().strip()
        except BrokenPipeError:
            line = b""
        if line:
            return line.decode()
        message = hasher.stderr.read().decode("utf-8", "replace").strip().splitlines()  # git stopped: why
        self.close()
        raise BuildError(f"registrations/: git hash-object failed: {message[0] if message else hasher.returncode}")

    def close(self) -> None:
        """End the hash-object process (a later question starts another)."""
        hasher, self._hasher = self._hasher, None
        if hasher is not None:
            for stream in (hasher.stdin, hasher.stdout, hasher.stderr):
                try:
                    stream.close()
                except OSError:
                    pass
            try:
                hasher.wait(timeout=TIMEOUT_S)
            except subprocess.TimeoutExpired:
                hasher.kill()
                hasher.wait()

    def __del__(self) -> None:   # dropped without close(): end the process all the same
        try:
            self.close()
        except Exception:  # noqa: BLE001 - at interpreter exit the subprocess module may be gone
            pass

    def __enter__(self) -> "History":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def first_holding(self, folder: str, rels: list[str]) -> dict[str, Commit | None]:
        """For each file, the earliest commit whose version equals the working-tree file (None: never).

        Asked once per study and build: several records of one study share the answer."""
        token = (folder, tuple(rels))
        if token not in self._holding:
            self._holding[token] = self._first_holding(folder, rels)
        return self._holding[token]

    def _first_holding(self, folder: str, rels: list[str]) -> dict[str, Commit | None]:
        # What `git log --raw -- FOLDER` prints: the commits shown for the folder, each with its
        # diff against its parent (a root against nothing; a merge with none), paths in the folder.
        current = self.blob_ids(rels)
        graph = self._graph()
        spec = (self._prefix + folder).rstrip("/")
        earliest: dict[str, str] = {}
        for sha in self.shown(spec):
            parents = graph.parents[sha]
            if len(parents) > 1:
                continue
            for path, (_mode, blob) in graph.changes[(sha, parents[0] if parents else None)].items():
                if (path == spec or path.startswith(spec + "/")) and current.get(path) == blob:
                    earliest[path] = sha  # the walk runs newest first: the last hit is the earliest
        return {rel: (Commit(earliest[rel], self.date(earliest[rel])) if rel in earliest else None) for rel in rels}

    def is_strict_ancestor(self, older: str, newer: str) -> bool:
        if older == newer:
            return False
        graph = self._graph()
        if older not in graph.parents or newer not in graph.parents:
            try:
                subprocess.run(["git", "-C", str(self.root), "merge-base", "--is-ancestor", older, newer],
                               check=True, capture_output=True, timeout=TIMEOUT_S)
            except subprocess.CalledProcessError:
                return False
            return True
        if newer not in self._ancestors:
            found, stack = set(), [newer]
            while stack:
                for parent in graph.parents[stack.pop()]:
                    if parent not in found:
                        found.add(parent)
                        stack.append(parent)
            self._ancestors[newer] = found
        return older in self._ancestors[newer]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
