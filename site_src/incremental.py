"""Incremental builds: skip a build whose inputs did not change, and re-render only the pages whose
inputs did. The output stays byte-identical to a clean build (tests/incremental/test_incremental.py
checks it over the edits an author makes).

Two layers, both keyed by sha256 digests and kept in ROOT/.cache/incremental/ (a cache: deleting
it only makes the next build a clean one):

- **No-op.** `up_to_date(root, out)` hashes every file git lists in the repository (tracked and
  untracked, not ignored), the HEAD commit and whether the tree is dirty (the footer names both),
  the generator's version and the output folder's entries (size, mtime, ctime, inode). When all
  of it equals what the last successful build into `out` recorded, the build stops there, before
  anything imports jinja2, altair or vl-convert. A page edited in place with its size and mtime
  restored still has a new ctime; a file written within the clock tick of the build's record (the
  fence, `_touch_fence`) could keep its ctime, so its bytes are read and must have the sha256 the
  build wrote.
- **Pages.** `PageMemo` keys each page by its source, every fixture and bundle file it resolved
  against (recorded while it rendered), the navigation (every page's title, URL, number, summary,
  trust), the figure numbers it shows or links to, `content/site.yaml`, registrations/ and
  reproductions/, the commit, and the generator's version (site_src/, safe_io/, bundle_kit/,
  templates/ and the versions of the libraries that draw the output). A page whose key and
  recorded inputs are unchanged is taken from the cache instead of being rendered. A study's
  bundle (its zip and its check's output) and a fixture's line view are reused on the same terms;
  the registration pages and the search index are made again, and the whole site is written to a
  fresh folder (unchanged files hard-linked to the previous build's) and swapped in as before.

File digests are memoized by (size, mtime, ctime, inode), as git's index does; a digest is reused
only for a file that was already more than two seconds old when it was hashed, so an edit inside
the file system's timestamp granularity is never missed.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path

FORMAT = 1
STATE = Path(".cache") / "incremental"
TRUST_AFTER_NS = 2_000_000_000
# the libraries whose version can change the bytes of the output
LIBRARIES = ("jinja2", "markupsafe", "markdown-it-py", "mdit-py-plugins", "latex2mathml", "pyyaml",
             "altair", "vl-convert-python", "pagefind", "pagefind-bin")
_FIG_LINK = re.compile(r"\[\[fig:([A-Za-z0-9][A-Za-z0-9_-]*)\]\]")
_PACKAGE_DIRS = ("site_src", "safe_io", "bundle_kit")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _json_sha(value) -> str:
    return _sha(json.dumps(value, sort_keys=True, separators=(",", ":"), default=str).encode())


class Digests:
    """sha256 of files, memoized by stat signature (see the module docstring)."""

    def __init__(self, old: dict):
        self.old = old
        self.new: dict[str, list] = {}
        self.hashed = 0   # files read and hashed (not reused) in this run

    def file(self, path: Path) -> str:
        """The sha256 of a file (or why it has none: missing, a link), memoized by stat signature."""
        key = str(path)
        if key in self.new:
            return self.new[key][1]
        try:
            info = os.lstat(path)
        except OSError:
            return "missing"
        # read from the one lstat: a link is never followed, and what is not a link is a file
        # exactly when its own mode says so
        if stat.S_ISLNK(info.st_mode):
            try:
                return "link:" + os.readlink(path)
            except OSError:
                return "missing"
        if not stat.S_ISREG(info.st_mode):
            return "not-a-file"
        sig = [info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino]
        prev = self.old.get(key)
        if (prev and prev[0] == sig and prev[2] - info.st_mtime_ns > TRUST_AFTER_NS
                and prev[2] - info.st_ctime_ns > TRUST_AFTER_NS):
            self.new[key] = prev
            return prev[1]
        now = time.time_ns()
        try:
            digest = _sha(Path(path).read_bytes())
        except OSError:
            return "unreadable"
        self.new[key] = [sig, digest, now]
        self.hashed += 1
        return digest


def _git(root: Path, *args: str) -> bytes:
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, timeout=60)
    if done.returncode != 0:
        raise OSError(done.stderr.decode("utf-8", "replace").strip())
    return done.stdout


class State:
    """The cache folder: state.json (digests, page entries, outputs) and content-addressed blobs."""

    def __init__(self, root: Path):
        self.folder = Path(root) / STATE
        self.path = self.folder / "state.json"
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if data.get("format") != FORMAT:
                data = {}
        except (OSError, ValueError):
            data = {}
        self.data = {"format": FORMAT, "digests": data.get("digests", {}), "pages": data.get("pages", {}),
                     "outputs": data.get("outputs", {}), "assets": data.get("assets", {}),
                     "bundles": data.get("bundles", {}), "figures": data.get("figures", {}),
                     "sources": data.get("sources", {}), "registrations": data.get("registrations", {})}
        self.digests = Digests(self.data["digests"])

    def blob(self, digest: str) -> bytes | None:
        """Stored bytes, or None when missing or damaged (then the page is rendered again)."""
        try:
            data = (self.folder / "blobs" / digest[:2] / digest).read_bytes()
        except OSError:
            return None
        return data if _sha(data) == digest else None

    def put_blob(self, data: bytes) -> str:
        """Store bytes under their digest; the digest."""
        digest = _sha(data)
        path = self.folder / "blobs" / digest[:2] / digest
        if not path.is_file():
            _write_atomic(path, data)
        return digest

    def referenced(self) -> set[str]:
        """The digests of every stored output an entry still refers to."""
        data = self.data
        found = {d for e in data["pages"].values() for d in e.get("files", {}).values()}
        found |= set(data["assets"].get("files", {}).values())
        found |= {e["zip"] for e in data["bundles"].values() if "zip" in e}
        found |= {e["blob"] for e in data["sources"].values()}
        found |= set(data["registrations"].get("files", {}).values())
        return found

    def collect_blobs(self) -> None:
        """Delete stored outputs no entry refers to any more (a page's older versions)."""
        keep = self.referenced()
        base = self.folder / "blobs"
        for sub in base.iterdir() if base.is_dir() else ():
            for blob in sub.iterdir():
                if blob.name not in keep and not blob.name.startswith("."):
                    try:
                        blob.unlink()
                    except OSError:
                        pass

    def save(self) -> None:
        """Write state.json, keeping the digests of the files seen in this run only."""
        self.data["digests"] = {**self.data["digests"], **self.digests.new}
        live = set(self.digests.new)
        self.data["digests"] = {k: v for k, v in self.data["digests"].items() if k in live}
        _write_atomic(self.path, json.dumps(self.data, sort_keys=True).encode())


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


# ---------------------------------------------------------------- the generator's version

def generator_version(digests: Digests, root: Path) -> str:
    """The running generator's code (site_src/, safe_io/, bundle_kit/ of *this* checkout), the
    site's templates/, the Python version and the libraries that shape the output."""
    here = Path(__file__).resolve().parents[1]
    parts = [sys.version, FORMAT]
    for name in _PACKAGE_DIRS:
        parts.extend((rel, digests.file(path)) for rel, path in _files_under(here, name)
                     if "__pycache__" not in rel.split("/") and not rel.endswith(".pyc"))
    parts.extend((rel, digests.file(path)) for rel, path in _files_under(Path(root), "templates"))
    from . import browser_check   # the runtime a study page's "Run the check here" publishes
    parts.append(("browser check", browser_check.fingerprint(root, digests.file)))
    parts.extend(library_versions(LIBRARIES))
    return _json_sha(parts)


def _files_under(base: Path, folder: str) -> list:
    """[(path relative to `base`, '/'-separated; full path)] of the files under base/folder
    (links to files included, as Path.is_file counts them; links to folders not entered), sorted
    part by part: what sorted(rglob('*')) gave, without a Path per file."""
    found, top = [], os.path.join(base, folder)
    prefix = os.path.join(base, "")
    for where, dirs, names in os.walk(top):
        for name in names:
            path = os.path.join(where, name)
            if os.path.isfile(path):
                found.append((path[len(prefix):].replace(os.sep, "/"), path))
    return sorted(found, key=lambda item: item[0].split("/"))


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def library_versions(names: tuple) -> list:
    """[(name, version or None)] of installed distributions, read from the name of each one's
    `.dist-info` folder on sys.path (the first found, as importlib.metadata finds it): importing
    importlib.metadata was a tenth of a no-op build. A name found no such way is asked of
    importlib.metadata."""
    wanted = {_normal(n): n for n in names}
    found: dict[str, str] = {}
    for entry in sys.path:
        try:
            listing = os.listdir(entry or ".")
        except OSError:
            continue
        for folder in listing:
            if folder.endswith(".dist-info") and "-" in folder:
                name, _, version = folder[: -len(".dist-info")].partition("-")
                found.setdefault(_normal(name), version)
    out = []
    for key, name in wanted.items():
        version = found.get(key)
        if version is None:
            from importlib import metadata
            try:
                version = metadata.version(name)
            except metadata.PackageNotFoundError:
                version = None
        out.append((name, version))
    return out


def _facts_key(root: Path) -> list:
    """HEAD and dirtiness, which every page's footer shows (site_src/reader/facts.py)."""
    from safe_io import git_state
    return list(git_state(root))


# ---------------------------------------------------------------- layer 1: the no-op build

def _tree_key(root: Path, out: Path, state: State) -> str | None:
    try:
        tracked = _git(root, "ls-files", "-z", "--cached").split(b"\0")
        others = _git(root, "ls-files", "-z", "--others", "--exclude-standard").split(b"\0")
    except OSError:
        return None
    names = sorted({n.decode("utf-8", "surrogateescape") for n in tracked + others if n})
    base = os.path.join(root, "")   # joined as strings: a Path per file was a fifth of a no-op
    files = [(n, state.digests.file(base + n)) for n in names]
    return _json_sha([FORMAT, str(out), generator_version(state.digests, root), _facts_key(root),
                      [n.decode("utf-8", "surrogateescape") for n in tracked if n], files])


def _output_signature(folder: Path) -> list:
    """Every entry under the build folder (the search index and the stamp included), with its
    size, mtime, ctime and inode: a file added, removed or written there makes the next build a
    real one. The ctime matters: an edit can restore the size and the mtime, never the ctime."""
    sig = []
    base = os.path.join(folder, "")
    for top, dirs, names in os.walk(folder):
        dirs.sort()
        # os.walk's `top` starts with `folder` as given: the relative path is the rest of it
        prefix = os.path.join(top, "")[len(base):]
        for name in sorted(names + [d for d in dirs if os.path.islink(os.path.join(top, d))]):
            info = os.lstat(os.path.join(top, name))
            sig.append([prefix + name, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino])
    return sig


def up_to_date(root: Path, out: Path) -> dict | None:
    """{output path: sources.CopiedFile} of the site already at `out` (each file named, not held
    in memory), when nothing it was built from changed since and every file still has the bytes
    the build wrote; else None (then build, and call `record` after a successful swap)."""
    root = Path(root).resolve()
    state = State(root)
    entry = state.data["outputs"].get(str(out))
    key = _tree_key(root, out, state)
    _LAST[str(out)] = (key, state)
    if not entry or key is None or entry.get("key") != key or not os.path.islink(out):
        return None
    live = Path(os.path.realpath(out))
    try:
        if str(live) != entry.get("folder") or _output_signature(live) != entry.get("signature"):
            return None
    except OSError:
        return None
    from .paths import OutputFolder
    folder = OutputFolder(out, root)
    try:
        with folder.locked():   # as a real build does: collect what killed builds left behind
            folder.collect()
            if Path(os.path.realpath(out)) != live:
                return None     # another build swapped in meanwhile
            recorded = entry.get("sha256", {})
            base = os.path.join(live, "")
            # read and hashed a block at a time: the whole site (its zips included) is never in memory
            if not all(recorded.get(rel) == _file_sha(base + rel) for rel in _not_fenced(entry)):
                return None     # a page changed in place: trust no output that is not what was written
            if state.digests.hashed:   # files hashed while too fresh to trust: keep their digests now
                _save_digests(root, state)
            from .sources import CopiedFile
            return {rel: CopiedFile(live / rel) for rel in entry["files"]}
    except OSError:
        return None


_LAST: dict = {}


def record(root: Path, out: Path, files: dict, written: dict | None = None) -> None:
    """After a successful swap: remember what `out` now holds and what it was built from.
    `written` holds the sha256 of files already known (WrittenDigests)."""
    try:
        _record(Path(root).resolve(), out, files, written or {})
    except (OSError, TypeError, ValueError) as exc:
        print(f"warning: the incremental cache was not saved ({type(exc).__name__}: {exc})", file=sys.stderr)


def _save_digests(root: Path, state: State) -> None:
    try:
        fresh = State(root)
        fresh.digests.new.update(state.digests.new)
        fresh.save()
    except (OSError, TypeError, ValueError):
        pass   # only speed is lost


_BLOCK = bytearray(1 << 20)


def _file_sha(path: Path) -> str:
    """The sha256 of a file's bytes, read into one reused buffer."""
    digest, view = hashlib.sha256(), memoryview(_BLOCK)
    with open(path, "rb", buffering=0) as handle:
        while count := handle.readinto(view):
            digest.update(view[:count])
    return digest.hexdigest()


def _written_sha(data, digests: Digests) -> str:
    """sha256 of an output file as written: its bytes, or for a copy of an input file the input's
    digest (already known, memoized by stat signature)."""
    return digests.file(data.path) if hasattr(data, "path") else _sha(data)


def _record(root: Path, out: Path, files: dict, written: dict) -> None:
    key, state = _LAST.pop(str(out), (None, None))
    if state is None:
        state = State(root)
        key = _tree_key(root, out, state)
    if key is None or not os.path.islink(out):
        return
    live = Path(os.path.realpath(out))
    names = sorted(files)
    fresh = State(root)   # a page memo may have saved since `state` was read
    fresh.digests.new.update(state.digests.new)
    fresh.data["outputs"] = {k: v for k, v in fresh.data["outputs"].items() if os.path.lexists(k)}
    _touch_fence(live)
    fresh.data["outputs"][str(out)] = {"key": key, "folder": str(live), "files": names,
                                       "sha256": {rel: written.get(rel) or _written_sha(files[rel], state.digests)
                                                  for rel in names},
                                       "signature": _output_signature(live)}
    fresh.save()


def known_outputs(root: Path, out: Path) -> dict[str, str]:
    """{path: sha256} of the files of the site now at `out` whose bytes are known without reading
    them: recorded by the build that wrote them, their stat signature still the recorded one, and
    older than that record's fence. Asked before the next build links anything to them (a link
    moves an inode's ctime)."""
    found = _LAST.get(str(out))
    state = found[1] if found else State(Path(root).resolve())
    entry = state.data["outputs"].get(str(out))
    if not entry or not os.path.islink(out) or os.path.realpath(out) != entry.get("folder"):
        return {}
    from .paths import STAMP
    recorded = {row[0]: row[1:] for row in entry.get("signature", [])}   # size, mtime, ctime, inode
    fence = recorded.get(STAMP, [None, None, None])[2]
    if fence is None:
        return {}
    known, base = {}, os.path.join(entry["folder"], "")
    for rel, digest in entry.get("sha256", {}).items():
        sig = recorded.get(rel)
        if sig is None or sig[2] >= fence:
            continue
        try:
            info = os.lstat(base + rel)
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode) and [info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino] == sig:
            known[rel] = digest
    return known


