"""History answers from one read of git's history: each answer checked against git's own.

The repositories here have what makes `git log -- PATH` subtle: a merge (one side's version kept,
so the walk follows only that side), a merge that adds a file neither parent has, a file deleted
and added again, a file whose content returns to an older version, commits with equal committer
times and a commit dated before its parent. Each answer of `History` is compared with the git
command the build used to run once per question.
"""
from __future__ import annotations

import itertools
import os
import random
import subprocess
from pathlib import Path

import pytest

from site_src.errors import BuildError
from site_src.honesty.history import History


T0 = 1_790_000_000   # committer times below are seconds after this


class Git:
    """A repository whose commits get the committer times a test gives."""

    def __init__(self, root: Path):
        self.root = root
        root.mkdir(parents=True)
        self("init", "-q", "-b", "main")

    def __call__(self, *args: str, time: int = T0, data: bytes | None = None) -> str:
        env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
               "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org", "GIT_CONFIG_NOSYSTEM": "1",
               "HOME": str(self.root), "GIT_AUTHOR_DATE": f"{time} +0000", "GIT_COMMITTER_DATE": f"{time} +0100"}
        return subprocess.run(["git", "-C", str(self.root), *args], check=True, capture_output=True, env=env,
                              input=data).stdout.decode()

    def files(self, contents: dict) -> None:
        """Write each file (or, for None, delete it)."""
        for rel, text in contents.items():
            path = self.root / rel
            if text is None:
                path.unlink()
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)

    def commit(self, time: int, *parents: str) -> str:
        """Commit the work tree as it is, with the given parents (default: HEAD; none for a root)."""
        self("add", "-A")
        tree = self("write-tree").strip()
        sha = self("commit-tree", tree, "-m", f"at {time}", *[x for p in parents for x in ("-p", p)],
                   time=T0 + time).strip()
        self("update-ref", "HEAD", sha)
        return sha

    def checkout(self, sha: str) -> None:
        self("read-tree", "--reset", "-u", sha)


def _subtle_history(root: Path) -> tuple[Git, dict]:
    g, c = Git(root), {}
    g.files({"reg/a.yaml": "A1\n", "reg/b.yaml": "B1\n", "data/x.json": "X1\n", "data/y.json": "Y1\n",
             "data/v.json": "V1\n"})
    c["root"] = g.commit(1000)
    g.files({"data/x.json": "X2\n"})
    c["x2"] = g.commit(2000, c["root"])
    g.files({"reg/b.yaml": None, "data/v.json": "V2\n"})
    c["b_gone"] = g.commit(3000, c["x2"])
    g.checkout(c["x2"])
    g.files({"data/y.json": "Y2\n", "data/z.json": "Z1\n", "data/v.json": "V2\n"})   # v as b_gone made it
    c["side"] = g.commit(3000, c["x2"])                        # a branch, in the same second as b_gone
    g.checkout(c["b_gone"])
    g.files({"data/x.json": "X1\n", "reg/b.yaml": "B1\n"})   # x back to its first content; b added again
    c["x_back"] = g.commit(2500, c["b_gone"])                  # dated before its parent
    g.files({"data/y.json": "Y2\n", "data/z.json": "Z1\n", "data/w.json": "W1\n"})
    c["merge"] = g.commit(4000, c["x_back"], c["side"])        # y and z as the side has them; w from neither
    g.files({"data/y.json": "Y3\n"})
    c["y3"] = g.commit(4000, c["merge"])
    g("reset", "-q", "--hard")
    g.files({"data/y.json": "Y2\n"})                          # an uncommitted edit: y as the side had it
    return g, c


def _git_log(g: Git, spec: str, *options: str) -> list[str]:
    return g("log", *options, "--format=%H", "--no-renames", "--", spec).split()


def _git_introductions(g: Git, folder: str, rels: list[str], at: str = "") -> dict:
    """Every commit of `git log --full-history -m --raw [AT] -- FOLDER` whose new blob equals the
    file now (or at AT), as a set."""
    if at:
        current = {rel: g("rev-parse", f"{at}:{rel}").strip() for rel in rels}
    else:
        current = dict(zip(rels, g("hash-object", "--stdin-paths", data="".join(r + "\n" for r in rels).encode()).split()))
    found, sha = {rel: set() for rel in rels}, ""
    for line in g("log", "--full-history", "-m", "--format=commit %H", "--raw", "--no-abbrev", "--no-renames",
                  *([at] if at else []), "--", folder).splitlines():
        if line.startswith("commit "):
            sha = line.split()[1]
        elif line.startswith(":"):
            meta, _tab, path = line.partition("\t")
            if path in current and current[path] == meta.split()[3]:
                found[path].add(sha)
    return found


