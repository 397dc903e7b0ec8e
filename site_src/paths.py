"""The build's one path policy: what it may read, and where and how it may write.

Reading: an input is a repository-relative path that stays inside the repository, is tracked by
git (in the index), is a regular file, and is reached without passing through a symbolic link.
So an ignored secret (`.cache/creds.json`), a scratch file nobody committed, or a symlink to
`/etc/passwd` can be neither cited nor published. `InputRefused` says which rule a path broke.

Writing: `OutputFolder` owns the output path (`public/` by default). Every build is written into a
fresh folder beside it (`.public.builds/<token>/`, stamped with `STAMP`), and `public` becomes a
symbolic link to that folder by one `rename`, so there is never a moment without a site. Only
folders carrying the stamp are ever deleted; an output path that holds anything else (`--out .`,
`--out content`, a symlink to a folder the generator did not make) is refused untouched.
"""
from __future__ import annotations

import fcntl
import os
import re
import secrets
import shutil
import stat
import subprocess
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from .errors import BuildError

STAMP = ".site-build"
BUILDS = re.compile(r"\..+\.builds")      # `.<name>.builds/`: the build folders of output path <name>
STAMP_TEXT = "made by site_src (build.py); this folder may be deleted by the next build\n"
MAX_NAME_BYTES = 255          # one path segment, as most file systems allow
GIT_TIMEOUT_S = 60


class InputRefused(BuildError):
    """A path the build may not read; the message says which rule it broke."""


class OutputRefused(BuildError):
    """An output location the build will not write to (or swap into), with the reason."""


# ---------------------------------------------------------------- reading

def clean_rel(text: str) -> str | None:
    """`text` as a normalized repository-relative POSIX path, or None if it leaves the repository."""
    if not text or os.path.isabs(text) or "\\" in text or "\x00" in text:
        return None
    norm = os.path.normpath(text).replace(os.sep, "/")
    if norm == ".." or norm.startswith("../") or norm == ".":
        return None
    return norm


def _git_list(root: Path, *args: str) -> list[str]:
    done = subprocess.run(["git", "-C", str(root), "ls-files", "-z", *args], capture_output=True,
                          timeout=GIT_TIMEOUT_S)
    if done.returncode != 0:
        raise InputRefused(f"{root} is not a git work tree: the build reads only files tracked by git"
                           f" ({done.stderr.decode('utf-8', 'replace').strip()})")
    return [name for name in done.stdout.decode("utf-8", "surrogateescape").split("\0") if name]


class RepoFiles:
    """The files the build may read: tracked by git, inside `root`, no symbolic link on the way."""

    def __init__(self, root: Path):
        self.root = Path(root).resolve()
        self.tracked = set(_git_list(self.root, "--cached"))
        self.untracked = set(_git_list(self.root, "--others", "--exclude-standard"))
        self._refusals: dict[str, str | None] = {}

    def refusal(self, rel: str) -> str | None:
        """Why `rel` may not be read (None when it may); asked once per file per build (a page asks
        for the same few fixtures dozens of times)."""
        if rel not in self._refusals:
            self._refusals[rel] = self._refusal(rel)
        return self._refusals[rel]

    def _refusal(self, rel: str) -> str | None:
        norm = clean_rel(rel)
        if norm is None:
            return "is outside the repository: the build reads committed files only"
        if norm not in self.tracked:
            if norm in self.untracked:
                return "is not tracked by git: `git add` it (the build publishes only tracked files)"
            if os.path.lexists(self.root / norm):
                return "is ignored or not tracked by git: the build reads only tracked files"
            return "file not found"
        here = self.root
        for part in PurePosixPath(norm).parts:
            here = here / part
            try:
                info = os.lstat(here)
            except FileNotFoundError:
                return "file not found"
            except OSError as exc:
                return f"cannot be read: {exc.strerror}"
            if stat.S_ISLNK(info.st_mode):
                where = "is" if here == self.root / norm else f"lies under {here.relative_to(self.root).as_posix()}, which is"
                return f"{where} a symbolic link: the build never follows links (commit the file itself)"
        if not stat.S_ISREG(info.st_mode):
            return "is not a regular file"
        return None

    def path(self, rel: str) -> Path:
        """The absolute path of an allowed input; raises InputRefused."""
        why = self.refusal(rel)
        if why:
            raise InputRefused(why)
        return self.root / clean_rel(rel)

    def read_bytes(self, rel: str) -> bytes:
        """The bytes of a file the path policy allows (InputRefused otherwise)."""
        return self.path(rel).read_bytes()

    def listed(self, folder: str, suffix: str = "") -> tuple[list[str], list[tuple[str, str]]]:
        """(allowed files under `folder`, [(file, why refused)]) for every tracked or untracked,
        not ignored, file there, sorted. Ignored files are not listed at all."""
        prefix = folder.rstrip("/") + "/"
        names = sorted(n for n in self.tracked | self.untracked
                       if n.startswith(prefix) and n.endswith(suffix))
        good, bad = [], []
        for name in names:
            why = self.refusal(name)
            (bad.append((name, why)) if why else good.append(name))
        return good, bad


