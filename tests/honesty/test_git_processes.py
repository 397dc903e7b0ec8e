"""A build asks git a fixed number of times, whatever the number of registrations and commits, and
`git_state` answers once per build, afresh for the next one (as `serve` rebuilds after a commit)."""
from __future__ import annotations

import os
import subprocess

import pytest

from safe_io import git_state, git_state_per_build
from site_src.site import build

from .conftest import make_study_site
from .gitrepo import Repo

GIT_PER_BUILD = 10


@pytest.fixture
def git_calls(monkeypatch) -> list:
    """Every git process started (subprocess.run and Popen alike), by its arguments."""
    calls = []
    real = subprocess.Popen

    class Counting(real):
        def __init__(self, args, *rest, **options):
            if isinstance(args, (list, tuple)) and os.path.basename(str(args[0])) == "git":
                calls.append([str(a) for a in args])
            super().__init__(args, *rest, **options)

    monkeypatch.setattr(subprocess, "Popen", Counting)
    return calls


def _site(tmp_path, registrations: int, later_commits: int) -> Repo:
    """The tiny study site, its records committed first, then the rest, then more commits."""
    repo = Repo(make_study_site(tmp_path))
    for n in range(registrations):
        repo.write(f"registrations/tiny-{n}.yaml", (
            f"id: tiny-{n}\nstudy: tiny\nclaim: A claim about the mean rho.\nquantity: mean_rho\n"
            f"prediction: {{op: '>', bound: {n / 10}}}\nkill: {{quantity: counts/pairs, op: '<', bound: 2, "
            "meaning: too few pairs}\nrationale: A test.\nauthor: tester\n"))
    repo.commit("freeze", "registrations")
    repo.write(".gitignore", "/public\n/.public.builds/\n/.cache/\n")   # what a build writes
    repo.commit("everything else", ".")
    for n in range(later_commits):
        repo.write("content/notes.md", f"---\ntitle: Notes\nsummary: Notes, version {n}.\n---\nVersion {n}.\n")
        repo.commit(f"notes {n}", "content")
    return repo


def _built(repo: Repo, out, incremental: bool = False):
    result = build(repo.root, out, incremental=incremental)
    assert result.errors.lines() == []
    return result


def test_a_build_asks_git_a_fixed_number_of_times(tmp_path, git_calls):
    small = _site(tmp_path / "small", registrations=1, later_commits=0)
    large = _site(tmp_path / "large", registrations=6, later_commits=12)
    counts = []
    for repo in (small, large):
        git_calls.clear()
        result = _built(repo, repo.root / "public")
        assert sum(name.startswith("registrations/tiny-") for name in result.files) > 0
        counts.append(len(git_calls))
    assert counts[0] == counts[1] <= GIT_PER_BUILD, git_calls
    # an incremental rebuild after one edit, as an author waits for it
    _built(large, large.root / "public", incremental=True)
    page = large.root / "content" / "studies" / "tiny.md"
    page.write_text(page.read_text() + "\nOne more sentence.\n")
    git_calls.clear()
    _built(large, large.root / "public", incremental=True)
    assert len(git_calls) <= GIT_PER_BUILD, git_calls
    assert sum(call[3:5] == ["status", "--porcelain=v2"] for call in git_calls) == 1   # one git_state


def test_a_rebuild_names_the_new_commit(tmp_path):
    """`serve` calls build() again after each change: the footer follows HEAD."""
    repo = _site(tmp_path, registrations=1, later_commits=0)
    footers = []
    for n in range(2):
        result = _built(repo, repo.root / "public", incremental=True)
        head = repo.git("rev-parse", "HEAD").strip()
        page = result.files["studies/tiny/index.html"].decode()
        footers.append(f"Built from commit {head[:12]} (<code class=\"commit\" title=\"{head}\">" in page)
        repo.write("content/notes.md", f"---\ntitle: Notes\nsummary: Later note {n}.\n---\nLater.\n")
        repo.commit("a later commit", "content")
    assert footers == [True, True]


def _git_says(root) -> tuple:
    """git_state as two plain git commands define it."""
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True)
    status = subprocess.run(["git", "-C", str(root), "status", "--porcelain"], capture_output=True, text=True)
    if head.returncode or status.returncode:
        return None, False
    return head.stdout.strip(), bool(status.stdout.strip())


def test_git_state_says_what_git_says(tmp_path):
    assert git_state(tmp_path) == (None, False) == _git_says(tmp_path)          # not a repository
    repo = Repo(tmp_path / "r")
    repo.write("a.txt", "a\n")
    repo.git("add", "a.txt")
    assert git_state(repo.root) == (None, False) == _git_says(repo.root)      # no commit yet
    repo.commit("first", "a.txt")
    repo.write(".gitignore", "ignored.txt\n")
    repo.commit("ignore", ".gitignore")
    seen = []
    for change in (lambda: None, lambda: repo.write("ignored.txt", "x\n"), lambda: repo.write("new.txt", "n\n"),
                   lambda: (repo.root / "new.txt").unlink(), lambda: repo.write("a.txt", "b\n"),
                   lambda: repo.git("add", "a.txt")):
        change()
        assert git_state(repo.root) == _git_says(repo.root)
        seen.append(git_state(repo.root)[1])
    assert seen == [False, False, True, False, True, True]


def test_git_state_once_per_build_block(tmp_path, git_calls):
    repo = Repo(tmp_path / "r")
    repo.write("a.txt", "a\n")
    first = repo.commit("first", "a.txt")
    with git_state_per_build():
        assert git_state(repo.root) == (first, False)
        repo.write("a.txt", "b\n")
        second = repo.commit("second", "a.txt")
        with git_state_per_build():
            assert git_state(repo.root) == (first, False)     # one build sees one HEAD
    asked = lambda: sum("status" in call for call in git_calls)   # noqa: E731 - the test's own commits aside
    assert asked() == 1
    with git_state_per_build():
        assert git_state(repo.root) == (second, False)        # the next build sees the new one
    assert git_state(repo.root) == (second, False)            # and outside a build, git is asked each time
    assert asked() == 3


def test_superseded_records_add_one_git_process_in_all(tmp_path, git_calls):
    """Each superseded record is judged on an older commit's files, read by the build's one
    `git cat-file --batch`, however many records are superseded."""
    counts = []
    for superseded in (1, 4):
        repo = _site(tmp_path / str(superseded), registrations=4, later_commits=2)
        judged = repo.git("rev-list", "--max-count=1", "HEAD~2").strip()
        repo.write("registrations/superseded.yaml", "superseded:\n" + "".join(
            f"  - id: tiny-{n}\n    judged_at: {judged}\n    reason: a test\n" for n in range(superseded)))
        repo.commit("supersede", "registrations")
        git_calls.clear()
        result = _built(repo, repo.root / "public")
        assert result.files["registrations/tiny-0/index.html"].count(b"<dt>superseded</dt>") == 1
        counts.append(len(git_calls))
        assert sum("cat-file" in call for call in git_calls) == 1
    assert counts[0] == counts[1] <= GIT_PER_BUILD + 1, git_calls
