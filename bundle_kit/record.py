"""Reproduction records: what `python reproduce.py --record` prints, and how a record is checked.

Standard library only: this file ships inside every bundle zip beside `reproduce.py`, and the
site build imports it to verify the records committed under `reproductions/<study>/`. One
implementation of the bundle digest, the machine fingerprint and the record checksum serves both.

The record names its bundle by `bundle_files_sha256`: the sha256 of the bundle's file listing,
one line `<sha256 of the file>  <name>` per file, sorted by name (bytes), each ending in a
newline. That is what `sha256sum` prints for the unzipped folder, so it can be checked by hand:

    cd organism && find . -type f ! -path '*/__pycache__/*' | sed 's|^\\./||' | LC_ALL=C sort \\
      | xargs sha256sum | sha256sum

The zip is written deterministically from exactly these files, so equal listings mean equal
zips; the site prints the zip's own sha256 beside each record it matches.

A record counts only when signed by whoever ran it, with an SSH key as git signs with one:
`ssh-keygen -Y sign -f KEY -n reproduction-record@preference-sites NAME.yaml` writes NAME.yaml.sig,
which the site build verifies against the repository's reproductions/allowed_signers.
"""
from __future__ import annotations

import datetime
import hashlib
import json
import os
import platform
import re

FORMAT = "reproduction-record/1"
SIGNING_NAMESPACE = "reproduction-record@preference-sites"   # ssh-keygen -Y sign -n ...
CHECKSUM_KEY = "checksum"
# What the bundle build leaves out of a zip (dotfiles, caches); a record leaves out the same.
_SKIPPED = re.compile(r"(^|/)(\.|__pycache__(/|$))|\.pyc$|~$")


def listing_digest(files: list[tuple[str, str]]) -> str:
    """sha256 of `sha256sum`-style lines for (name, sha256) pairs, sorted by name's bytes."""
    lines = "".join(f"{sha}  {name}\n" for name, sha in sorted(files, key=lambda f: f[0].encode("utf-8")))
    return hashlib.sha256(lines.encode("utf-8")).hexdigest()


def folder_files(folder: str, skip: tuple[int, int] | None = None) -> list[tuple[str, str]]:
    """(name, sha256) of every file under `folder`, names relative with '/', as a zip names them.

    `skip` is a (st_dev, st_ino) to leave out: the file the record is being written into, when
    someone redirects it into the bundle folder itself.
    """
    out = []
    for base, dirs, names in os.walk(folder):
        dirs.sort()
        for entry in sorted(names):
            path = os.path.join(base, entry)
            name = os.path.relpath(path, folder).replace(os.sep, "/")
            if _SKIPPED.search(name) or not os.path.isfile(path):
                continue
            stat = os.stat(path)
            if skip is not None and (stat.st_dev, stat.st_ino) == skip:
                continue
            with open(path, "rb") as handle:
                data = handle.read()
            if name.endswith((".json", ".jsonl", ".md", ".py", ".txt", ".csv", ".yaml", ".yml", ".tsv")):
                data = data.replace(b"\r\n", b"\n")  # as the build reads text (a CRLF checkout)
            out.append((name, hashlib.sha256(data).hexdigest()))
    return sorted(out, key=lambda f: f[0].encode("utf-8"))


def machine_fingerprint() -> str:
    """A short, non-reversible name for this machine: sha256 of its machine id (or host name)."""
    ident = ""
    for path in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        try:
            with open(path, encoding="ascii") as handle:
                ident = handle.read().strip()
        except (OSError, UnicodeDecodeError):
            continue
        if ident:
            break
    if not ident:
        ident = "node:" + platform.node()
    return hashlib.sha256(f"reproduction machine {ident}".encode("utf-8")).hexdigest()[:16]


def checksum(text_above: str) -> str:
    """sha256 of every byte of the record above its checksum line: catches any hand edit."""
    return hashlib.sha256(text_above.encode("utf-8")).hexdigest()


def _quoted(text: str) -> str:
    # A JSON string is a valid YAML double-quoted scalar; quoting every value keeps a hash made
    # only of digits from being read back as a number.
    return json.dumps(text, ensure_ascii=False)


def render(study: str, files: list[tuple[str, str]], exit_status: int, output: str,
           now: datetime.datetime | None = None, note: str = "") -> str:
    """The record's YAML text. `output` is everything the check printed; `note`, one line put
    first as a comment (the browser's check writes "browser run, unsigned"), is covered by the
    checksum like the rest."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    lines = [f"# {' '.join(note.split())}"] if note.strip() else []
    lines += [
        "# A reproduction record, written by `python reproduce.py --record`. Commit it unedited as",
        f"# reproductions/{study}/<name>.yaml; the site build checks it against the current bundle.",
        f"# Sign it: ssh-keygen -Y sign -f YOUR_KEY -n {SIGNING_NAMESPACE} <name>.yaml, and commit",
        "# <name>.yaml.sig beside it, with your public key in reproductions/allowed_signers.",
        f"format: {FORMAT}",
        f"study: {_quoted(study)}",
        f"bundle_files_sha256: {_quoted(listing_digest(files))}",
        "files:",
        *(f"  {_quoted(name)}: {_quoted(sha)}" for name, sha in files),
        f"exit_status: {exit_status}",
        f"date: {_quoted(now.strftime('%Y-%m-%dT%H:%M:%SZ'))}",
        f"platform: {_quoted(platform.platform())}",
        f"python: {_quoted(platform.python_version() + ' (' + platform.python_implementation() + ')')}",
        f"hostname: {_quoted(platform.node())}",
        f"machine_fingerprint: {_quoted(machine_fingerprint())}",
        "output: |2",
    ]
    body = output if output.endswith("\n") else output + "\n"
    lines += [f"  {line}" if line else "" for line in body[:-1].split("\n")]
    text = "\n".join(lines) + "\n"
    return text + f"{CHECKSUM_KEY}: {_quoted(checksum(text))}\n"


def split_checksum(text: str) -> tuple[str, str | None, int]:
    """(text above the checksum line, the checksum written there or None, that line's number)."""
    lines = text.split("\n")
    for number in range(len(lines) - 1, -1, -1):
        if lines[number].startswith(f"{CHECKSUM_KEY}:"):
            above = "\n".join(lines[:number]) + "\n"
            return above, lines[number].split(":", 1)[1].strip().strip('"'), number + 1
    return text, None, 0
