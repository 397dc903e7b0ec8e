"""Errata: a study's correction note (bundles/<study>/CORRECTIONS.md), read line by line.

Each correction is a block of bullet lines, one field a line, so a page can cite each value by
its line:

    - corrects: golden.json#key_recovery/overall/attribution_auc
    - published: 0.64912
    - corrected: 0.571154
    - date: 2026-12-01
    - reason: ...

`published` must be the value golden.json holds at `corrects` (the value as published, which the
bundle keeps), equal as written: both are read as exact decimals, never rounded to either's
precision. `corrected` is the value that replaces it.

When the bundle itself was recomputed (its golden.json now holds the corrected value), the block
names the commit whose golden.json published the old one, by its full id:

    - published_in: 9e0c159c72654286ff412ff71237601d7be689c8

Then `published` must be the value golden.json held at that commit (a commit of HEAD's history)
and `corrected` the value it holds now, both exactly as written; a page may quote the value bare,
since the bundle holds the corrected one, and the study page lists the correction all the same.

A claim the study published that no single value holds (a test that could not have passed, a
reading the data do not support) is withdrawn by a block of its own, the claim in a few words:

    - withdraws: the learned-dimension test's verdict on seven dimensions
    - date: 2026-12-02
    - reason: ...

The study page lists it under Corrections with its date, its reason and its receipt to the note;
the page's own prose says, with numbers by reference, what replaces it. The study page lists every correction with
both values, the published one struck through, each with its receipt to its line; a page that
reads a corrected value bare (not through the note) is refused, in any reference form that
reaches it: FILE:LINE, FILE#KEY, FILE:LINE#KEY, or a block or an aggregate that holds it.
"""
from __future__ import annotations

import datetime
import json
import math
import re
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from bundle_kit import contract

from ..errors import BuildError, FixtureProblem
from ..numbers import find_numbers
from ..refgrammar import RefSyntaxError, parse_ref
from ..resolve import find_entry

FIELDS = ("corrects", "published", "corrected", "date", "reason")
OPTIONAL = ("published_in",)    # the commit whose golden.json published the value, when it no longer does
COMMIT = re.compile(r"[0-9a-f]{40}")
CLAIM_FIELDS = ("withdraws", "date", "reason")
PLAIN = re.compile(r"[+\-\u2212]?\d+(\.\d+)?")
LINE = re.compile(r"^- (?P<key>[a-z_]+): (?P<value>.*\S)\s*$")
CORRECTS = re.compile(rf"^{re.escape(contract.GOLDEN)}#(?P<path>[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*)$")


@dataclass(frozen=True)
class Correction:
    rel: str                 # repository-relative path of the note
    study: str
    key_path: str            # the corrected value's key path in golden.json
    published: float
    corrected: float
    date: str
    reason: str
    lines: dict              # field -> 1-based line in the note
    published_exact: Decimal = Decimal(0)   # `published` as written
    corrected_exact: Decimal = Decimal(0)   # `corrected` as written
    published_in: str = ""                  # the commit whose golden.json holds `published` ("" : today's)

    @property
    def path(self) -> tuple:
        """The corrected value's key path in golden.json, as a tuple."""
        return tuple(self.key_path.split("/"))

    def ref(self, field: str) -> str:
        """A value reference to this correction's `field` line, for the resolver."""
        return f"{self.rel}:{self.lines[field]}"


@dataclass(frozen=True)
class Withdrawal:
    """A published claim withdrawn by the note: no value of golden.json changes."""

    rel: str                 # repository-relative path of the note
    study: str
    claim: str               # the claim, in a few words
    date: str
    reason: str
    lines: dict              # field -> 1-based line in the note


def _number(text: str, where: str, field: str) -> Decimal:
    """The one number of a field, exactly as written (a plain decimal: no %, no fraction, no 1,000)."""
    numbers = find_numbers(text)
    if len(numbers) != 1 or not math.isfinite(numbers[0].value):
        raise BuildError(f"{field} must hold exactly one number (the page cites the line), not {text!r}", where)
    if not PLAIN.fullmatch(numbers[0].text):
        raise BuildError(f"{field} must be a plain decimal number such as -0.0937, not {numbers[0].text!r}", where)
    return Decimal(numbers[0].text.replace("\u2212", "-"))


