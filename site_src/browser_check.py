"""The runtime behind "Run the check here" (templates/static/check.js, docs/bundles.md).

A study page's button runs the bundle's own `reproduce.py` in the reader's browser, in Pyodide
(CPython compiled to WebAssembly). The runtime is the `pyodide` npm package that `package.json`
pins exactly; `npm ci` puts it in `node_modules/pyodide/`. This module finds it there and names
the few files the check needs, published under `assets/pyodide/<version>/` (a versioned folder,
so a server may cache it for good). Nothing else of the package is published: no wheels, no
console pages. Where the runtime is absent or not the pinned version, the build still succeeds:
the study pages leave the button out, and the build's summary line says why, once.

Everything read from node_modules/ is treated as hostile: a symbolic link, a file that is not a
regular file, or a runtime over `MAX_RUNTIME_BYTES` is refused with the reason.
"""
from __future__ import annotations

import json
import math
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from .sources import CopiedFile

PACKAGE = "pyodide"
PACKAGE_DIR = ("node_modules", PACKAGE)
# What loadPyodide fetches to start CPython with its standard library, and nothing more.
FILES = ("pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip")
# Published with its package list emptied: the check installs no package, so no request for one
# can be made, not even to the CDN the npm build names by default.
LOCK = "pyodide-lock.json"
MAX_RUNTIME_BYTES = 64 * 1024 * 1024
MAX_MANIFEST_BYTES = 1024 * 1024
# A bundle whose files unpack to more than this is not offered for checking in a browser.
# benchmarks/benchmark_browser_check.py on the committed studies (7.5 to 18.5 MB unpacked; four runs
# on 2 shared cores under a load average of 8 to 14): the browser's reproduce.py took 0.07 to 0.54 s
# per unpacked MB, 1 to 4.4 times the native run, after 7 to 25 s to start Python; the native run
# peaks at up to 8.5 bytes of memory per unpacked byte, which the browser holds in a 32-bit
# WebAssembly memory (4 GiB at most, less on a phone). At 100 MB: about a minute, under a gigabyte.
MAX_BROWSER_BUNDLE_BYTES = 100 * 1000 * 1000
# How long the browser's reproduce.py may run before check.js ends it (and its worker): a minute,
# plus 5 s per unpacked MB, ten times the slowest rate measured above, for a phone and a busy
# machine. 98 s for the organism (7.5 MB), 153 s for MiniLM (18.5 MB), 560 s at the 100 MB limit.
TIME_LIMIT_BASE_S = 60
TIME_LIMIT_S_PER_MB = 5


@dataclass(frozen=True)
class Runtime:
    """The published runtime, or why there is none (`missing`, one sentence)."""

    version: str = ""
    files: dict = field(default_factory=dict, repr=False)   # {name in the package: CopiedFile or bytes}
    size: int = 0                                           # bytes of all of them
    missing: str = ""

    @property
    def present(self) -> bool:
        """Whether the Pyodide runtime was found (else `missing` says why not)."""
        return not self.missing

    @property
    def href(self) -> str:
        """The runtime's folder, relative to the site root (ends in '/')."""
        return f"assets/{PACKAGE}/{self.version}/"

    @property
    def size_text(self) -> str:
        """The runtime's size as the page prints it."""
        return f"{self.size / 1e6:.1f} MB"

    def too_large(self, bundle) -> str:
        """Why `bundle` (a site_src.bundles.Bundle) is not offered for checking here; empty when it is."""
        return too_large(sum(f.size for f in bundle.files))

    def time_limit(self, bundle) -> int:
        """Seconds the browser's run of `bundle`'s reproduce.py may take before it is stopped."""
        return time_limit(sum(f.size for f in bundle.files))

    def public_files(self) -> dict:
        """{path under the site root: bytes or CopiedFile}; empty when the runtime is absent."""
        return {self.href + name: data for name, data in self.files.items()}

    @property
    def note(self) -> str:
        """The build's one line about the button; empty when the runtime is there."""
        return f"no \"Run the check here\" button: {self.missing}" if self.missing else ""


