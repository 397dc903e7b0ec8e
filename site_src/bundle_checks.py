"""A bundle's check (`python -I reproduce.py` in the unzipped zip): its output kept by the zip's
sha256, and the time it is given.

**Kept.** The check's stdout is a function of the zip's bytes (the study's files and the kit files
copied into it) and of the interpreter that runs it, so it is kept in `.cache/bundles/`, one file
per (zip sha256, interpreter), as the figure cache keeps drawings by their spec: a build whose zip
is unchanged (a clean build, a new commit that did not touch the study) does not run it again. A
failed check is never kept. Deleting `.cache/` is always safe.

**Time limit.** A fixed limit failed builds on a loaded two-core machine, so the limit scales with
the check and the machine:

- with a measured run of this study's check on this machine (kept beside the outputs, the last
  successful one): MULTIPLE times that run, at least FLOOR_S;
- before any: FLOOR_S plus PER_MB_S for each MB of the zip (the check reads every row);
- either one times the machine's load per core when it is above 1 (`os.getloadavg`).

`SITE_CHECK_TIMEOUT_S` in the environment sets the limit outright. A check that runs past it is
one error line saying how the limit was set and what to do.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from safe_io import write_atomic

FOLDER = Path(".cache") / "bundles"
FLOOR_S = 120.0          # the least any check is given
MULTIPLE = 10.0          # times its last measured run here
PER_MB_S = 10.0          # before a first measurement: seconds for each MB of the zip, over FLOOR_S
ENV = "SITE_CHECK_TIMEOUT_S"


@dataclass(frozen=True)
class Limit:
    """The seconds a check is given, and how that was decided (for the error when it runs past)."""

    seconds: float
    why: str

    def message(self, name: str) -> str:
        """The one-line error of a check that ran past this limit."""
        if self.why.startswith(ENV):
            return (f"bundle {name}: reproduce.py ran past {self.seconds:g} s ({self.why}): raise it, or "
                    f"unset {ENV} to let the build scale the limit to the check")
        return (f"bundle {name}: reproduce.py ran past {self.seconds:.0f} s ({self.why}); if this machine "
                f"was busy, build again when it is quieter, or give the check more time with {ENV}=SECONDS "
                f"in the environment; if the check itself now takes that long, run it by hand "
                f"(python reproduce.py in the unzipped bundle) to see why")


def interpreter() -> str:
    """What identifies the interpreter that runs the checks: its path and exact version."""
    return f"{os.path.realpath(sys.executable)}|{sys.version}|{sys.implementation.cache_tag}"


def output(name: str, zip_bytes: bytes, root: Path, run) -> str:
    """The check's stdout for this zip: kept from an earlier run by this interpreter, or
    `run(limit)`'s (which raises when the check fails or runs past `limit`), then kept."""
    folder = Path(root) / FOLDER
    digest = hashlib.sha256(zip_bytes).hexdigest()
    key = hashlib.sha256(f"{digest}|{interpreter()}".encode()).hexdigest()
    entry = folder / f"{key}.json"
    try:
        kept = json.loads(entry.read_text(encoding="utf-8"))
        if kept.get("zip_sha256") == digest and kept.get("interpreter") == interpreter() \
                and isinstance(kept.get("stdout"), str):
            return kept["stdout"]
    except (OSError, ValueError, AttributeError):
        pass
    limit = time_limit(len(zip_bytes), last_run(folder, name))
    started = time.monotonic()
    stdout = run(limit)
    took = time.monotonic() - started
    try:
        write_atomic(entry, json.dumps({"zip_sha256": digest, "interpreter": interpreter(), "study": name,
                                        "seconds": round(took, 3), "stdout": stdout}, sort_keys=True))
        write_atomic(folder / f"{name}.seconds", f"{took:.3f}\n")
    except OSError:
        pass   # only speed is lost
    return stdout


def last_run(folder: Path, name: str) -> float | None:
    """Seconds the last successful check of study `name` took here, if one was measured."""
    try:
        seconds = float((Path(folder) / f"{name}.seconds").read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        return None
    return seconds if 0 <= seconds < 1e6 else None


def time_limit(zip_size: int, last_s: float | None, load: float | None = None, cpus: int | None = None) -> Limit:
    """The limit for a check of a zip of `zip_size` bytes whose last run here took `last_s`
    seconds (None: never measured), on a machine with `load` (1-minute average) on `cpus` cores."""
    fixed = os.environ.get(ENV, "").strip()
    if fixed:
        try:
            seconds = float(fixed)
            if seconds > 0:
                return Limit(seconds, f"{ENV}={fixed}")
        except ValueError:
            pass
    if last_s is not None:
        seconds = max(FLOOR_S, MULTIPLE * last_s)
        why = f"{MULTIPLE:g} times its last run here, {last_s:.1f} s, and at least {FLOOR_S:g} s"
    else:
        megabytes = zip_size / 1e6
        seconds = FLOOR_S + PER_MB_S * megabytes
        why = f"{FLOOR_S:g} s and {PER_MB_S:g} s for each of the zip's {megabytes:.1f} MB: never measured here"
    if load is None:
        try:
            load = os.getloadavg()[0]
        except OSError:
            load = 0.0
    cpus = cpus or os.cpu_count() or 1
    if load > cpus:
        seconds *= load / cpus
        why += f"; times {load / cpus:.1f} for the machine's load, {load:.1f} on {cpus} cores"
    return Limit(seconds, why)
