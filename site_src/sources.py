"""Publishing fixtures: each raw under public/source/<path>, and a line-numbered view page
(public/source/<path>.html, with #L9 anchors) for JSON, YAML, Markdown and text fixtures, and for
any JSONL file a reference points at by line."""
from __future__ import annotations

import hashlib
from pathlib import Path

from .resolve import VIEWABLE

SKIP_PARTS = ("__pycache__",)


def bundle_files(root: Path) -> list[str]:
    """Every file of every bundles/<study>/ folder, repository-relative, sorted."""
    base = root / "bundles"
    if not base.is_dir():
        return []
    out = []
    for path in sorted(base.rglob("*")):
        rel = path.relative_to(root)
        if path.is_file() and not any(p.startswith(".") or p in SKIP_PARTS for p in rel.parts) \
                and path.suffix != ".pyc":
            out.append(rel.as_posix())
    return out


def publish(root: Path, used: dict[str, bool], render_view) -> dict[str, bytes]:
    """{path under public/: bytes} for the raw fixtures and their line views.

    `used` maps repository-relative paths to whether a line view is needed; `render_view(rel,
    data)` renders one view page.
    """
    wanted = {rel: False for rel in bundle_files(root)}
    for rel, view in used.items():
        if not rel.startswith("../"):
            wanted[rel] = wanted.get(rel, False) or view
    files = {}
    for rel in sorted(wanted):
        data = (root / rel).read_bytes()
        files[f"source/{rel}"] = data
        if wanted[rel] or Path(rel).suffix.lower() in VIEWABLE:
            files[f"source/{rel}.html"] = render_view(rel, data)
    return files


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
