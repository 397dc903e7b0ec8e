"""What a command checks before it loads anything: that the folders it will write can be made
and written, and that the dimensions it is asked for are in its pairs file, where that file is
known without loading the model. A model loads in seconds to minutes; a folder on a read-only
or full disk, or a misspelt dimension, is refused in one line before that, not after it
(issue 28).
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from bundle_kit import contract

from measure.errors import MeasureError

PROBE_BYTES = 4096  # written and removed: a full disk refuses a file this size


def check_writable(folder: Path, option: str, beside: bool = False) -> None:
    """Refuse (one line naming `option`) unless files can be written where `folder` will be
    made: in `folder` itself if it exists, else in its nearest existing parent (which the
    command will create it in); `beside`: the folder is built next to itself and swapped in
    (a bundle), so its parent is what must be writable. A probe file is written there and
    removed, with the temporary folder that held it."""
    folder = Path(os.path.abspath(Path(folder).expanduser()))
    base = folder.parent if beside else folder
    while not base.exists() and base != base.parent:
        base = base.parent
    if not base.is_dir():
        raise MeasureError(f"{option} {folder}: cannot be made ({base} is a file)")
    try:
        probe = tempfile.mkdtemp(dir=base, prefix=".measure-probe-")
    except OSError as exc:
        raise MeasureError(f"{option} {folder}: cannot be written ({exc.strerror or exc} in {base})") from None
    try:
        with open(os.path.join(probe, "probe"), "wb") as handle:
            handle.write(b"\0" * PROBE_BYTES)
    except OSError as exc:
        raise MeasureError(f"{option} {folder}: cannot be written ({exc.strerror or exc} in {base})") from None
    finally:
        shutil.rmtree(probe, ignore_errors=True)


def check_run(config) -> None:
    """A study's checks before it loads the model (`plan_study` calls it first): the bundle
    folder and the runs folder can be written, and every `--dimensions` name is in the pairs
    file, when the pairs file is known without loading the model."""
    check_writable(config.bundle_dir, "--out", beside=True)
    check_writable(config.runs_root, "--runs-dir")
    if config.dimensions:
        pairs_file = known_pairs_file(config)
        if pairs_file is not None:
            from measure.runner.pairs import read_pairs, restrict

            restrict(read_pairs(pairs_file), config.dimensions, None, config.pairs_file or pairs_file)


def known_pairs_file(config) -> Path | None:
    """The pairs file `plan_study` will read, found the way it finds it (`--pairs`, else the
    model folder's `pairs.jsonl`, else the study's default) without loading the model; None
    when the model folder cannot be found without loading (the plan then checks it)."""
    if config.pairs_file is not None:
        return Path(config.pairs_file)
    from measure.models.adapter import resolve_model_path
    from measure.runner.definition import definition_for

    try:
        folder, _ = resolve_model_path(config.model)
    except MeasureError:
        return None  # the model's own refusal comes from loading it, with its own words
    own = folder / contract.PAIRS
    return own if own.is_file() else Path(definition_for(config.study).pairs_file)
