"""`build.py record STUDY --key KEY`: a signed reproduction record of a study, made from the built
site's zip exactly as a reader makes one.

The zip is taken from the built site (`public/bundles/STUDY.zip`, checked against
`public/SHA256SUMS`), unzipped into a fresh temporary folder, and its check run there with
`python3 -I -S reproduce.py --record` (the `python3` on PATH, isolated from this environment).
The record is written to `reproductions/STUDY/NAME.yaml`, signed with `ssh-keygen -Y sign`, and
the signature verified against `reproductions/allowed_signers` before anything is left behind:
a failure removes what this command wrote.
"""
from __future__ import annotations

import datetime
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from ..errors import BuildError
from . import reproductions, signatures

STUDY = re.compile(r"[a-z0-9][a-z0-9_-]*")
CHECK_TIMEOUT_S = 1800


def record_study(root: Path, out: Path, study: str, key: Path, name: str | None = None) -> tuple[Path, str, int]:
    """(the record written, the signer, the check's exit status); raises BuildError."""
    if not STUDY.fullmatch(study):
        raise BuildError(f"study {study[:40]!r} is not a study name ({STUDY.pattern})")
    name = name or "authors-" + datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d-%H%M%S")
    if not reproductions.NAME.fullmatch(f"{name}.yaml"):
        raise BuildError(f"record name {name[:40]!r} must be lower-case letters, digits, '.', '_' and '-'")
    zip_path = out / "bundles" / f"{study}.zip"
    if not zip_path.is_file():
        raise BuildError(f"{zip_path} not found: build the site first (python build.py)")
    _check_listed(out, zip_path)
    if not key.is_file():
        raise BuildError(f"{key}: no such private key file")
    keygen, unzip, python3 = signatures.keygen_path(), shutil.which("unzip"), shutil.which("python3")
    for tool, package in ((keygen, "openssh-client (ssh-keygen)"), (unzip, "unzip"), (python3, "python3")):
        if tool is None:
            raise BuildError(f"this command runs what a reader runs, and needs {package}")
    signers = signatures.load_signers(root, reproductions.FOLDER)
    target = root / reproductions.FOLDER / study / f"{name}.yaml"
    signature = target.with_name(target.name + signatures.SIG_SUFFIX)
    if os.path.lexists(target) or os.path.lexists(signature):
        raise BuildError(f"{target.relative_to(root)} (or its signature) already exists: choose another --name")
    record, status = _run_as_a_reader(zip_path, study, unzip, python3)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        with open(target, "xb") as handle:     # the bytes reproduce.py printed, unchanged
            handle.write(record)
        signatures.sign(target, key, keygen)
        found = signatures.verify(target, signature, signers, keygen)
        if not found.verified:
            raise BuildError(f"the new record's signature is {found.problem.removeprefix('unverified: ')}: "
                             f"add the key's public half to {reproductions.FOLDER}/{signatures.ALLOWED} first")
    except BaseException:
        for path in (signature, target):   # nothing half-written
            path.unlink(missing_ok=True)
        raise
    return target, found.signer, status


def _check_listed(out: Path, zip_path: Path) -> None:
    sums = out / "SHA256SUMS"
    digest = hashlib.sha256(zip_path.read_bytes()).hexdigest()
    listed = sums.read_text(encoding="utf-8").split("\n") if sums.is_file() else []
    name = zip_path.relative_to(out).as_posix()
    if not any(line.split() == [digest, name] or line.split() == [digest, f"*{name}"] for line in listed):
        raise BuildError(f"{zip_path} is not the zip {sums} lists (sha256 {digest[:16]}...): build the site again")


def _run_as_a_reader(zip_path: Path, study: str, unzip: str, python3: str) -> tuple[bytes, int]:
    """Fresh folder, unzip, `python3 -I -S reproduce.py --record`: (the record, the exit status)."""
    with tempfile.TemporaryDirectory(prefix="reader-") as tmp:
        shutil.copyfile(zip_path, Path(tmp) / zip_path.name)
        done = subprocess.run([unzip, "-q", zip_path.name, "-d", study], cwd=tmp, capture_output=True, timeout=600)
        if done.returncode != 0:
            raise BuildError(f"unzip {zip_path.name} failed: {done.stderr.decode('utf-8', 'replace').strip()[:200]}")
        env = {"PATH": os.environ.get("PATH", ""), "LANG": "C.UTF-8", "HOME": tmp}
        done = subprocess.run([python3, "-I", "-S", "reproduce.py", "--record"], cwd=Path(tmp) / study,
                              capture_output=True, timeout=CHECK_TIMEOUT_S, env=env)
    if done.returncode not in (0, 1, 2) or b"\nchecksum: " not in done.stdout:
        reason = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise BuildError(f"reproduce.py --record exited {done.returncode} without a record"
                         + (f": {reason[-1]}" if reason else ""))
    return done.stdout, done.returncode
