"""The registrations' checks and verdicts kept between builds (.cache/honesty/), keyed by what
they read, so a build that changed none of it (an edit to a page, a no-op) does not redo them.

Checking the registrations reads git's whole history, each record's first commit, the commits
that gave every data file its content, and golden.json as superseded records' `judged_at`
commits hold it: seconds on every build, though it changes only with a commit or an edit of the
records or the data. The key is everything `registrations.load_all` reads:

- HEAD (the history, and every commit it names, is fixed by it) and the root's place in its
  work tree, from one `git rev-parse` (which also refuses a shallow clone, as the check does);
- every entry of registrations/ (name, whether git tracks it, its bytes' sha256);
- every file of every bundles/<study>/ that the check reads (the same list, `data_files`), with
  whether git tracks it and its sha256;
- the generator's code (site_src/, safe_io/, bundle_kit/) and the Python and PyYAML versions.

File digests are memoized by stat signature as the page cache's are (incremental.Digests). Only a
run that added no error is kept, and only when its result reads back equal to itself; anything
unreadable in the cache only means the check runs again. Deleting .cache/ is always safe.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import sys
from pathlib import Path

from safe_io import git_state, write_atomic

from ..errors import BuildError
from ..receipts import Resolved
from .history import Commit, History
from .registrations import FOLDER, Condition, Registration, Verified, data_files, load_all
from .superseded import Supersession
from .yamlfile import Record

FORMAT = 1
PATH = Path(".cache") / "honesty" / "registrations.json"
KEEP = 4          # entries kept (say, two branches an author switches between)
CODE = ("site_src", "safe_io", "bundle_kit")
TYPES = {cls.__name__: cls for cls in (Verified, Registration, Condition, Record, Commit, Resolved, Supersession)}


def load_verified(root: Path, resolver, errors, refusal=lambda rel: None) -> list[Verified]:
    """`registrations.load_all`'s result, from the cache when nothing it reads changed; the
    fixtures it cites are marked used in `resolver` either way."""
    root = Path(root)
    cache = _Cache(root)
    key = cache.key(refusal)
    if key is not None:
        found = cache.get(key)
        if found is not None:
            verified, used = found
            for rel, view in used:
                resolver.used[rel] = resolver.used.get(rel, False) or view
            return verified
    before_errors, before_used = len(errors), dict(resolver.used)
    verified = load_all(root, resolver, errors, refusal=refusal)
    if key is not None and len(errors) == before_errors:
        used = [(rel, view) for rel, view in resolver.used.items() if before_used.get(rel) != view]
        cache.put(key, verified, used)
    return verified


class _Cache:
    def __init__(self, root: Path):
        from ..incremental import Digests   # stat-memoized sha256, as the page cache keeps them
        self.root = root
        self.path = root / PATH
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if data.get("format") != FORMAT:
                data = {}
        except (OSError, ValueError, AttributeError):
            data = {}
        self.entries = data.get("entries", {}) if isinstance(data.get("entries"), dict) else {}
        self.digests = Digests(data.get("digests", {}) if isinstance(data.get("digests"), dict) else {})

    def key(self, refusal) -> str | None:
        """The digest of everything the check reads; None when git cannot say where HEAD is."""
        root = self.root
        head, _dirty = git_state(root)
        if head is None or not (root / FOLDER).is_dir():
            return None
        try:
            history = History(root)
            history.require_full_history()
        except BuildError:
            return None
        parts: list = [FORMAT, sys.version, _version("pyyaml"), head, history._prefix, str(root)]
        here = Path(__file__).resolve().parents[2]
        for name in CODE:
            for path in sorted((here / name).rglob("*.py")):
                parts.append((path.relative_to(here).as_posix(), self.digests.file(path)))
        for entry in sorted(os.listdir(root / FOLDER)):
            rel = f"{FOLDER}/{entry}"
            parts.append((rel, refusal(rel), self.digests.file(root / rel)))
        bundles = root / "bundles"
        for study in sorted(os.listdir(bundles)) if bundles.is_dir() else ():
            if (bundles / study).is_dir():
                parts.append([(rel, refusal(rel), self.digests.file(root / rel)) for rel in data_files(root, study)])
            else:
                parts.append((f"bundles/{study}", "not a folder"))
        return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()

    def get(self, key: str):
        """(verified, [(fixture, needs a line view)]) kept under `key`, or None."""
        entry = self.entries.get(key)
        if not isinstance(entry, dict):
            return None
        try:
            return [_decode(v) for v in entry["verified"]], [tuple(u) for u in entry["used"]]
        except (KeyError, TypeError, ValueError):
            return None

    def put(self, key: str, verified: list, used: list) -> None:
        """Keep a result, if it reads back equal to itself (else it is simply not kept)."""
        try:
            encoded = [_encode(v) for v in verified]
            text = json.dumps(encoded)
            if [_decode(v) for v in json.loads(text, parse_constant=_constant)] != verified:
                return
        except (TypeError, ValueError):
            return
        entries = {k: v for k, v in self.entries.items() if k != key}
        kept = dict(list(entries.items())[-(KEEP - 1):])
        kept[key] = {"verified": encoded, "used": [list(u) for u in used]}
        digests = {**self.digests.old, **self.digests.new}
        live = set(self.digests.new)
        data = {"format": FORMAT, "entries": kept, "digests": {k: v for k, v in digests.items() if k in live}}
        try:
            write_atomic(self.path, json.dumps(data, sort_keys=True))
        except OSError:
            pass   # only speed is lost


def _version(name: str) -> str | None:
    # read from the .dist-info folder names, as the page cache does: importing importlib.metadata
    # (and the email package it pulls in) was about 25 ms of every build
    from ..incremental import library_versions
    return library_versions((name,))[0][1]


def _constant(name: str) -> float:
    return math.nan if name == "NaN" else float(name)   # math.nan itself: Condition's default


def _encode(value):
    """JSON-ready form of a result: dataclasses by name, tuples and non-text keys marked."""
    if dataclasses.is_dataclass(value):
        name = type(value).__name__
        if TYPES.get(name) is not type(value):
            raise TypeError(f"cannot keep a {name}")
        return {"@": name, **{f.name: _encode(getattr(value, f.name)) for f in dataclasses.fields(value)}}
    if isinstance(value, tuple):
        return {"@tuple": [_encode(v) for v in value]}
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value):
            return {"@dict": {k: _encode(v) for k, v in value.items()}}
        return {"@pairs": [[_encode(k), _encode(v)] for k, v in value.items()]}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"cannot keep a {type(value).__name__}")


def _decode(value):
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if isinstance(value, float) and math.isnan(value):
        return math.nan
    if not isinstance(value, dict):
        return value
    if "@tuple" in value:
        return tuple(_decode(v) for v in value["@tuple"])
    if "@dict" in value:
        return {k: _decode(v) for k, v in value["@dict"].items()}
    if "@pairs" in value:
        return {_decode(k): _decode(v) for k, v in value["@pairs"]}
    cls = TYPES[value["@"]]
    return cls(**{k: _decode(v) for k, v in value.items() if k != "@"})
