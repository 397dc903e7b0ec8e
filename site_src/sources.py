"""Publishing fixtures: each raw under public/source/<path>, and a line-numbered view page
(public/source/<path>.html, with #L9 anchors) for JSON, YAML, Markdown and text fixtures, and for
any JSONL file a reference points at by line."""
from __future__ import annotations

import hashlib
from pathlib import Path

from .errors import BuildError
from .paths import InputRefused
from .resolve import VIEWABLE

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
    wanted = {rel: False for rel in bundle_files(files, errors)}
    for rel, view in used.items():
        if not rel.startswith("../"):
            wanted[rel] = wanted.get(rel, False) or view
    out = {}
    for rel in sorted(wanted):
        try:
            data = files.read_bytes(rel)
        except (InputRefused, OSError) as exc:
            errors.add(BuildError(f"cannot publish: {exc}", rel))
            continue
        out[f"source/{rel}"] = data
        if wanted[rel] or Path(rel).suffix.lower() in VIEWABLE:
            out[f"source/{rel}.html"] = render_view(rel, data)
    return out


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