def _compare_with_git(g: Git, specs: list[str], folders: list[str]) -> History:
    history = History(g.root)
    history.require_full_history()
    for spec in specs:
        assert history.shown(spec) == _git_log(g, spec), spec
        listed = _git_log(g, spec, "--full-history")
        assert history.shown(spec, full=True) == listed, spec
        first = history.first_commit(spec)
        assert (first.sha if first else None) == (listed[-1] if listed else None), spec
    for folder in folders:
        rels = sorted(p.relative_to(g.root).as_posix() for p in (g.root / folder).rglob("*") if p.is_file())
        got = {rel: {c.sha for c in commits} for rel, commits in history.introductions(rels).items()}
        assert got == _git_introductions(g, folder, rels), folder
        for at in g("rev-list", "HEAD").split()[::3]:     # as of an older commit, its own files
            held = [r for r in g("ls-tree", "-r", "--name-only", at, "--", folder).split()]
            blobs = {r: g("rev-parse", f"{at}:{r}").strip() for r in held}
            got = {rel: {c.sha for c in commits} for rel, commits in history.introductions(held, at, blobs).items()}
            assert got == _git_introductions(g, folder, held, at), (folder, at)
    shas = g("rev-list", "HEAD").split()
    for sha in shas:
        assert history.date(sha) == g("show", "-s", "--format=%cI", sha).strip()
    for older, newer in itertools.product(shas, shas):
        is_ancestor = subprocess.run(["git", "-C", str(g.root), "merge-base", "--is-ancestor", older, newer]).returncode == 0
        assert history.is_strict_ancestor(older, newer) == (is_ancestor and older != newer), (older, newer)
    return history


SPECS = ["reg/a.yaml", "reg/b.yaml", "reg", "data", "data/x.json", "data/y.json", "data/z.json", "data/w.json",
         "nowhere.txt"]


def test_every_answer_is_gits_own(tmp_path):
    g, c = _subtle_history(tmp_path / "r")
    history = _compare_with_git(g, SPECS, ["data", "reg"])
    # and the cases that make it subtle give the answers they should
    assert history.first_commit("reg/b.yaml").sha == c["root"]        # deleted, added again: the first add
    assert history.shown("data/y.json") == [c["y3"], c["side"], c["root"]]   # the merge kept the side's y
    assert history.shown("data/v.json") == [c["b_gone"], c["root"]]     # the same on both sides: the first kept
    assert history.first_commit("data/w.json").sha == c["merge"]
    assert history.first_commit("nowhere.txt") is None
    holding = {rel: [x.sha for x in commits] for rel, commits in history.introductions(
        ["data/w.json", "data/x.json", "data/y.json", "data/z.json"]).items()}
    assert holding["data/x.json"] == [c["root"], c["x_back"], c["merge"]]   # back to its first content; the merge against the side
    assert holding["data/z.json"] == [c["side"], c["merge"]]        # the merge gave it too, against x_back
    assert holding["data/w.json"] == [c["merge"]]                   # from neither parent: the merge's own
    assert holding["data/y.json"] == [c["side"], c["merge"]]        # the working tree's y is the side's
    assert history.is_strict_ancestor(c["side"], c["y3"]) and not history.is_strict_ancestor(c["side"], c["x_back"])


def test_the_bytes_at_a_commit_are_gits(tmp_path):
    g, c = _subtle_history(tmp_path / "r")
    history = History(g.root)
    history.require_full_history()
    checked = 0
    for rel in ["reg/a.yaml", "reg/b.yaml", "data/x.json", "data/w.json", "data/y.json"]:
        first = history.first_commit(rel)
        now = (g.root / rel).read_bytes()
        answer = history.holds(first.sha, rel, now)
        then = g("show", f"{first.sha}:{rel}").encode()
        assert answer in (None, then == now), rel
        assert history.holds(first.sha, rel, now + b"more") in (None, False), rel
        checked += answer is not None
    assert checked == 5
    assert history.holds(c["root"], "data/y.json", b"Y1\n") and not history.holds(c["root"], "data/y.json", b"Y2\n")


