"""The one rule for every folder the measurement stage replaces: it is new (or empty), or it is
a bundle this tool wrote, recognised by its stamp, the `manifest.json` every run writes. Anything
else (a repository, a home folder, another tool's output) is refused before any measurement, in
one line: replacing a folder swaps it whole, and what the old one held would be gone.
"""
from __future__ import annotations

from pathlib import Path

from bundle_kit import contract

from measure.errors import MeasureError
from measure.runner.jsonio import read_json

# Fields every bundle manifest this stage has written holds (the runner's, the planted and the
# MiniLM drivers'); a folder whose manifest.json has them all is one of ours.
STAMP = ("study", "model", "data_sha256", "packages", "git", "command")
STAMP_LIMIT = 4 << 20  # bytes a manifest may have


def is_stamped(folder: Path) -> bool:
    """Whether `folder` holds a manifest.json that this stage wrote (a JSON object with `STAMP`)."""
    manifest = Path(folder) / contract.MANIFEST
    if not manifest.is_file() or manifest.is_symlink():
        return False
    try:
        data = read_json(manifest, "bundle manifest", STAMP_LIMIT)
    except MeasureError:
        return False
    return isinstance(data, dict) and all(key in data for key in STAMP)


def check_replaceable(out: Path, option: str = "--out") -> Path:
    """`out` as an absolute path, if the stage may write it: a new or empty folder, or a bundle
    it stamped; otherwise a one-line refusal naming the option."""
    out = Path(out).expanduser()
    if out.is_symlink():
        raise MeasureError(f"{option} {out}: is a symbolic link; name the folder itself")
    out = out.resolve()
    if not out.exists():
        return out
    if not out.is_dir():
        raise MeasureError(f"{option} {out}: is a file, not a folder")
    if any(out.iterdir()) and not is_stamped(out):
        raise MeasureError(f"{option} {out}: not empty and not a bundle this tool wrote (no manifest.json "
                           f"of ours); it would be replaced whole: name a new folder")
    return out