class WrittenDigests(dict):
    """{output path: sha256 of the bytes written there}, each computed once per build: by the write
    stage to link a file known unchanged (known_outputs), then by `record`. A copy of an input file
    takes the input's memoized digest, a bundle's zip the bundle's sha256 (`known`)."""

    def __init__(self, files: dict, digests: Digests, known: dict | None = None):
        super().__init__({rel: d for rel, d in (known or {}).items() if rel in files})
        self.files, self.digests = files, digests

    def __missing__(self, rel: str) -> str:
        self[rel] = digest = _written_sha(self.files[rel], self.digests)
        return digest

    def complete(self) -> None:
        """Compute every file's digest now (the build waits for Pagefind meanwhile)."""
        for rel in self.files:
            self[rel]


# The fence: the build folder's stamp, touched when the build is recorded, so that its ctime is the
# file system's clock at that moment (read in that file system's own granularity). A file whose
# recorded ctime is older than the fence cannot be written again without its ctime moving past the
# recorded one, which the signature compares; a file written in the fence's own clock tick could,
# so its bytes are read and hashed. This is git's rule for racily clean index entries, and it
# spares a no-op build reading the whole site (a hundred megabytes, its zips) each time.
def _touch_fence(live: Path) -> None:
    from .paths import STAMP
    os.utime(live / STAMP)


