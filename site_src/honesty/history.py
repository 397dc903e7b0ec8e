"""What git's history says about when a file first held its current content.

The registration check needs three facts: the commit that first added a record (and the record's
bytes there), every commit that gave each data file its current content, and whether one commit
is a strict ancestor of another. All of them come from `git` itself, over the full history: every
commit reachable from HEAD, both sides of every merge (so data committed on a side branch before
a record and merged after it is seen, as `git log --full-history` sees it, not hidden behind the
merge as git's default history simplification would). A missing git or a shallow clone (whose
history is cut off) is an error, never a guess.

A build asks these questions dozens of times, so git is asked a fixed number of times instead:
one `git log` of HEAD's whole history (every commit's date and parents, and what it changed
against its parent), one `git diff-tree` for what each merge changed against each of its parents
(none in a history without merges), the build's one `git status` (a data file it does not list
holds HEAD's blob) and, only for data files it lists, one `git hash-object` process. The questions
are then answered here the way git answers them: "the commits that touched PATH" walks the
history as `git log --full-history -- PATH` does (commits in committer-date order), so the oldest
commit is the one that command lists last. tests/honesty/test_history.py compares every answer
with git's own on repositories with merges, deleted and re-added files and reverted content.
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
        """The commit's id as pages print it (12 characters)."""
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
    introduced: dict | None = None                # path -> [(commit, blob)], made when first asked

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
        self._processes: dict[str, subprocess.Popen] = {}   # hash-object, cat-file: one each, fed lines
        self._blob_ids: dict[str, str] = {}
        self.parsed: dict = {}          # files at past commits, parsed once a build (registrations.py)

    def git(self, *args: str, data: bytes | None = None) -> bytes:
        """The output of one git command in the repository; BuildError when git fails or runs too long."""
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

    def shown(self, spec: str, full: bool = False) -> list[str]:
        """The commits `git log -- SPEC` lists (with `full`, `git log --full-history -- SPEC`), in
        its order (newest first, as it prints them).

        git's walk: take the newest commit in the queue (by committer time; ties in the order
        they were queued). By default a commit whose SPEC equals that of one of its parents (the
        first such) is not shown and only that parent is followed; any other commit is shown and
        all its parents are followed. With `full` every parent is always followed, and a commit
        is shown when SPEC differs from that of at least one parent. A root commit is shown when
        it holds SPEC."""
        spec = spec.rstrip("/")
        token = (spec, full)
        if token not in self._shown:
            graph = self._graph()
            queue, seen, out = [graph.head], {graph.head}, []
            while queue:
                sha = queue.pop(0)
                parents = graph.parents[sha]
                if not parents:
                    same, follow = spec not in graph.touched[(sha, None)], ()
                elif full:
                    same, follow = all(spec not in graph.touched[(sha, p)] for p in parents), parents
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
            self._shown[token] = out
        return self._shown[token]

    # ------------------------------------------------------------ the questions

    def date(self, sha: str) -> str:
        """The commit date of `sha`, ISO 8601."""
        graph = self._graph()
        if sha not in graph.date:
            graph.date[sha] = self.git("show", "-s", "--format=%cI", sha).decode().strip()
        return graph.date[sha]

    def first_commit(self, rel: str) -> Commit | None:
        """The oldest commit that touched `rel` (None when it was never committed): the last one
        `git log --full-history -- REL` lists, so a side branch merged later is not hidden."""
        if GLOB & set(rel) or rel.startswith(":"):
            shas = self.git("log", "--full-history", "--format=%H", "--no-renames", "--", rel).decode().split()
        else:
            shas = self.shown(self._prefix + rel, full=True)
        return Commit(shas[-1], self.date(shas[-1])) if shas else None

    def content_at(self, sha: str, rel: str) -> bytes:
        """A file's bytes as commit `sha` holds it."""
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

    def _process(self, name: str, *args: str) -> subprocess.Popen:
        """The build's one long-lived `git ARGS` process of this kind, fed a line at a time."""
        if name not in self._processes:
            try:
                self._processes[name] = subprocess.Popen(
                    ["git", "-C", str(self.root), *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, env={**os.environ, "GIT_FLUSH": "1"})
            except FileNotFoundError:
                raise BuildError("registrations/: checking a registration needs git, and git is not installed") from None
        return self._processes[name]

    def _failed(self, name: str, process: subprocess.Popen) -> BuildError:
        message = process.stderr.read().decode("utf-8", "replace").strip().splitlines()  # git stopped: why
        self.close()
        return BuildError(f"registrations/: git {name} failed: {message[0] if message else process.returncode}")

    def _hash(self, rel: str) -> str:
        hasher = self._process("hash-object", "hash-object", "--stdin-paths")
        try:
            hasher.stdin.write(rel.encode("utf-8", "surrogateescape") + b"\n")
            hasher.stdin.flush()
            line = hasher.stdout.readline().strip()
        except BrokenPipeError:
            line = b""
        if line:
            return line.decode()
        raise self._failed("hash-object", hasher)

    def _object(self, rev: str, limit: int) -> tuple[str, bytes | None] | None:
        """(type, bytes) of the object `rev` names (bytes None when over `limit`), or None when
        there is none: one `git cat-file --batch` process for the whole build."""
        if "\n" in rev or "\r" in rev:
            return None
        reader = self._process("cat-file", "cat-file", "--batch")
        try:
            reader.stdin.write(rev.encode("utf-8", "surrogateescape") + b"\n")
            reader.stdin.flush()
            header = reader.stdout.readline().split()
        except BrokenPipeError:
            header = []
        if len(header) == 2:
            return None     # "<rev> missing" or "<rev> ambiguous"
        if len(header) != 3:
            raise self._failed("cat-file", reader)
        kind, size = header[1].decode(), int(header[2])
        data, left = [], size
        while left:         # read what git sends in any case; keep it only within the limit
            chunk = reader.stdout.read(min(left, 1 << 20))
            if not chunk:
                raise self._failed("cat-file", reader)
            left -= len(chunk)
            if size <= limit:
                data.append(chunk)
        reader.stdout.read(1)   # the newline after the contents
        return kind, (b"".join(data) if size <= limit else None)

    def file_at(self, sha: str, rel: str, limit: int) -> bytes | None:
        """The bytes of `rel` in commit `sha`; None when it holds no such file. Raises BuildError
        when the file is over `limit` bytes."""
        found = self._object(f"{sha}:{self._prefix}{rel}", limit)
        if found is None or found[0] != "blob":
            return None
        if found[1] is None:
            raise BuildError(f"registrations/: {rel} at {sha[:12]} is over {limit:,} bytes")
        return found[1]

    def files_at(self, sha: str, folder: str, limit: int = 100_000) -> dict[str, str]:
        """{path relative to the root: blob id} of every file (and link) under `folder` in commit
        `sha`, as `git ls-tree -r` lists them; empty when the folder is not there."""
        oid_bytes = len(sha) // 2
        out: dict[str, str] = {}
        pending = [(f"{sha}:{self._prefix}{folder.rstrip('/')}", folder.rstrip("/"))]
        while pending:
            rev, base = pending.pop()
            found = self._object(rev, 64 * 2**20)
            if found is None or found[0] != "tree" or found[1] is None:
                continue
            data, i = found[1], 0
            while i < len(data):
                space, nul = data.index(b" ", i), data.index(b"\0", i)
                mode, name = data[i:space].decode(), data[space + 1:nul].decode("utf-8", "surrogateescape")
                oid, i = data[nul + 1:nul + 1 + oid_bytes].hex(), nul + 1 + oid_bytes
                if mode == "40000":
                    pending.append((oid, f"{base}/{name}"))
                elif mode in BLOB_MODES:
                    out[f"{base}/{name}"] = oid
                if len(out) + len(pending) > limit:
                    raise BuildError(f"registrations/: {folder} at {sha[:12]} holds more than {limit:,} files")
        return dict(sorted(out.items()))

    def close(self) -> None:
        """End the hash-object and cat-file processes (a later question starts others)."""
        processes, self._processes = self._processes, {}
        for process in processes.values():
            for stream in (process.stdin, process.stdout, process.stderr):
                try:
                    stream.close()
                except OSError:
                    pass
            try:
                process.wait(timeout=TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def __del__(self) -> None:   # dropped without close(): end the process all the same
        try:
            self.close()
        except Exception:  # noqa: BLE001 - at interpreter exit the subprocess module may be gone
            pass

    def __enter__(self) -> "History":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def introductions(self, rels: list[str], at: str | None = None,
                      blobs: dict[str, str] | None = None) -> dict[str, tuple[Commit, ...]]:
        """For each file, every commit that gave it its current content, oldest first (empty: none).

        "Current" is the working tree's file (at=None) or, with `at` and `blobs` ({rel: blob id}),
        the file in commit `at`. A commit gave it when its change against one of its parents (a
        root's against nothing) sets the file to that blob: over every commit of the history of
        HEAD (or of `at`), merges included, which is what `git log --full-history -m --raw -- FILES`
        shows. Asked once per study and build: several records of one study share the answer."""
        token = (tuple(rels), at)
        if token not in self._holding:
            self._holding[token] = self._introductions(rels, at, blobs)
        return self._holding[token]

    def _introductions(self, rels: list[str], at: str | None, blobs: dict[str, str] | None) -> dict:
        graph = self._graph()
        current = self.blob_ids(rels) if at is None else dict(blobs or {})
        top = graph.head if at is None else at
        within = self.ancestors(top) | {top}
        index = self._introduced()
        out = {}
        for rel in rels:
            found = {sha for sha, blob in index.get(self._prefix + rel, ()) if blob == current.get(rel) and sha in within}
            out[rel] = tuple(Commit(sha, self.date(sha)) for sha in sorted(found, key=lambda c: (graph.time[c], c)))
        return out

    def _introduced(self) -> dict[str, list]:
        """{path: [(commit, blob it set), ...]} over every change of every commit (merges against
        each parent), read from the one history read."""
        graph = self._graph()
        if graph.introduced is None:
            graph.introduced = {}
            for (sha, _parent), changed in graph.changes.items():
                for path, (mode, blob) in changed.items():
                    if mode in BLOB_MODES:
                        graph.introduced.setdefault(path, []).append((sha, blob))
        return graph.introduced

    def in_history(self, sha: str) -> bool:
        """Whether `sha` (a full commit id) is HEAD or one of its ancestors."""
        return sha in self._graph().parents

    def ancestors(self, newer: str) -> set:
        """Every strict ancestor of a commit of HEAD's history."""
        graph = self._graph()
        if newer not in self._ancestors:
            found, stack = set(), [newer]
            while stack:
                for parent in graph.parents[stack.pop()]:
                    if parent not in found:
                        found.add(parent)
                        stack.append(parent)
            self._ancestors[newer] = found
        return self._ancestors[newer]

    def is_strict_ancestor(self, older: str, newer: str) -> bool:
        """Whether `older` is an ancestor of `newer` and not the same commit."""
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
        return older in self.ancestors(newer)


def sha256(data: bytes) -> str:
    """The sha256 of bytes, as hex."""
    return hashlib.sha256(data).hexdigest()
