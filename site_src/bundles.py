"""Study bundles: a deterministic zip of `bundles/<study>/` plus the stdlib check, its sha256,
and the real output of running that check, for the page's "Reproduce this" section.

The calls the generator makes are documented in docs/bundles.md.
"""
from __future__ import annotations

import hashlib
import io
import re
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path, PurePosixPath

from bundle_kit import contract

from safe_io import git_state

from . import bundle_checks
from .errors import BuildError
from .urls import url_path

KIT_DIR = Path(__file__).resolve().parent.parent / "bundle_kit"
KIT_FILES = contract.KIT_FILES  # copied from bundle_kit/ into every zip at build time
REQUIRED = contract.REQUIRED_FILES
# Git may check text out with CRLF on some machines; the zip must not depend on that.
TEXT_SUFFIXES = {".json", ".jsonl", ".md", ".py", ".txt", ".csv", ".yaml", ".yml", ".tsv"}
SKIPPED = re.compile(r"(^|/)(\.|__pycache__(/|$))|\.pyc$|~$")
STUDY_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")


class BundleError(BuildError, RuntimeError):
    """A bundle that cannot be built or published; the message names the bundle and file."""


@dataclass(frozen=True)
class BundleFile:
    name: str     # path inside the zip (and inside the unzipped folder)
    size: int
    sha256: str
    href: str     # site-root-relative URL of this file's own download

    @property
    def size_text(self) -> str:
        """The file's size as the page prints it."""
        return human_size(self.size)

    @property
    def url(self) -> str:
        """`href` as a URL (a member named `a%b.json` is linked as `a%25b.json`)."""
        return url_path(self.href)


@dataclass(frozen=True)
class Bundle:
    name: str
    zip_bytes: bytes = field(repr=False)
    sha256: str
    size: int
    files: tuple[BundleFile, ...]
    expected_output: str
    commit: str
    source_dir: str = ""  # repository-relative folder the study files came from

    @property
    def zip_href(self) -> str:
        """The zip's URL from the site root."""
        return f"bundles/{self.name}.zip"

    @property
    def size_text(self) -> str:
        """The zip's size as the page prints it."""
        return human_size(self.size)

    @property
    def readme_href(self) -> str:
        """The generator's line-numbered view of the README (a raw .md may download, not display)."""
        return f"source/{self.source_dir}/README.md.html"

    @property
    def run_command(self) -> str:
        """The shell command a reader runs to unzip the bundle and check it."""
        return f"unzip {self.name}.zip -d {self.name} && python {self.name}/reproduce.py"

    @property
    def run_command_no_unzip(self) -> str:
        """The same command for a machine without unzip (Python's zipfile unpacks it)."""
        return f"python -m zipfile -e {self.name}.zip {self.name} && python {self.name}/reproduce.py"

    def member(self, name: str) -> bytes:
        """The bytes of one file inside the zip."""
        with zipfile.ZipFile(io.BytesIO(self.zip_bytes)) as archive:
            return archive.read(name)


def human_size(size: int) -> str:
    """A size as the page prints it: bytes below 1000, else kB or MB."""
    if size < 1000:
        return f"{size:,} bytes"
    unit, value = ("kB", size / 1e3) if size < 1e6 else ("MB", size / 1e6)
    return f"{value:.1f} {unit} ({size:,} bytes)"


# ---------------------------------------------------------------- collecting the files

def collect_members(study_dir: Path, kit_dir: Path = KIT_DIR, names: list[str] | None = None) -> list[tuple[str, bytes]]:
    """(zip name, bytes) of every file of the study plus the kit files, sorted by name.

    `names` (paths inside the study folder) are the files the site build's path policy allows;
    without it every file in the folder is taken (a bundle built on its own, outside a checkout).
    """
    study_dir = Path(study_dir)
    if not study_dir.is_dir():
        raise BundleError(f"bundle {study_dir.name}: {study_dir} is not a folder")
    members = {}
    paths = sorted(study_dir.rglob("*")) if names is None else [study_dir / n for n in sorted(names)]
    for path in paths:
        name = path.relative_to(study_dir).as_posix()
        if path.is_dir() or SKIPPED.search(name):
            continue
        if path.is_symlink():
            raise BundleError(f"bundle {study_dir.name}: {name} is a symbolic link; commit the file itself")
        if name in KIT_FILES:
            raise BundleError(f"bundle {study_dir.name}: {name} is copied from bundle_kit/ at build time; "
                              f"remove the copy in {study_dir}")
        members[name] = _normalized(path)
    missing = [name for name in REQUIRED if name not in members]
    if missing:
        raise BundleError(f"bundle {study_dir.name}: {study_dir} lacks {', '.join(missing)}")
    for name in KIT_FILES:
        members[name] = _normalized(Path(kit_dir) / name)
    return sorted(members.items(), key=lambda item: item[0].encode("utf-8"))


