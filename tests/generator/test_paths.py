"""The path policy (site_src/paths.py): what a build may read, where it may write, and the swap.

Each test is an attack that worked on the generator before the policy: it deleted data, published
a file that should never leave the machine, or put a page outside the site.
"""
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from generator_helpers import REPO, git, refused, run, snapshot, write_page

INTRO = "## Section\n\nSome text first.\n"   # the body's first line is line 5


def _outside(tmp_path) -> Path:
    """A folder outside the repository with a file in it: it must never change."""
    folder = tmp_path / "outside"
    folder.mkdir(exist_ok=True)
    (folder / "keep.txt").write_text("the user's own file\n")
    return folder


# ---------------------------------------------------------------- --out never deletes what it did not make

@pytest.mark.parametrize("out", [".", "content", "data"])
def test_out_inside_the_repository_is_refused(site, capsys, tmp_path, out):
    (site / "notes-not-committed.txt").write_text("uncommitted work\n")
    refused(capsys, site, "--out", str(site / out),
            expect=("error: --out:", "build failed: 1 error(s)"), watch=(_outside(tmp_path),))
    assert (site / "notes-not-committed.txt").is_file() and (site / "content/index.md").is_file()


def test_out_that_holds_the_repository_is_refused(site, capsys):
    refused(capsys, site, "--out", str(site.parent), expect=("holds the repository",))


def test_out_folder_not_made_by_the_generator_is_refused(site, capsys, tmp_path):
    other = _outside(tmp_path)
    refused(capsys, site, "--out", str(other), expect=(f"--out: {other} is a folder that this generator did not make",),
            watch=(other,))


def test_public_symlink_to_another_folder_is_refused_not_emptied(site, capsys, tmp_path):
    other = _outside(tmp_path)
    os.symlink(other, site / "public")
    refused(capsys, site, expect=("is a symbolic link to", "not a build folder of this generator"), watch=(other,))
    assert (other / "keep.txt").read_text() == "the user's own file\n"


def test_real_public_folder_of_user_files_is_refused(site, capsys):
    (site / "public").mkdir()
    (site / "public" / "mine.txt").write_text("not a build\n")
    refused(capsys, site, expect=("did not make",))


def test_out_that_is_a_file_is_refused(site, capsys, tmp_path):
    target = tmp_path / "a-file"
    target.write_text("x\n")
    refused(capsys, site, "--out", str(target), expect=("exists and is not a folder",))
    assert target.read_text() == "x\n"


# ---------------------------------------------------------------- the swap

def _live(site) -> Path:
    return Path(os.path.realpath(site / "public"))


def test_public_is_a_link_flipped_onto_each_new_build(site):
    assert run(site) == 0
    first = _live(site)
    assert (site / "public").is_symlink() and not os.path.isabs(os.readlink(site / "public"))
    assert (first / ".site-build").is_file() and (first / "index.html").is_file()
    assert run(site) == 0 and _live(site) == first   # nothing changed: the incremental build stops
    with open(site / "content/index.md", "a") as handle:
        handle.write("\n")
    assert run(site) == 0
    second = _live(site)
    assert second != first and not first.exists()   # the older build is collected
    assert sorted(p.name for p in (site / ".public.builds").iterdir()) == [".lock", second.name]