def test_working_files_hash_as_git_hashes_them(tmp_path, monkeypatch):
    g, _c = _subtle_history(tmp_path / "r")
    hashers = []
    real = subprocess.Popen

    class Counting(real):
        def __init__(self, args, *rest, **options):
            hashers.extend(["hash-object"] if "--stdin-paths" in args else [])   # History's, not this test's
            super().__init__(args, *rest, **options)

    monkeypatch.setattr(subprocess, "Popen", Counting)
    clean = ["data/x.json", "data/z.json", "data/w.json", "reg/a.yaml"]   # w came with the merge
    (g.root / "reg" / "a.yaml").touch()                               # a new mtime, the same bytes
    with History(g.root) as history:
        assert history.blob_ids(clean) == {rel: g("hash-object", rel).strip() for rel in clean}
    assert hashers == []                                              # HEAD's blobs, nothing hashed
    g.files({"data/v.json": "V9\n", "reg/b.yaml": "B9\n", "reg/new.yaml": "N\n", "data/ignored.json": "I\n",
             ".gitignore": "data/ignored.json\n"})
    g("add", "reg/b.yaml")                                            # staged only
    g("mv", "reg/a.yaml", "reg/moved.yaml")                           # a staged rename
    g.files({"reg/a.yaml": "A1\n"})                                   # and the old name back, untracked
    dirty = ["data/y.json", "data/v.json", "reg/b.yaml", "reg/new.yaml", "data/ignored.json", "reg/moved.yaml",
             "reg/a.yaml", ".gitignore"]
    with History(g.root) as history:
        assert history.blob_ids(dirty + clean) == {rel: g("hash-object", rel).strip() for rel in dirty + clean}
        with pytest.raises(BuildError) as caught:
            history.blob_ids(["data/missing.json"])
    assert caught.value.message.startswith("registrations/: git hash-object failed: fatal: could not open")


@pytest.mark.parametrize("seed", range(4))
def test_random_histories_answer_as_git_does(tmp_path, seed):
    """Random branches, merges of two or three parents (each file from a random parent, sometimes
    a new one), deletions, chmods, equal and out-of-order committer times."""
    rnd = random.Random(seed)
    names = ["reg/a.yaml", "reg/b.yaml", "reg/sub/c.yaml", "data/x.json", "data/y.json", "data/deep/z.txt"]
    g = Git(tmp_path / "r")
    time = 1000

    def edit(count: int) -> None:
        for _ in range(count):
            path = g.root / rnd.choice(names)
            if path.exists() and rnd.random() < 0.25:
                path.unlink()
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(rnd.choice(["one\n", "two\n", "three\n"]))
                path.chmod(0o755 if rnd.random() < 0.1 else 0o644)

    edit(4)
    heads = [g.commit(time)]
    for _ in range(14):
        time += rnd.choice([0, 0, 60, -30])
        base = rnd.randrange(len(heads))
        g.checkout(heads[base])
        others = [h for h in heads if h != heads[base]]
        if others and rnd.random() < 0.4:
            parents = [heads[base], *rnd.sample(others, min(len(others), rnd.choice([1, 1, 2])))]
            for name in names:
                source = rnd.choice(parents)
                shown = subprocess.run(["git", "-C", str(g.root), "show", f"{source}:{name}"], capture_output=True)
                path = g.root / name
                if shown.returncode:
                    path.unlink(missing_ok=True)
                else:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_bytes(shown.stdout)
            edit(rnd.choice([0, 0, 1]))
        else:
            parents = [heads[base]]
            edit(rnd.randint(0, 3))
        commit = g.commit(time, *parents)
        if rnd.random() < 0.3:
            heads.append(commit)
        else:
            heads[base] = commit
    g.checkout(heads[-1])
    g("update-ref", "HEAD", heads[-1])
    specs = names + ["reg", "reg/sub", "data", "data/deep"]
    _compare_with_git(g, specs, ["reg", "data"])


def test_no_commits_yet_is_gits_one_line(tmp_path):
    g = Git(tmp_path / "r")
    g.files({"reg/a.yaml": "A1\n"})
    g("add", "-A")
    history = History(g.root)
    history.require_full_history()
    said = subprocess.run(["git", "-C", str(g.root), "log", "--format=%H", "--", "reg/a.yaml"], capture_output=True,
                          text=True).stderr.strip().splitlines()[0]
    for _ in range(2):   # asked again, the same answer
        with pytest.raises(BuildError) as caught:
            history.first_commit("reg/a.yaml")
        assert caught.value.format() == f"registrations/: git log failed: {said}"
