"""A study's configuration (one dataclass) and the callbacks a caller may pass to watch a run."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from measure.errors import MeasureError
from measure.options import STUDY_NAME

REPO = Path(__file__).resolve().parents[2]
ORGANISM_DIR = REPO / "models" / "organism"


@dataclass(frozen=True)
class StudyConfig:
    """Everything that defines one study run; `python -m measure run` builds one from its
    options (each field's option is named beside it)."""
    model: str = "organism"                 # --model: a named model, a folder or a cached hub id
    study: str = "organism"                 # --study: the bundle's name
    out: Path | None = None                 # --out: the bundle folder (default bundles/<study>)
    device: str = "cpu"                     # --device
    dtype: str = "float32"                  # --dtype
    dimensions: tuple[str, ...] | None = None  # --dimensions: a subset, in the pairs file's order
    max_pairs: int | None = None            # --max-pairs: at most this many pairs per dimension
    pairs_file: Path | None = None          # --pairs (default: the model folder's, else the organism's)
    key_file: Path | None = None            # --key (default: the model folder's key.json, if any)
    objective: int = 0                      # --objective: the score head's row
    shard_size: int = 8                     # --shard-size: pairs per resumable shard
    max_rows: int = 512                     # --max-rows: sequences per patched batch
    patch_heads: bool = True                # not --no-head-patching
    threads: int = 1                        # --threads: torch CPU threads
    seed: int = 0                           # --seed
    runs_dir: Path | None = None            # --runs-dir: resumable shards (default measure_runs/)
    progress: bool = True                   # not --no-progress

    def __post_init__(self):
        if not isinstance(self.study, str) or not STUDY_NAME.fullmatch(self.study):
            raise MeasureError(f"--study {self.study!r}: a study name is up to 64 lower-case letters, digits, "
                               f"'-' and '_', starting with a letter or digit")
        for option, value in (("--shard-size", self.shard_size), ("--max-rows", self.max_rows),
                              ("--threads", self.threads), ("--max-pairs", self.max_pairs)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise MeasureError(f"{option} {value}: must be a whole number of at least 1")
        if self.objective < 0:
            raise MeasureError(f"--objective {self.objective}: must be 0 or more")
        if self.dimensions is not None and not self.dimensions:
            raise MeasureError("--dimensions: names no dimension")

    @property
    def bundle_dir(self) -> Path:
        """The bundle folder, absolute (`--out`, or `bundles/<study>`)."""
        return Path(os.path.abspath(Path(self.out).expanduser())) if self.out else REPO / "bundles" / self.study

    @property
    def runs_root(self) -> Path:
        """Where resumable shards go (`--runs-dir`, or `measure_runs/`)."""
        return Path(self.runs_dir) if self.runs_dir else REPO / "measure_runs"


@dataclass
class Hooks:
    """Callbacks into a running study, for whoever drives it (a progress display, a scheduler,
    a test that stops or kills the run at a chosen point). Each is called after the step it
    names has completed; an exception it raises ends the run there, as a kill would."""
    shard_done: Callable[[int, int], None] = field(default=lambda done, total: None)
    """(shards measured by this run so far, shards still to measure when it started)"""
    file_staged: Callable[[str], None] = field(default=lambda name: None)
    """(name of a bundle file just written into the staging folder, before the swap)"""
