"""Incremental builds (site_src/incremental.py): after each edit an author makes, the incremental
output is byte-identical to a clean build of the same tree, only the pages the edit touches are
rendered again, and a no-op build stops before importing the figure libraries. The repository is
cloned and built once; each test edits a clone of that clone, caches copied."""
from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from site_src.site import build

REPO = Path(__file__).resolve().parents[2]
DEMO_PAGE = """---
title: An added page
summary: A page added and removed by the incremental-build test.
trust: exploratory
claim: observational vs causal
---

## What it shows

The demo value is {{ data/incr-demo.json#value }}, read from a fixture of its own.
"""


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.org",
                           "-c", "commit.gpgsign=false", *args], capture_output=True, text=True, check=True).stdout


def tree(path: Path) -> dict[str, str]:
    return {p.relative_to(path).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def built(site_dir, tmp_path_factory) -> tuple[Path, set]:
    """The repository's committed site (real studies, figures, registrations), cloned with history,
    with a page of its own added (content/incr-demo.md, reading data/incr-demo.json), and built once,
    caches and all: (the clone, the pages that first build rendered).

    The session's build of the repository's site (`site_dir`, tests/conftest.py) comes first: it
    draws every figure (and keeps what else the build caches by content) in the repository's
    .cache, which the clone starts from, so a fresh checkout draws them once, not once here and
    once for the browser suite. Its page cache (.cache/incremental) is not copied: this first
    build renders every page."""
    root = tmp_path_factory.mktemp("incr") / "repo"
    git(REPO, "clone", "-q", "--local", "--no-hardlinks", str(REPO), str(root))
    caches = REPO / ".cache"
    for cache in sorted(caches.iterdir()) if caches.is_dir() else []:
        # drawings are cached by the hash of their spec: shared only to save time
        if cache.is_dir() and cache.name != "incremental":
            shutil.copytree(cache, root / ".cache" / cache.name)
    add_page(root, "content/incr-demo.md", "data/incr-demo.json", 0.25)
    git(root, "commit", "-q", "-m", "a page of the incremental tests")
    # every footer says whether the tree has uncommitted changes, so the first edit after a commit
    # rebuilds every page; start dirty, as an author at work does
    with open(root / "README.md", "a", encoding="utf-8") as handle:
        handle.write("\nAn uncommitted line.\n")
    first = build(root, root.parent / "public")
    assert first.ok, "\n".join(first.errors.lines())
    return root, set(first.memo.rendered)


@pytest.fixture
def clone(built, tmp_path) -> Path:
    """A fresh clone of the built one, with its caches (a build there reuses every unchanged page):
    each test edits its own copy."""
    source, _pages = built
    root = tmp_path / "repo"
    git(source, "clone", "-q", "--local", str(source), str(root))
    shutil.copy(source / "README.md", root / "README.md")   # the uncommitted line
    shutil.copytree(source / ".cache", root / ".cache")
    return root


def add_page(root: Path, page: str, fixture: str, value: float) -> None:
    """A page with a fixture of its own, added to git as an author does."""
    (root / fixture).parent.mkdir(exist_ok=True)
    (root / fixture).write_text(json.dumps({"value": value}) + "\n")
    (root / page).write_text(DEMO_PAGE.replace("data/incr-demo.json", fixture))
    git(root, "add", page, fixture)


def edit(root: Path, rel: str, old: str, new: str) -> None:
    path = root / rel
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{rel} no longer holds {old!r}: update the test's edit"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def check_same_as_clean(root: Path, out: Path, clean: Path, rendered: set | None):
    result = build(root, out)
    assert result.ok, "\n".join(result.errors.lines())
    memo = result.memo
    reference = build(root, clean, incremental=False)
    assert reference.ok, "\n".join(reference.errors.lines())
    incremental, fresh = tree(out), tree(clean)
    differ = sorted(k for k in incremental.keys() | fresh.keys() if incremental.get(k) != fresh.get(k))
    assert not differ, f"incremental output differs from a clean build in {differ[:10]}"
    if rendered is not None:
        assert set(memo.rendered) == rendered, (memo.rendered, memo.reused)
    return memo


# Each test below is one edit an author makes, in a clone whose caches hold every page: after it,
# the incremental build equals a clean build byte for byte, and only the pages the edit touches
# were rendered again.

def test_a_first_build_renders_every_page_and_a_second_stops_at_once(built):
    root, pages = built
    assert {"index.md", "studies/organism.md", "published-figures.md", "incr-demo.md"} <= pages
    again = build(root, root.parent / "public")
    assert again.ok and again.note.startswith("up to date") and again.memo is None


def test_a_prose_edit_renders_that_page_only(clone, tmp_path):
    edit(clone, "content/interpreting-results-honestly.md", "\n## ", "\nAn added sentence, without figures.\n\n## ")
    memo = check_same_as_clean(clone, tmp_path / "public", tmp_path / "clean", {"interpreting-results-honestly.md"})
    assert "organism" in memo.cached_bundles and not memo.new_bundles   # the studies' bundles (zip, kit run) are reused too


def test_an_added_page_renders_every_page(built, clone, tmp_path):
    add_page(clone, "content/incr-added.md", "data/incr-added.json", 0.125)   # the navigation changes: every page
    check_same_as_clean(clone, tmp_path / "public", tmp_path / "clean", built[1] | {"incr-added.md"})


def test_a_fixture_edit_renders_the_page_that_resolves_against_it(clone, tmp_path):
    out = tmp_path / "public"
    (clone / "data/incr-demo.json").write_text(json.dumps({"value": 0.5}) + "\n")
    check_same_as_clean(clone, out, tmp_path / "clean", {"incr-demo.md"})
    assert "0.5" in (out / "incr-demo/index.html").read_text()


def test_a_figure_caption_edit_renders_that_page_only(clone, tmp_path):
    edit(clone, "content/studies/organism.md", "caption: ", "caption: Edited. ")
    check_same_as_clean(clone, tmp_path / "public", tmp_path / "clean", {"studies/organism.md"})


def test_a_title_every_navigation_shows_renders_every_page(built, clone, tmp_path):
    edit(clone, "content/observational-vs-causal.md", "title: ", "title: Renamed ")
    check_same_as_clean(clone, tmp_path / "public", tmp_path / "clean", built[1])


def test_a_template_edit_renders_every_page(built, clone, tmp_path):
    edit(clone, "templates/page.html", "</article>", "</article>\n<!-- edited -->")
    check_same_as_clean(clone, tmp_path / "public", tmp_path / "clean", built[1])


def test_a_failed_build_writes_and_caches_nothing(clone, tmp_path):
    out = tmp_path / "public"
    state = clone / ".cache/incremental/state.json"
    cached = state.read_bytes()
    (clone / "data/incr-demo.json").write_text("{broken\n")
    assert not build(clone, out).ok
    assert not out.exists() and state.read_bytes() == cached
    (clone / "data/incr-demo.json").write_text(json.dumps({"value": 0.75}) + "\n")   # fixed: that page again
    check_same_as_clean(clone, out, tmp_path / "clean", {"incr-demo.md"})


def test_a_removed_page_renders_every_page_and_leaves_nothing_behind(built, clone, tmp_path):
    out = tmp_path / "public"
    git(clone, "rm", "-q", "-f", "content/incr-demo.md", "data/incr-demo.json")
    check_same_as_clean(clone, out, tmp_path / "clean", built[1] - {"incr-demo.md"})
    assert not (out / "incr-demo").exists()
    # the cache keeps only what its entries refer to: older versions of pages are deleted
    from site_src.incremental import State
    state = State(clone)
    stored = {p.name for p in (clone / ".cache/incremental/blobs").rglob("*") if p.is_file()}
    assert stored == state.referenced() and "content/incr-demo.md" not in state.data["pages"]


def test_figure_numbering_change_rebuilds_the_pages_that_show_it(clone, tmp_path):
    out, clean = tmp_path / "public", tmp_path / "clean"
    assert build(clone, out).ok
    # a figure moved ahead of the others on its page renumbers them; a page linking to one of them
    # (published-figures links its own figure only) is untouched
    text = (clone / "content/studies/organism.md").read_text()
    blocks = text.split("```figure")
    assert len(blocks) >= 3, "the study page needs two figures for this test"
    first, second = blocks[1], blocks[2]
    first_block, first_rest = first.split("```", 1)
    second_block, second_rest = second.split("```", 1)
    swapped = blocks[0] + "```figure" + second_block + "```" + first_rest + "```figure" + first_block + "```" + second_rest
    (clone / "content/studies/organism.md").write_text("```figure".join([swapped, *blocks[3:]]))
    linked = {"studies/organism.md"} | {p.relative_to(clone / "content").as_posix()
                                        for p in (clone / "content").rglob("*.md")
                                        if p.name != "organism.md" and any(
                                            f"[[fig:{fid}]]" in p.read_text() for fid in _ids(first_block + second_block))}
    check_same_as_clean(clone, out, clean, linked)


def _ids(text: str) -> list[str]:
    return [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("id:")]


def test_noop_build_does_not_import_the_figure_libraries(clone, tmp_path):
    out = tmp_path / "public"
    assert build(clone, out).ok
    probe = ("import sys, build; rc = build.main(['--root', sys.argv[1], '--out', sys.argv[2]]); "
             "print(rc, sorted({m.split('.')[0] for m in sys.modules} & {'altair', 'vl_convert', 'pandas', 'jinja2'}))")
    done = subprocess.run([sys.executable, "-c", probe, str(clone), str(out)], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "up to date" in done.stdout
    assert done.stdout.strip().endswith("0 []"), done.stdout


def test_noop_notices_a_damaged_output(clone, tmp_path):
    out = tmp_path / "public"
    assert build(clone, out).ok
    index = out / "index.html"
    good = index.read_bytes()
    index.write_bytes(good + b"<!-- tampered -->")
    result = build(clone, out)
    assert result.ok and not result.note.startswith("up to date")
    assert (out / "index.html").read_bytes() == good
    (out / "stale.txt").write_text("not made by the build")
    result = build(clone, out)
    assert result.ok and not result.note.startswith("up to date")
    assert not (out / "stale.txt").exists()


def test_a_figure_id_clash_with_a_reused_page_is_still_an_error(clone, tmp_path):
    """The numbering of an unchanged page is replayed from the cache, unless one of its ids is
    already taken: then the real pass runs and reports the clash."""
    out = tmp_path / "public"
    assert build(clone, out).ok
    text = (clone / "content/studies/organism.md").read_text()
    block = "```figure" + text.split("```figure")[1].split("```")[0] + "```\n"
    page = clone / "content/index.md"     # first in the navigation: numbered before the study
    original = page.read_text()
    page.write_text(original + "\n" + block)
    try:
        result = build(clone, out)
    finally:
        page.write_text(original)
    assert not result.ok
    assert any("is already used at content/index.md" in line for line in result.errors.lines()), result.errors.lines()


def test_a_rebuild_links_what_it_did_not_change_and_never_follows_a_planted_link(clone, tmp_path):
    """Unchanged output files (a study's zip, the fixtures' copies) are hard links to the previous
    build's, changed ones are written anew, and a link planted in the live site is not followed."""
    import os

    out = tmp_path / "public"
    assert build(clone, out).ok
    zip_before = os.stat(out / "bundles/organism.zip").st_ino
    page_before = os.stat(out / "interpreting-results-honestly/index.html").st_ino
    outside = tmp_path / "outside.zip"
    outside.write_bytes((out / "bundles/planted-v2.zip").read_bytes())   # the same bytes, elsewhere
    (out / "bundles/planted-v2.zip").unlink()
    os.symlink(outside, out / "bundles/planted-v2.zip")
    edit(clone, "content/interpreting-results-honestly.md", "\n## ", "\nA sentence for the link test.\n\n## ")
    result = build(clone, out)
    assert result.ok, "\n".join(result.errors.lines())
    assert os.stat(out / "bundles/organism.zip").st_ino == zip_before
    assert os.stat(out / "interpreting-results-honestly/index.html").st_ino != page_before
    planted = out / "bundles/planted-v2.zip"
    assert not planted.is_symlink() and os.stat(planted).st_ino != os.stat(outside).st_ino
    assert planted.read_bytes() == outside.read_bytes()