def test_output_folder_is_world_readable(site):
    assert run(site) == 0
    for folder in (_live(site), _live(site) / "assets"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o755, oct(folder.stat().st_mode)


def test_leftovers_of_killed_builds_are_collected_and_nothing_else(site, tmp_path):
    assert run(site) == 0
    builds = site / ".public.builds"
    dead = builds / "b-killed"
    (dead / "assets").mkdir(parents=True)
    (dead / ".site-build").write_text("stamp\n")
    os.symlink("b-killed", builds / "link-killed")
    stranger = builds / "not-ours"
    stranger.mkdir()
    (stranger / "keep.txt").write_text("no stamp\n")
    assert run(site) == 0
    names = sorted(p.name for p in builds.iterdir())
    assert names == sorted([".lock", _live(site).name, "not-ours"])
    assert (stranger / "keep.txt").is_file()


def test_previous_real_public_folder_is_migrated(site):
    """public/ as the generator wrote it before the link layout: a real folder, no stamp."""
    assert run(site) == 0
    old = site / "old-layout"
    os.rename(_live(site), old)
    os.unlink(site / "public")
    os.rename(old, site / "public")
    (site / "public" / ".site-build").unlink()
    assert run(site) == 0
    assert (site / "public").is_symlink() and (site / "public" / "index.html").is_file()
    assert sorted(p.name for p in (site / ".public.builds").iterdir()) == [".lock", _live(site).name]


def test_empty_out_folder_is_used(site, tmp_path):
    out = tmp_path / "empty"
    out.mkdir()
    assert run(site, "--out", str(out)) == 0
    assert out.is_symlink() and (out / "index.html").is_file()


_LOOP = """
import sys
sys.path.insert(0, {repo!r})
from pathlib import Path
from site_src.site import build
print("ready", flush=True)
while True:
    assert build(Path({root!r})).ok
"""


def test_killed_at_any_moment_the_site_is_whole_and_the_next_build_cleans_up(site):
    """SIGKILL a process that builds in a loop, at several moments: public/ is always a whole
    site (never missing after the first build), and the next build leaves one build folder."""
    assert run(site) == 0
    for delay in (0.05, 0.3, 0.7, 1.1, 1.6):
        proc = subprocess.Popen([sys.executable, "-c", _LOOP.format(repo=str(REPO), root=str(site))],
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert (site / "public" / "index.html").is_file(), f"no site after a kill at {delay} s"
        assert (site / "public" / ".site-build").is_file()
    assert run(site) == 0
    left = [p.name for p in (site / ".public.builds").iterdir()]
    assert sorted(left) == [".lock", _live(site).name]


# ---------------------------------------------------------------- reading only tracked files, no links

def test_ignored_file_cannot_be_cited(site, capsys, tmp_path):
    (site / ".cache").mkdir()
    (site / ".cache" / "creds.json").write_text('{\n  "token": 12345\n}\n')
    write_page(site, "leak.md", INTRO + "\nThe token {{ .cache/creds.json#token }}.\n")
    err = refused(capsys, site, expect=("content/leak.md:9: {{ .cache/creds.json#token }}: ",
                                        "ignored or not tracked by git"))
    assert "12345" not in err


def test_untracked_file_cannot_be_cited(site, capsys):
    write_page(site, "cite.md", INTRO + "\nA value {{ data/scratch.json#a }}.\n")
    git(site, "add", "content/cite.md")
    (site / "data" / "scratch.json").write_text('{"a": 7}\n')
    capsys.readouterr()
    before = snapshot(site)
    assert run(site, stage=False) == 1
    err = capsys.readouterr().err
    assert "content/cite.md:9: {{ data/scratch.json#a }}: is not tracked by git: `git add` it" in err
    assert snapshot(site) == before


def test_untracked_page_is_an_error_not_published(site, capsys):
    write_page(site, "draft.md", INTRO)
    capsys.readouterr()
    assert run(site, stage=False) == 1
    assert "error: content/draft.md: page is not tracked by git" in capsys.readouterr().err


def test_not_a_git_checkout_is_refused(tmp_path, capsys):
    import shutil
    from generator_helpers import FIXTURE
    root = tmp_path / "plain"
    shutil.copytree(FIXTURE, root)
    assert run(root) == 1
    assert "is not a git work tree" in capsys.readouterr().err
    assert not os.path.lexists(root / "public")


@pytest.mark.parametrize("place, expect", [
    ("bundles/scratch/passwd.txt", "error: bundles/scratch/passwd.txt: bundle file is a symbolic link"),
    ("templates/static/evil.css", "error: templates/static/evil.css: static file is a symbolic link"),
    ("content/linked.md", "error: content/linked.md: page is a symbolic link"),
])
def test_symlinks_are_not_followed_or_published(site, capsys, tmp_path, place, expect):
    secret = tmp_path / "secret.txt"
    secret.write_text("---\ntitle: secret\nsummary: s\n---\nroot:x:0:0\n")
    (site / place).parent.mkdir(parents=True, exist_ok=True)
    os.symlink(secret, site / place)
    refused(capsys, site, expect=(expect,))
    assert "root:x:0:0" not in "".join(p.read_text(errors="replace") for p in site.rglob("*.html")
                                       if p.is_file() and not p.is_symlink())


def test_symlink_inside_the_repository_is_not_cited(site, capsys):
    os.symlink("golden.json", site / "data" / "alias.json")
    write_page(site, "alias.md", INTRO + "\nMean {{ data/alias.json:5 }}.\n")
    refused(capsys, site, expect=("content/alias.md:9: {{ data/alias.json:5 }}: is a symbolic link",))


def test_folder_symlink_out_of_the_repository_is_not_followed(site, capsys, tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "x.json").write_text('{"a": 1}\n')
    os.symlink(tmp_path / "elsewhere", site / "data" / "ext")
    write_page(site, "ext.md", INTRO + "\nA {{ data/ext/x.json#a }}.\n")
    refused(capsys, site, expect=("content/ext.md:9: {{ data/ext/x.json#a }}: ",), watch=(tmp_path / "elsewhere",))


# ---------------------------------------------------------------- page URLs

@pytest.mark.parametrize("name", ["...md", "..md", "x/...md", ".hidden.md", "source/x.md", "assets.md"])
def test_page_names_that_leave_their_url_are_refused(site, capsys, tmp_path, name):
    assert run(site) == 0
    home = (site / "public" / "index.html").read_bytes()
    write_page(site, name, INTRO)
    refused(capsys, site, expect=(f"error: content/{name}: cannot publish this page",), watch=(_live(site),))
    assert (site / "public" / "index.html").read_bytes() == home
    assert not (site / "index.html").exists() and not (site.parent / "index.html").exists()


def test_two_pages_with_one_url_are_an_error(site, capsys):
    write_page(site, "a.md", INTRO)
    write_page(site, "a/index.md", INTRO)
    refused(capsys, site, expect=("error: content/a/index.md: page has the URL /a/ of content/a.md",))


@pytest.mark.parametrize("where", ["live", "live/assets", "builds", "builds/new", "public/inner", "link/new"])
def test_the_builds_own_folders_are_refused_as_out(site, capsys, where):
    """Issue 18, case 3: `--out .public.builds/<live build>` reported "build ok" and turned the live
    folder into a link to a link; every later plain build was refused."""
    assert run(site) == 0
    live = _live(site)
    if where == "link/new":                         # a link of the user's own into the build folders
        os.symlink(".public.builds", site / "into-builds")
    out = {"live": live, "live/assets": live / "assets", "builds": site / ".public.builds",
           "builds/new": site / ".public.builds" / "new", "public/inner": site / "public" / "inner",
           "link/new": site / "into-builds" / "new"}[where]
    err = refused(capsys, site, "--out", str(out), expect=("where this generator keeps its build folders",))
    assert len(err.strip().splitlines()) == 2       # the refusal and the summary
    assert _live(site) == live and (live / ".site-build").is_file() and not os.path.islink(live)
    with open(site / "content/index.md", "a") as handle:
        handle.write("\n")
    assert run(site) == 0 and (_live(site) / "index.html").is_file()   # a plain build still works