# ---------------------------------------------------------------- writing

def check_out_rel(rel: str) -> str | None:
    """Why an output path (relative to the site root) may not be written (None when fine)."""
    if clean_rel(rel) != rel or rel.endswith("/"):
        return "is not a plain path inside the site"
    for part in rel.split("/"):
        if part.startswith(".") and part != STAMP or len(part.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
            return f"has a segment {part[:40]!r}{'...' if len(part) > 40 else ''} that is hidden or too long"
        if any(ord(ch) < 32 or ch == "\x7f" for ch in part):
            return "has a control character"
    return None


def _is_stamped(folder: Path) -> bool:
    try:
        return (not os.path.islink(folder) and os.path.isdir(folder)
                and stat.S_ISREG(os.lstat(folder / STAMP).st_mode))
    except OSError:
        return False


def _looks_like_old_build(folder: Path) -> bool:
    """A real folder an earlier generator (before stamps) wrote: public/ with its index.html and
    assets/, and not one file git tracks. Only the default output path is ever migrated."""
    return (folder.is_dir() and not folder.is_symlink() and (folder / "index.html").is_file()
            and (folder / "assets").is_dir() and not (folder / ".git").exists())


class OutputFolder:
    """The output path and its build folders, `<parent>/.<name>.builds/<token>/`."""

    def __init__(self, out: Path, root: Path | None = None):
        out = Path(os.path.abspath(out))
        self.out = out
        self.root = Path(root).resolve() if root is not None else None
        self.builds = out.parent / f".{out.name}.builds"

    # -- what is there now
    def refusal(self) -> str | None:
        """Why this output path cannot take a build (None when it can)."""
        out = self.out
        real_parent = Path(os.path.realpath(out.parent))
        for path in (out, real_parent / out.name):   # as written, and with every link on the way followed
            builds = next((p for p in (path, *path.parents) if BUILDS.fullmatch(p.name)), None)
            if builds is not None:
                return (f"{out} lies in {builds}, where this generator keeps its build folders (the live site "
                        "among them): choose an output folder of its own")
        if self.root is not None:
            real = real_parent / out.name
            if self.root == real or self.root.is_relative_to(real):
                return f"{out} holds the repository: choose an output folder of its own"
            for inner in (".git", "content", "templates", "bundles", "quoted"):
                if real.is_relative_to(self.root / inner):
                    return f"{out} lies inside the repository's {inner}/: choose an output folder of its own"
        if os.path.islink(out):
            if self.live() is None:
                return (f"{out} is a symbolic link to {os.readlink(out)}, which is not a build folder of this "
                        f"generator: refusing to touch it")
            return None
        if not os.path.lexists(out):
            return None
        if not os.path.isdir(out):
            return f"{out} exists and is not a folder"
        if _is_stamped(out) or not any(os.scandir(out)) or self._migratable():
            return None
        return (f"{out} is a folder that this generator did not make (it has no {STAMP} stamp) and is not "
                f"empty: refusing to write there; choose a new or empty folder")

    def _migratable(self) -> bool:
        return (self.root is not None and self.out == self.root / "public"
                and _looks_like_old_build(self.out) and not self._tracked_inside())

    def _tracked_inside(self) -> bool:
        done = subprocess.run(["git", "-C", str(self.root), "ls-files", "-z", "--", "public"],
                              capture_output=True, timeout=GIT_TIMEOUT_S)
        return done.returncode != 0 or bool(done.stdout)

    def live(self) -> Path | None:
        """The build folder the output path shows now (None when it shows none)."""
        if not os.path.islink(self.out):
            return None
        target = Path(os.path.realpath(self.out))
        return target if target.parent == Path(os.path.realpath(self.builds)) and _is_stamped(target) else None

    # -- writing a build
    def new_build(self) -> Path:
        """A fresh, stamped, 0755 build folder; raises OSError when it cannot be made."""
        self.builds.mkdir(mode=0o755, exist_ok=True)
        folder = self.builds / f"b-{secrets.token_hex(6)}"
        folder.mkdir(mode=0o755)
        os.chmod(folder, 0o755)
        (folder / STAMP).write_text(STAMP_TEXT, encoding="utf-8")
        return folder

    @contextmanager
    def locked(self):
        """One build at a time may swap and collect (serve and a manual build may overlap)."""
        self.builds.mkdir(mode=0o755, exist_ok=True)
        with open(self.builds / ".lock", "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def swap(self, folder: Path) -> None:
        """Point the output path at `folder` with one rename; then collect older build folders."""
        why = self.refusal()
        if why:
            raise OutputRefused(why)
        out = self.out
        if os.path.lexists(out) and not os.path.islink(out):
            self._move_aside()
        link = self.builds / f"link-{secrets.token_hex(6)}"
        os.symlink(f"{self.builds.name}/{folder.name}", link)
        try:
            os.replace(link, out)
        except OSError:
            os.unlink(link)
            raise
        self.collect(keep=folder)

    def _move_aside(self) -> None:
        """A real folder at the output path: empty (removed), stamped or an old build (moved into
        the build folders, to be collected). Between this and the rename no site is served, once."""
        out = self.out
        if not any(os.scandir(out)):
            os.rmdir(out)
            return
        aside = self.builds / f"old-{secrets.token_hex(6)}"
        os.replace(out, aside)
        if not (aside / STAMP).exists():
            (aside / STAMP).write_text(STAMP_TEXT, encoding="utf-8")

    def collect(self, keep: Path | None = None) -> None:
        """Delete every stamped build folder except `keep` and the one the output path shows, and
        stray links of killed swaps. Nothing unstamped is ever deleted."""
        if not self.builds.is_dir():
            return
        live = Path(os.path.realpath(self.out)) if os.path.islink(self.out) else None
        for entry in sorted(self.builds.iterdir()):
            if entry.name.startswith("link-") and entry.is_symlink():
                entry.unlink()
            elif entry.name.startswith(("b-", "old-")) and not entry.is_symlink() and entry.is_dir():
                if entry == keep or (live is not None and Path(os.path.realpath(entry)) == live):
                    continue
                if _is_stamped(entry):
                    _remove_stamped(entry)
                elif not any(os.scandir(entry)):
                    os.rmdir(entry)   # killed between making the folder and stamping it

    def discard(self, folder: Path) -> None:
        """Remove a build folder this run made (a failed build)."""
        if _is_stamped(folder) and folder.parent == self.builds:
            _remove_stamped(folder)


def _remove_stamped(folder: Path) -> None:
    """Delete a stamped folder, the stamp last: a kill part way leaves it stamped, so the next
    build finishes the job. Links inside are removed, never followed."""
    try:
        for entry in os.scandir(folder):
            if entry.name == STAMP:
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
        os.unlink(folder / STAMP)
        os.rmdir(folder)
    except OSError:
        pass   # left stamped (or half removed): collected by a later build
