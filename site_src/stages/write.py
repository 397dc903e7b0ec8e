"""Stage 6, write and swap: the file map is written into a fresh stamped build folder, the
published bundle hashes are checked against the written files, the search index is made, and
only then is the output path pointed at the new folder by one rename (site_src/paths.py)."""
from __future__ import annotations

import io
import os
import shutil
import tempfile
from pathlib import Path

from typing import Callable

from .. import bundles, reader
from ..errors import BuildError, internal_error
from ..paths import OutputFolder, OutputRefused
from ..sources import CopiedFile
from .model import BuildResult


def write_tree(files: dict, target: Path, names=None, previous: Path | None = None,
               known: dict | None = None, written: dict | None = None) -> None:
    """Write `files` (or the `names` among them) under `target`. A file whose bytes equal the same
    file of the `previous` build folder is hard-linked to it instead: most of a rebuild's output
    (the bundles' zips, the fixtures' copies) is unchanged, and writing it again was most of the
    time an edit waited for. A previous file whose sha256 is `known` (incremental.known_outputs)
    is compared by that with `written[rel]`, the new bytes' sha256, and not read."""
    known = known or {}
    # the previous build's regular files, reached without following a link: a link planted in
    # the old build is never followed out of it (one walk, not a realpath per file)
    kept = _regular_files(Path(os.path.realpath(previous))) if previous is not None else set()
    made: set = set()
    # paths joined as strings: a Path per file was a quarter of the writing
    base, old_base = os.path.join(target, ""), os.path.join(previous, "") if previous is not None else ""
    for rel in sorted(files) if names is None else names:
        path = base + rel
        parent = os.path.dirname(path)
        if parent not in made:
            os.makedirs(parent, exist_ok=True)
            made.add(parent)
        data = files[rel]
        if rel in kept and (known[rel] == written[rel] if rel in known else _same_as(old_base + rel, data)):
            try:
                os.link(old_base + rel, path)
                continue
            except OSError:
                pass   # a file system without hard links: write it
        if isinstance(data, CopiedFile):
            shutil.copyfile(data.path, path)
        else:
            with open(path, "wb") as handle:
                handle.write(data)


def _regular_files(folder: Path) -> set:
    """Paths (relative, '/'-separated) of the regular files under `folder`, not through a link."""
    found, pending = set(), [("", str(folder))]
    while pending:
        prefix, where = pending.pop()
        try:
            entries = list(os.scandir(where))
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                pending.append((f"{prefix}{entry.name}/", entry.path))
            elif entry.is_file(follow_symlinks=False):
                found.add(prefix + entry.name)
    return found


_BLOCK = 1 << 20


def _same_as(old: str, data) -> bool:
    """Whether the file `old` holds `data` (bytes, or the bytes of a CopiedFile), compared a
    block at a time: a build's zips and fixture copies are never held whole a second time."""
    try:
        size = os.stat(data.path).st_size if isinstance(data, CopiedFile) else len(data)
        if os.stat(old).st_size != size:
            return False
        with open(old, "rb") as mine, (open(data.path, "rb") if isinstance(data, CopiedFile) else io.BytesIO(data)) as theirs:
            while True:
                block = mine.read(_BLOCK)
                if block != theirs.read(_BLOCK):
                    return False
                if not block:
                    return True
    except OSError:
        return False


def _verify_bundles(target: Path, result: BuildResult) -> None:
    """Check every sha256 a page prints against the file written (the check is site_src.bundles')."""
    for out_path, bundle in result.bundle_pages:
        try:
            bundles.verify_published(target, result.files[out_path].decode(), bundle, out_path)
        except Exception as exc:  # PublishError, or a page that cannot be read back
            result.errors.add(BuildError(f"published bundle check failed: {exc}", out_path))


def _write_checked(result: BuildResult, target: Path, previous: Path | None = None,
                   known: dict | None = None, written: dict | None = None) -> None:
    """Write and check the site while Pagefind indexes its pages (site_src/reader/search.py: started
    on the pages as publish made them, `result.search`), then wait for the index: all before the
    swap."""
    indexing, result.search = result.search, None
    if indexing is None and result.ok:   # site.collect starts it, or says why it could not
        result.errors.add(BuildError("search: the index was not started with the build"))
    try:
        write_tree(result.files, target, None, previous, known, written)
        _verify_bundles(target, result)
        if written is not None and indexing is not None:   # for the record, while Pagefind finishes
            written.complete()
    except BaseException:
        if indexing is not None:
            indexing.abandon()
        raise
    if indexing is not None:
        try:
            indexing.finish(target)
        except reader.SearchError as exc:
            result.errors.add(BuildError(str(exc)))


def check_in_temporary(result: BuildResult) -> BuildResult:
    """The `check` command: write, verify and index in a temporary folder, then remove it."""
    with tempfile.TemporaryDirectory(prefix="site-check-") as tmp:
        try:
            _write_checked(result, Path(tmp))
        except OSError as exc:
            result.errors.add(BuildError(f"cannot write the site to a temporary folder: {_os_reason(exc)}"))
    return result


def write_and_swap(result: BuildResult, folder: OutputFolder,
                   swapped_in: Callable[[dict], None] | None = None,
                   previous_outputs: Callable[[], tuple[dict, dict | None]] | None = None) -> BuildResult:
    """Write into a new build folder and swap it in; on any failure the old site stays.
    `previous_outputs()`, asked under the output folder's lock before anything is linked, gives
    (the sha256 of the live site's files known unchanged, the sha256 of the new files as they are
    computed): see write_tree. `swapped_in(written)` is called right after the swap, still holding
    the lock (site.py saves its page cache and input record there)."""
    try:
        folder.out.parent.mkdir(parents=True, exist_ok=True)
        with folder.locked():
            staging = folder.new_build()
            swapped = False
            try:
                known, written = previous_outputs() if previous_outputs is not None else ({}, None)
                _write_checked(result, staging, folder.live(), known, written)
                if result.ok:
                    folder.swap(staging)
                    swapped = True
                    if swapped_in is not None:
                        swapped_in(written or {})
            finally:
                if not swapped:
                    folder.discard(staging)
    except OutputRefused as exc:
        result.errors.add(BuildError(str(exc), "--out"))
    except OSError as exc:
        result.errors.add(BuildError(f"cannot write the site to {folder.out}: {_os_reason(exc)}"))
    except Exception as exc:  # a bug while writing: one line, and the old site stays
        result.errors.add(internal_error(exc, "write"))
    finally:
        if result.search is not None:   # the folder could not be locked or made: no index is wanted
            result.search.abandon()
            result.search = None
    return result


def _os_reason(exc: OSError) -> str:
    where = f" ({exc.filename})" if exc.filename else ""
    return f"{exc.strerror or exc}{where}"