def _not_fenced(entry: dict) -> list[str]:
    """The recorded output files whose bytes must be read: every one not older than the fence
    (all of them when the record has no fence)."""
    from .paths import STAMP
    ctimes = {row[0]: row[3] for row in entry.get("signature", [])}
    fence = ctimes.get(STAMP)
    if fence is None:
        return list(entry["files"])
    return [rel for rel in entry["files"] if ctimes.get(rel, fence) >= fence]


# ---------------------------------------------------------------- layer 2: pages

class PageMemo:
    """Per-page cache inside one build (see the module docstring), owned by site.py. The stages
    see one hook of it, `reuse(what, subject, make)`, and never know whether what they got was
    made now or stored by the last build. `enabled=False` makes everything anew and stores
    nothing: a clean build."""

    def __init__(self, root: Path, files, errors=None, config_rel: str = "content/site.yaml", enabled: bool = True):
        self.enabled = enabled
        self.root = Path(root).resolve()
        self.files = files
        self.errors = errors if errors is not None else []   # a result made while errors were added is not kept
        self.rendered: list[str] = []
        self.reused: list[str] = []
        if not enabled:
            return
        self.state = State(self.root)
        digests = self.state.digests
        # site.yaml, the glossary (every page's term links and warnings) and the honesty records
        listing = sorted(n for n in files.tracked | files.untracked
                         if n in (config_rel, "content/glossary.yaml") or n.startswith(("registrations/", "reproductions/")))
        self.context = _json_sha([generator_version(digests, self.root), _facts_key(self.root),
                                  [(n, n in files.tracked, digests.file(self.root / n)) for n in listing]])
        self.nav = ""
        self.figures: dict = {}
        self.pending: dict[str, dict] = {}
        self.kept: dict[str, dict] = {}          # page rel -> its files, replayed
        self.kept_paths: set[str] = set()        # their pages' output paths
        self.new_bundles: dict[str, tuple] = {}
        self.pages_seen: list = []
        self.new_figures: dict[str, dict] = {}
        self.cached_bundles: set[str] = set()
        self.sources_seen: dict[str, dict] = {}
        self.new_sources: dict[str, tuple] = {}

    def reuse(self, what: str, subject, make):
        """The one hook the stages get (stages/model.py `Reuse`): `make()`'s result for `subject`,
        or the one the last build made when nothing it was made from changed.

        what            subject              make() gives
        "figures"       a page               its figure blocks' (id, line), in order (stage number)
        "page"          a page               its PageOutput (stage render)
        "page files"    a PageOutput         the page's published files (stage publish)
        "bundle"        (study, members)     its bundles.Bundle (stage bundle)
        "source view"   a fixture's path     its line-numbered view page (stage publish)
        "figure assets" None                 the figure runtime's files (stage publish)
        "registration pages" their inputs    the registration pages' files (stage publish)
        """
        if not self.enabled:
            return make()
        kinds = {"figures": self._places, "page": self._page, "page files": self._page_files,
                 "bundle": self._bundle, "source view": self._source_view, "figure assets": self._figure_assets,
                 "registration pages": self._registration_pages}
        return kinds[what](subject, make)

    def _places(self, page, make) -> list:
        """A page's figure places, kept while the page's source and the generator are unchanged
        (only when parsing the page found no problem)."""
        key = _json_sha([self.context, page.repo_rel, self._dep(page.repo_rel), page.meta.get("raw_html") is True])
        entry = self.state.data["figures"].get(page.repo_rel)
        if entry and entry.get("key") == key and "places" in entry:
            return [tuple(place) for place in entry["places"]]
        before = len(self.errors)
        places = make()
        if len(self.errors) == before:
            self.new_figures[page.repo_rel] = {"key": key, "places": [list(p) for p in places]}
        return places

    def set_site(self, pages: dict, order: list, figures: dict) -> None:
        """The navigation and numbering every page shows: called once the figures are numbered."""
        if not self.enabled:
            return
        self.nav = _json_sha([[n, pages[n].url, pages[n].number, pages[n].is_study,
                               *(pages[n].meta.get(k) for k in ("title", "nav_title", "summary", "trust"))]
                              for n in order])
        self.figures = figures

    def _key(self, page) -> str:
        own = sorted((i.id, i.number, i.line) for i in self.figures.values() if i.page is page)
        links = sorted({m for m in _FIG_LINK.findall(page.body)})
        shown = [(f, self.figures[f].page.url, self.figures[f].number, self.figures[f].page is page)
                 if f in self.figures else (f, None) for f in links]
        return _json_sha([self.context, self.nav, page.repo_rel, self._dep(page.repo_rel), own, shown])

    def _dep(self, rel: str) -> str:
        why = self.files.refusal(rel)
        return f"refused: {why}" if why else self.state.digests.file(self.root / rel)

    def _listing(self, folder: str) -> str:
        return _json_sha(self.files.listed(folder)[0])

    def _page(self, page, make):
        """A page replayed as its PageOutput (its files kept for "page files"), when its key and
        every file it resolved against are unchanged; else `make()` renders it."""
        self.pages_seen.append(page)
        files = self._replayable(page)
        if files is None:
            return make()
        from .stages.model import PageOutput
        entry = self.state.data["pages"][page.repo_rel]
        self.kept[page.rel] = files
        self.kept_paths.add(page.out_path)
        self.reused.append(page.rel)
        return PageOutput(page, None, used=dict(entry["used"]), figure_count=entry["figure_count"])

    def _replayable(self, page) -> dict | None:
        entry = self.state.data["pages"].get(page.repo_rel)
        if not entry or entry.get("key") != self._key(page):
            return None
        for dep, digest in entry["deps"].items():
            now = self._listing(dep[len("listing:"):]) if dep.startswith("listing:") else self._dep(dep)
            if now != digest:
                return None
        blobs = {}
        for rel, digest in entry["files"].items():
            data = self.state.blob(digest)
            if data is None:
                return None
            blobs[rel] = data
        return blobs

    def _page_files(self, output, make) -> dict:
        """A replayed page's files; else `make()`'s, remembered (kept only if the whole build
        succeeds, `commit`)."""
        page = output.page
        if page.rel in self.kept:
            return self.kept[page.rel]
        produced = make()
        self.rendered.append(page.rel)
        deps = {rel: self._dep(rel) for rel in sorted(output.used)}
        bundle = output.bundle.name if output.bundle is not None else None
        if bundle:
            deps[f"listing:bundles/{bundle}"] = self._listing(f"bundles/{bundle}")
            for rel in self.files.listed(f"bundles/{bundle}")[0]:
                deps[rel] = self._dep(rel)
        self.pending[page.repo_rel] = {"key": self._key(page), "deps": deps, "used": dict(output.used),
                                       "figure_count": output.figure_count, "produced": produced}
        return produced

    def _bundle(self, subject: tuple, make):
        """A study's Bundle (site_src/bundles.py: its zip, file digests and the reproduction kit's
        output), reused while its files, the commit and the generator are unchanged."""
        name, members = subject
        key = _json_sha([self.context, name, [(m, self._dep(f"bundles/{name}/{m}")) for m in members]])
        entry = self.state.data["bundles"].get(name)
        if entry and entry.get("key") == key:
            zip_bytes = self.state.blob(entry["zip"])
            if zip_bytes is not None:
                from .bundles import Bundle, BundleFile
                fields = dict(entry["fields"], files=tuple(BundleFile(*f) for f in entry["fields"]["files"]))
                self.cached_bundles.add(name)
                return Bundle(zip_bytes=zip_bytes, **fields)
        made = make()
        if dataclasses.is_dataclass(made):   # stand-ins in tests are not cached
            self.new_bundles[name] = (key, made)
        return made

    def verified_before(self, out_path: str, bundle) -> bool:
        """A reused page showing a reused bundle: the same bytes were checked when both were stored."""
        return self.enabled and out_path in self.kept_paths and bundle.name in self.cached_bundles

    def _source_view(self, rel: str, make) -> bytes:
        """A fixture's line-numbered view page (`make()`), reused while the fixture, the navigation,
        the commit and the generator are unchanged: every build publishes them all."""
        key = _json_sha([self.context, self.nav, rel, self._dep(rel)])
        entry = self.state.data["sources"].get(rel)
        if entry and entry.get("key") == key:
            data = self.state.blob(entry["blob"])
            if data is not None:
                self.sources_seen[rel] = entry
                return data
        data = make()
        self.new_sources[rel] = (key, data)
        return data

    def has_figure_assets(self) -> bool:
        """Whether `figure_assets` will come from the cache (so nothing needs to start making them)."""
        return self.enabled and self.state.data["assets"].get("key") == self.context

    def _figure_assets(self, _subject, make) -> dict:
        """The figure runtime files: the same for one generator version, so cached by it."""
        entry = self.state.data["assets"]
        if entry.get("key") == self.context:
            blobs = {rel: self.state.blob(d) for rel, d in entry["files"].items()}
            if all(v is not None for v in blobs.values()):
                return blobs
        self._assets = make()
        return self._assets

    def _registration_pages(self, inputs: str, make) -> dict:
        """The registration pages and their index, reused while what they are rendered from is
        unchanged: `inputs` (honesty's pages_inputs: every verified registration in full, the study
        URLs), the navigation, and the context (the commit, site.yaml, registrations/ and
        reproductions/, the generator and its templates)."""
        key = _json_sha([self.context, self.nav, inputs])
        entry = self.state.data["registrations"]
        if entry.get("key") == key:
            blobs = {rel: self.state.blob(d) for rel, d in entry["files"].items()}
            if all(v is not None for v in blobs.values()):
                return blobs
        made = make()
        self._registrations = (key, made)
        return made

    def previous_outputs(self, out: Path, files: dict, digests: dict) -> tuple[dict, dict]:
        """(known_outputs of the site at `out`, WrittenDigests of `files` with the `digests`
        already known): what the write stage needs to link an unchanged file without reading it.
        Nothing known for a clean build."""
        if not self.enabled:
            return {}, None
        return known_outputs(self.root, out), WrittenDigests(files, self.state.digests, digests)

    def commit(self) -> None:
        """The build succeeded: save the rendered pages' entries (and the figure assets). A cache
        that cannot be written costs the next build its speed, never this build its success."""
        if not self.enabled:
            return
        try:
            self._commit()
        except (OSError, TypeError, ValueError) as exc:
            print(f"warning: the incremental cache was not saved ({type(exc).__name__}: {exc}); "
                  "the next build renders every page", file=sys.stderr)

    def _commit(self) -> None:
        pages = self.state.data["pages"]
        for rel, entry in self.pending.items():
            produced = entry.pop("produced")
            entry["files"] = {name: self.state.put_blob(data) for name, data in sorted(produced.items())}
            pages[rel] = entry
        for name, (key, made) in self.new_bundles.items():
            fields = {f.name: getattr(made, f.name) for f in dataclasses.fields(made) if f.name != "zip_bytes"}
            fields["files"] = [list(dataclasses.astuple(f)) for f in made.files]
            self.state.data["bundles"][name] = {"key": key, "zip": self.state.put_blob(made.zip_bytes),
                                                "fields": fields}
        self.state.data["sources"] = {**self.sources_seen, **{rel: {"key": key, "blob": self.state.put_blob(data)}
                                                              for rel, (key, data) in self.new_sources.items()}}
        if getattr(self, "_registrations", None) is not None:
            key, made = self._registrations
            self.state.data["registrations"] = {"key": key, "files": {n: self.state.put_blob(d) for n, d in made.items()}}
        if getattr(self, "_assets", None) is not None:
            self.state.data["assets"] = {"key": self.context,
                                         "files": {n: self.state.put_blob(d) for n, d in self._assets.items()}}
        live_pages = {p.repo_rel for p in self.pages_seen}
        self.state.data["pages"] = {rel: e for rel, e in pages.items() if rel in live_pages}
        numbered = {**self.state.data["figures"], **self.new_figures}
        self.state.data["figures"] = {rel: e for rel, e in numbered.items() if rel in live_pages}
        self.state.save()
        self.state.collect_blobs()

    def summary(self) -> str:
        """How many pages this build rendered and reused, for the build's note."""
        return f"{len(self.rendered)} rendered, {len(self.reused)} reused"