def parse(text: str, rel: str, study: str) -> list:
    """Every correction (Correction) and withdrawn claim (Withdrawal) of a note, in order;
    BuildError names the note's line."""
    blocks, current = [], None
    for number, line in enumerate(text.split("\n"), start=1):
        match = LINE.match(line)
        if not match:
            if line.startswith("- "):
                raise BuildError("a correction line reads '- FIELD: value' with FIELD one of " + ", ".join(FIELDS),
                                 f"{rel}:{number}")
            continue
        key, value = match.group("key"), match.group("value")
        if key not in FIELDS + OPTIONAL + CLAIM_FIELDS:
            raise BuildError(f"unknown field {key!r} (a correction has {', '.join(FIELDS)}, and may have "
                             f"{', '.join(OPTIONAL)}; a withdrawn claim "
                             f"{', '.join(CLAIM_FIELDS)})", f"{rel}:{number}")
        if key in ("corrects", "withdraws"):
            current = {"_line": number, "_fields": FIELDS + OPTIONAL if key == "corrects" else CLAIM_FIELDS}
            blocks.append(current)
        elif current is None:
            raise BuildError("a correction starts with its '- corrects:' line (a withdrawn claim with "
                             "'- withdraws:')", f"{rel}:{number}")
        if key in current:
            raise BuildError(f"{key} given twice in one correction", f"{rel}:{number}")
        if key not in current["_fields"]:
            raise BuildError(f"{key} is not a field of a withdrawn claim ({', '.join(CLAIM_FIELDS)})",
                             f"{rel}:{number}")
        current[key] = (value, number)
    out = []
    for block in blocks:
        if block["_fields"] is CLAIM_FIELDS:
            missing = [f for f in CLAIM_FIELDS if f not in block]
            if missing:
                raise BuildError(f"withdrawn claim lacks {', '.join(missing)}", f"{rel}:{block['_line']}")
            lines = {f: block[f][1] for f in CLAIM_FIELDS}
            _date(block["date"][0], f"{rel}:{lines['date']}")
            out.append(Withdrawal(rel, study, block["withdraws"][0], block["date"][0], block["reason"][0], lines))
            continue
        missing = [f for f in FIELDS if f not in block]
        if missing:
            raise BuildError(f"correction lacks {', '.join(missing)}", f"{rel}:{block['_line']}")
        lines = {f: block[f][1] for f in FIELDS + OPTIONAL if f in block}
        where = {f: f"{rel}:{n}" for f, n in lines.items()}
        corrects = CORRECTS.match(block["corrects"][0])
        if not corrects:
            raise BuildError(f"corrects must name a value of {contract.GOLDEN} as {contract.GOLDEN}#KEY/PATH",
                             where["corrects"])
        _date(block["date"][0], where["date"])
        published = _number(block["published"][0], where["published"], "published")
        corrected = _number(block["corrected"][0], where["corrected"], "corrected")
        commit = block.get("published_in", ("", 0))[0]
        if commit and not COMMIT.fullmatch(commit):
            raise BuildError(f"published_in must be a full commit id (40 hex digits: `git rev-parse COMMIT`), "
                             f"not {commit!r}", where["published_in"])
        out.append(Correction(rel, study, corrects.group("path"), float(published), float(corrected),
                              block["date"][0], block["reason"][0], lines, published, corrected, commit))
    return out


def _date(text: str, where: str) -> None:
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        raise BuildError(f"date must be YYYY-MM-DD, not {text!r}", where) from None