def _normalized(path: Path) -> bytes:
    data = path.read_bytes()
    if path.suffix in TEXT_SUFFIXES:
        data = data.replace(b"\r\n", b"\n")
    return data


# ---------------------------------------------------------------- the zip itself

# Entries are STORED (not deflated): deflate output depends on the zlib build (zlib, zlib-ng),
# which differs across Pythons and platforms. Every header field zipfile takes from the machine
# (date, system, permissions) is fixed here, so the bytes depend on the members alone.
_EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest date a zip can hold
_UNIX = 3                       # "made by" Unix, so the permissions below are honoured
_FILE_MODE = 0o100644           # a regular file, rw-r--r--


def deterministic_zip(members: list[tuple[str, bytes]]) -> bytes:
    """A STORED zip of `members` in the given order, with fixed dates, permissions and headers."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED, allowZip64=False) as archive:
        for name, data in members:
            info = zipfile.ZipInfo(name, date_time=_EPOCH)
            info.create_system = _UNIX
            info.external_attr = _FILE_MODE << 16
            try:
                archive.writestr(info, data)
            except zipfile.LargeZipFile as exc:
                raise BundleError(f"{name}: {exc}") from None
    return buffer.getvalue()


# ---------------------------------------------------------------- running the check

def run_reproduce(name: str, zip_bytes: bytes, python: str = sys.executable,
                  limit: bundle_checks.Limit | None = None) -> str:
    """Unzip into a fresh temporary folder, run `python -I reproduce.py` there; return its stdout.
    `limit`: the time it is given (bundle_checks.time_limit: scaled to the check and the machine)."""
    limit = limit or bundle_checks.time_limit(len(zip_bytes), None)
    with tempfile.TemporaryDirectory(prefix=f"bundle-{name}-") as tmp:
        folder = Path(tmp) / name
        with zipfile.ZipFile(io.BytesIO(zip_bytes)) as archive:
            archive.extractall(folder)
        try:
            done = subprocess.run([python, "-I", "reproduce.py"], cwd=folder, capture_output=True,
                                  timeout=limit.seconds)
        except subprocess.TimeoutExpired:
            raise BundleError(limit.message(name)) from None
        stdout = done.stdout.decode("utf-8", "replace")
        if done.returncode != 0:
            detail = (done.stderr.decode("utf-8", "replace") + stdout).strip()
            raise BundleError(f"bundle {name}: reproduce.py exited {done.returncode}:\n{detail}")
        if tmp in stdout:
            raise BundleError(f"bundle {name}: reproduce.py printed a machine-specific path ({tmp})")
        return stdout


# ---------------------------------------------------------------- the commit it was built from

def git_commit(repo_root: Path) -> str:
    """HEAD of `repo_root`, with `+dirty` when tracked or untracked files differ from it."""
    head, dirty = git_state(repo_root)
    if head is None:
        return "unknown (not a git checkout)"
    return head + ("+dirty" if dirty else "")


# ---------------------------------------------------------------- the bundle

def build_bundle(study_dir: Path, repo_root: Path, members: list[str] | None = None) -> Bundle:
    """Zip the study deterministically, run its check, and describe it for the page.

    `members`: the study's files the site build allows (see collect_members)."""
    study_dir, repo_root = Path(study_dir).resolve(), Path(repo_root).resolve()
    name = study_dir.name
    if not STUDY_NAME.fullmatch(name):
        raise BundleError(f"bundle {name!r}: a study folder name must match {STUDY_NAME.pattern} "
                          f"(it appears in URLs and in the shell command on the page)")
    try:
        source_dir = study_dir.relative_to(repo_root).as_posix()
    except ValueError:
        raise BundleError(f"bundle {name}: {study_dir} is not inside {repo_root}") from None
    members = collect_members(study_dir, names=members)
    zip_bytes = deterministic_zip(members)
    files = tuple(
        BundleFile(member, len(data), hashlib.sha256(data).hexdigest(),
                   f"bundles/{name}/{member}" if member in KIT_FILES else f"source/{source_dir}/{member}")
        for member, data in members
    )
    return Bundle(name=name, zip_bytes=zip_bytes, sha256=hashlib.sha256(zip_bytes).hexdigest(),
                  size=len(zip_bytes), files=files, commit=git_commit(repo_root), source_dir=source_dir,
                  # run, or kept from a run of the same zip by this interpreter (bundle_checks.py)
                  expected_output=bundle_checks.output(name, zip_bytes, repo_root,
                                                       lambda limit: run_reproduce(name, zip_bytes, limit=limit)))


