"""Publishing fixtures: each raw under public/source/<path>, and a line-numbered view page
(public/source/<path>.html, with #L9 anchors) for JSON, YAML, Markdown and text fixtures, and for
any JSONL file a reference points at by line."""
from __future__ import annotations

import hashlib
from pathlib import Path

from .errors import BuildError
from .paths import InputRefused
from .urls import source_path, source_view_path

SKIP_PARTS = ("__pycache__",)


def bundle_files(files, errors) -> list[str]:
    """Every file of every bundles/<study>/ folder that the path policy allows, repository-relative,
    sorted; a file there that it refuses (untracked, a symbolic link) is an error."""
    good, bad = files.listed("bundles")
    for rel, why in bad:
        if not _skipped(rel):
            errors.add(BuildError(f"bundle file {why}", rel))
    return [rel for rel in good if not _skipped(rel)]


def _skipped(rel: str) -> bool:
    parts = rel.split("/")
    return any(p.startswith(".") or p in SKIP_PARTS for p in parts) or rel.endswith(".pyc")


def publish(files, used: dict[str, bool], render_view, errors) -> dict[str, bytes]:
    """{path under public/: bytes} for the raw fixtures and their line views.

    `used` maps repository-relative paths to whether a line view is needed; `render_view(rel,
    data)` renders one view page. Every file is read through the path policy `files`.
    """
    # imported here, not at the top: the no-op check imports this module (for CopiedFile) and
    # should not pay for the parsers
    from .parse import MAX_BYTES
    from .resolve import VIEWABLE

    wanted = {rel: False for rel in bundle_files(files, errors)}
    for rel, view in used.items():
        if not rel.startswith("../"):
            wanted[rel] = wanted.get(rel, False) or view
    out = {}
    for rel in sorted(wanted):
        try:
            path = files.path(rel)
            size = path.stat().st_size
        except (InputRefused, OSError) as exc:
            errors.add(BuildError(f"cannot publish: {exc}", rel))
            continue
        out[source_path(rel)] = CopiedFile(path)   # copied when written, never held in memory
        if wanted[rel] or Path(rel).suffix.lower() in VIEWABLE:
            if size > MAX_BYTES:
                errors.add(BuildError(f"is {size / 1e6:.1f} MB: a line-numbered view is made for files up to"
                                      f" {MAX_BYTES // 2**20} MiB; cite it with aggregate stages instead", rel))
                continue
            out[source_view_path(rel)] = render_view(rel, path.read_bytes())
    return out


class CopiedFile:
    """An output file that is a copy of an input file: written by copying, compared by content."""

    def __init__(self, path: Path):
        self.path = path

    def read_bytes(self) -> bytes:
        """The file's bytes."""
        return self.path.read_bytes()

    def __eq__(self, other) -> bool:
        return isinstance(other, CopiedFile) and other.path == self.path


def sha256(data: bytes) -> str:
    """The sha256 of bytes, as hex."""
    return hashlib.sha256(data).hexdigest()