def load(root: Path, study: str, resolver, refusal=lambda rel: None) -> list:
    """The corrections and withdrawn claims of `study` (none without a note), each correction
    checked against its golden.json."""
    rel = f"bundles/{study}/{contract.CORRECTIONS}"
    path = Path(root) / rel
    if not path.is_file():
        return []
    refused = refusal(rel)
    if refused:
        raise BuildError(refused, rel)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BuildError(f"cannot read: {exc}", rel) from None
    corrections = parse(text, rel, study)
    golden_rel = f"bundles/{study}/{contract.GOLDEN}"
    golden = None
    past: dict[str, object] = {}     # commit -> its golden.json, parsed as exact decimals
    for item in corrections:
        if isinstance(item, Withdrawal):
            continue
        where = f"{rel}:{item.lines['corrects']}"
        try:
            value = resolver.resolve(f"{golden_rel}#{item.key_path}")
        except FixtureProblem as exc:
            raise BuildError(f"corrects {item.key_path!r}, which does not resolve: {exc.message}", where, exc.fixture) from None
        if golden is None:   # the numbers as written: exact decimals, not floats
            golden = _exact(resolver.path_for(golden_rel).read_text(encoding="utf-8"))
        written = _at(golden, item.path)
        if not isinstance(value.value, (int, float)) or isinstance(value.value, bool) or not isinstance(written, Decimal):
            raise BuildError(f"corrects {item.key_path!r}, which is not a number in {value.location}", where)
        if item.published_in:
            if item.published_in not in past:
                past[item.published_in] = _golden_at(root, item.published_in, golden_rel,
                                                     f"{rel}:{item.lines['published_in']}")
            then = _at(past[item.published_in], item.path)
            if then != item.published_exact:
                raise BuildError(f"published is {item.published_exact}, but {golden_rel} at {item.published_in[:12]} "
                                 f"holds {then if isinstance(then, Decimal) else 'no number there'}: the published value "
                                 "is the one that commit's bundle held, exactly as written",
                                 f"{rel}:{item.lines['published']}")
            if written != item.corrected_exact:
                raise BuildError(f"corrected is {item.corrected_exact}, but {value.location} holds {written}: with "
                                 "published_in, the bundle holds the corrected value (without it, the published one)",
                                 f"{rel}:{item.lines['corrected']}")
        elif written != item.published_exact:
            raise BuildError(f"published is {item.published_exact}, but {value.location} holds {written}: the published "
                             "value is the one the bundle still holds, exactly as written",
                             f"{rel}:{item.lines['published']}")
    return corrections


def _exact(text: str):
    return json.loads(text, parse_float=Decimal, parse_int=Decimal)


def _golden_at(root: Path, commit: str, golden_rel: str, where: str):
    """golden.json as `commit` (of HEAD's history) holds it, parsed as exact decimals."""
    from .history import History
    history = History(root)
    try:
        history.git("merge-base", "--is-ancestor", commit, "HEAD")
        data = history.file_at(commit, golden_rel, 10_000_000)
    except BuildError:
        raise BuildError(f"published_in {commit[:12]} is not a commit of HEAD's history (a full history is "
                         "needed: `git fetch --unshallow`)", where) from None
    finally:
        history.close()
    if data is None:
        raise BuildError(f"published_in {commit[:12]} holds no {golden_rel}", where)
    return _exact(data.decode("utf-8"))


def _at(tree, path: tuple):
    for key in path:
        if isinstance(tree, dict) and key in tree:
            tree = tree[key]
        elif isinstance(tree, list) and key.isdigit() and int(key) < len(tree):
            tree = tree[int(key)]
        else:
            return None
    return tree


def corrected_read(resolved, corrections: list[Correction], fixture) -> Correction | None:
    """The correction of a golden.json value that `resolved` reads bare, if it reads one.

    `fixture` is the parsed golden.json (site_src.fixtures.Structured). A value is read when the
    reference names it, by key path, by line or by both, or names a block that holds it, whether
    shown as a table or aggregated; a value whose expression is not a reference (a figure's
    source) is matched by its line and its items' lines."""
    hits = [c for c in corrections   # a recomputed bundle (published_in) holds the corrected value
            if isinstance(c, Correction) and not c.published_in
            and resolved.source == f"bundles/{c.study}/{contract.GOLDEN}"]
    if not hits:
        return None
    read = _entry_read(resolved.expression, fixture)
    lines = _lines(resolved)
    for item in hits:
        entry = fixture.by_path.get(item.path)
        if read is not None and item.path[:len(read)] == read:
            return item
        if entry is not None and entry.line in lines:
            return item
    return None


def _entry_read(expression: str, fixture) -> tuple | None:
    """The key path (as text segments) of the entry a reference reads (None: not a reference)."""
    try:
        ref = parse_ref(expression)
    except RefSyntaxError:
        return None
    if ref.key:
        entry = find_entry(fixture, ref.key)
    elif ref.line is not None:
        entries = fixture.by_line.get(ref.line, [])
        depth = min((len(e.path) for e in entries), default=0)
        entry = next((e for e in entries if len(e.path) == depth), None)
    else:
        entry = fixture.by_path.get(())
    return tuple(str(part) for part in entry.path) if entry is not None else None


def _lines(resolved) -> set:
    out = {resolved.line} if resolved.line else set()
    for _key, item in resolved.items:
        out |= _lines(item)
    return out