# ---------------------------------------------------------------- publishing

def public_files(bundles: list[Bundle]) -> dict[str, bytes]:
    """{path under public/: bytes}: each zip, its kit files, and SHA256SUMS over the zips.

    The study's own files are published by the generator under public/source/ like every fixture.
    """
    out = {}
    for bundle in sorted(bundles, key=lambda b: b.name):
        out[bundle.zip_href] = bundle.zip_bytes
        for name in KIT_FILES:
            out[f"bundles/{bundle.name}/{name}"] = bundle.member(name)
    out["SHA256SUMS"] = sha256sums(bundles)
    return out


def sha256sums(bundles: list[Bundle]) -> bytes:
    """`sha256sum -c` format, paths relative to public/."""
    return "".join(f"{b.sha256}  {b.zip_href}\n" for b in sorted(bundles, key=lambda b: b.name)).encode()


class PublishError(BundleError):
    """A page would print a sha256 that the file it serves does not have."""


class _PrintedHashes(HTMLParser):
    """Collects (path, text) of every element carrying data-sha256-for."""

    def __init__(self):
        super().__init__()
        self.found: list[tuple[str, str]] = []
        self._open: list[list] = []  # [tag, path, text parts]

    def handle_starttag(self, tag, attrs):
        path = dict(attrs).get("data-sha256-for")
        if path is not None:
            self._open.append([tag, path, []])

    def handle_endtag(self, tag):
        if self._open and self._open[-1][0] == tag:
            _tag, path, parts = self._open.pop()
            self.found.append((path, "".join(parts).strip()))

    def handle_data(self, data):
        for entry in self._open:
            entry[2].append(data)


def verify_published(public_dir: Path, html: str, bundle: Bundle, page: str = "page") -> None:
    """Refuse a page whose printed sha256 differs from the file it serves.

    Run after every file is written under `public_dir` (before the swap into place). Checks each
    `data-sha256-for` element of `html` against the file at that path, the zip's against `bundle`,
    and SHA256SUMS's line for the zip. `page` names the page in the error.
    """
    public_dir = Path(public_dir)
    parser = _PrintedHashes()
    # parse from the first tag that prints a hash: the page body before it (a study page is mostly
    # tables and figures) cannot hold one, and parsing all of it was most of this check's time
    first = html.find("data-sha256-for")
    parser.feed(html[html.rfind("<", 0, first):] if first >= 0 else "")
    parser.close()
    printed = dict(parser.found)
    if bundle.zip_href not in printed:
        raise PublishError(f"{page}: does not print the sha256 of {bundle.zip_href}")
    if printed[bundle.zip_href] != bundle.sha256:
        raise PublishError(f"{page}: prints sha256 {printed[bundle.zip_href]} for {bundle.zip_href}, "
                           f"but bundle {bundle.name} was built with {bundle.sha256}")
    for path, shown in parser.found:
        relative = PurePosixPath(path)
        served = public_dir / relative
        if relative.is_absolute() or ".." in relative.parts or not served.is_file():
            raise PublishError(f"{page}: prints the sha256 of {path}, which the site does not serve")
        actual = hashlib.sha256(served.read_bytes()).hexdigest()
        if shown != actual:
            raise PublishError(f"{page}: prints sha256 {shown} for {path}, but the served file has {actual}")
    sums = public_dir / "SHA256SUMS"
    listed = sums.read_text(encoding="utf-8").splitlines() if sums.is_file() else []
    if f"{bundle.sha256}  {bundle.zip_href}" not in listed:
        raise PublishError(f"{page}: SHA256SUMS does not list {bundle.zip_href} with sha256 {bundle.sha256}")