def find(root: Path) -> Runtime:
    """The runtime in `root`/node_modules/pyodide, checked against the version package.json pins."""
    root = Path(root)
    try:
        pinned = _pinned_version(root)
        folder = root.joinpath(*PACKAGE_DIR)
        if not _is_real_dir(root / PACKAGE_DIR[0]) or not _is_real_dir(folder):
            return Runtime(missing=f"{'/'.join(PACKAGE_DIR)} is missing (`npm ci` installs it)")
        installed = _read_json(folder / "package.json").get("version")
        if installed != pinned:
            return Runtime(missing=f"{'/'.join(PACKAGE_DIR)} is version {installed}, package.json pins {pinned} "
                                   "(`npm ci` installs the pinned one)")
        files: dict = {}
        total = 0
        for name in FILES:
            path = folder / name
            total += _regular_size(path)
            files[name] = CopiedFile(path)
        lock = _read_json(folder / LOCK)
        if not isinstance(lock.get("info"), dict):
            raise ValueError(f"{_shown(folder / LOCK)} has no 'info' object")
        files[LOCK] = (json.dumps({"info": lock["info"], "packages": {}}, sort_keys=True, indent=1) + "\n").encode()
        total += len(files[LOCK])
        if total > MAX_RUNTIME_BYTES:
            raise ValueError(f"{_shown(folder)} holds {total:,} bytes of runtime, over the {MAX_RUNTIME_BYTES:,} allowed")
    except ValueError as exc:
        return Runtime(missing=str(exc))
    return Runtime(version=pinned, files=dict(sorted(files.items())), size=total)


def fingerprint(root: Path, digest) -> list:
    """What the published runtime depends on, for the incremental build's key: the pinned version
    and `digest(path)` of every file it would copy (site_src/incremental.py memoizes those)."""
    runtime = find(root)
    if not runtime.present:
        return ["absent", runtime.missing]
    return [runtime.version, [(name, digest(data.path) if isinstance(data, CopiedFile) else len(data))
                              for name, data in runtime.files.items()]]


def too_large(unpacked_bytes: int) -> str:
    """Why a bundle of `unpacked_bytes` is not checked in a browser; empty when it is."""
    if unpacked_bytes <= MAX_BROWSER_BUNDLE_BYTES:
        return ""
    return (f"its files unpack to {unpacked_bytes / 1e6:.0f} MB, more than the {MAX_BROWSER_BUNDLE_BYTES / 1e6:.0f} MB "
            "this site checks in a browser")


def time_limit(unpacked_bytes: int) -> int:
    """Seconds a browser may run the reproduce.py of a bundle of `unpacked_bytes` (check.js ends it then)."""
    return TIME_LIMIT_BASE_S + math.ceil(TIME_LIMIT_S_PER_MB * unpacked_bytes / 1e6)


def _pinned_version(root: Path) -> str:
    manifest = _read_json(root / "package.json")
    wanted = {**manifest.get("dependencies", {}), **manifest.get("devDependencies", {})}.get(PACKAGE)
    if not isinstance(wanted, str) or not wanted or not all(part.isdigit() for part in wanted.split(".")):
        raise ValueError(f"package.json does not pin {PACKAGE} to an exact version (found {wanted!r})")
    return wanted


def _is_real_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _regular_size(path: Path) -> int:
    try:
        info = os.lstat(path)
    except OSError as exc:
        raise ValueError(f"{_shown(path)} is missing ({exc.strerror})") from None
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(f"{_shown(path)} is not a regular file (a link or a folder)")
    return info.st_size


def _read_json(path: Path) -> dict:
    if _regular_size(path) > MAX_MANIFEST_BYTES:
        raise ValueError(f"{_shown(path)} is over {MAX_MANIFEST_BYTES:,} bytes")
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{_shown(path)} cannot be read as JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{_shown(path)} is not a JSON object")
    return data


def _shown(path: Path) -> str:
    """`path` as the build names it: from node_modules/ on, or the file name (package.json)."""
    parts = Path(path).parts
    return "/".join(parts[parts.index(PACKAGE_DIR[0]):]) if PACKAGE_DIR[0] in parts else Path(path).name
