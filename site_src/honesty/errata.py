"""Errata: a study's correction note (bundles/<study>/CORRECTIONS.md), read line by line.

Each correction is a block of bullet lines, one field a line, so a page can cite each value by
its line:

    - corrects: golden.json#key_recovery/overall/attribution_auc
    - published: 0.64912
    - corrected: 0.571154
    - date: 2026-12-01
    - reason: ...

`published` must be the value golden.json holds at `corrects` (the value as published, which the
bundle keeps); `corrected` is the value that replaces it. The study page lists every correction
with both values, the published one struck through, each with its receipt to its line; a page
that quotes a corrected value bare (not through the note) is refused.
"""
from __future__ import annotations

import datetime
import math
import re
from dataclasses import dataclass
from pathlib import Path

from bundle_kit import contract

from ..errors import BuildError, FixtureProblem
from ..numbers import find_numbers

FIELDS = ("corrects", "published", "corrected", "date", "reason")
LINE = re.compile(r"^- (?P<key>[a-z]+): (?P<value>.*\S)\s*$")
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

    def ref(self, field: str) -> str:
        """A value reference to this correction's `field` line, for the resolver."""
        return f"{self.rel}:{self.lines[field]}"


def _number(text: str, where: str, field: str) -> float:
    numbers = find_numbers(text)
    if len(numbers) != 1 or not math.isfinite(numbers[0].value):
        raise BuildError(f"{field} must hold exactly one number (the page cites the line), not {text!r}", where)
    return float(numbers[0].value)


def parse(text: str, rel: str, study: str) -> list[Correction]:
    """Every correction of a note; BuildError names the note's line."""
    blocks, current = [], None
    for number, line in enumerate(text.split("\n"), start=1):
        match = LINE.match(line)
        if not match:
            if line.startswith("- "):
                raise BuildError("a correction line reads '- FIELD: value' with FIELD one of " + ", ".join(FIELDS),
                                 f"{rel}:{number}")
            continue
        key, value = match.group("key"), match.group("value")
        if key not in FIELDS:
            raise BuildError(f"unknown field {key!r} (a correction has {', '.join(FIELDS)})", f"{rel}:{number}")
        if key == "corrects":
            current = {"_line": number}
            blocks.append(current)
        elif current is None:
            raise BuildError("a correction starts with its '- corrects:' line", f"{rel}:{number}")
        if key in current:
            raise BuildError(f"{key} given twice in one correction", f"{rel}:{number}")
        current[key] = (value, number)
    out = []
    for block in blocks:
        missing = [f for f in FIELDS if f not in block]
        if missing:
            raise BuildError(f"correction lacks {', '.join(missing)}", f"{rel}:{block['_line']}")
        lines = {f: block[f][1] for f in FIELDS}
        where = {f: f"{rel}:{lines[f]}" for f in FIELDS}
        corrects = CORRECTS.match(block["corrects"][0])
        if not corrects:
            raise BuildError(f"corrects must name a value of {contract.GOLDEN} as {contract.GOLDEN}#KEY/PATH",
                             where["corrects"])
        try:
            datetime.date.fromisoformat(block["date"][0])
        except ValueError:
            raise BuildError(f"date must be YYYY-MM-DD, not {block['date'][0]!r}", where["date"]) from None
        out.append(Correction(rel, study, corrects.group("path"), _number(block["published"][0], where["published"], "published"),
                              _number(block["corrected"][0], where["corrected"], "corrected"),
                              block["date"][0], block["reason"][0], lines))
    return out


def load(root: Path, study: str, resolver, refusal=lambda rel: None) -> list[Correction]:
    """The corrections of `study` (none without a note), each checked against its golden.json."""
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
    for item in corrections:
        where = f"{rel}:{item.lines['corrects']}"
        try:
            value = resolver.resolve(f"bundles/{study}/{contract.GOLDEN}#{item.key_path}")
        except FixtureProblem as exc:
            raise BuildError(f"corrects {item.key_path!r}, which does not resolve: {exc.message}", where, exc.fixture) from None
        places = len(str(value.value).split(".")[1]) if isinstance(value.value, float) and "." in str(value.value) else 0
        if not isinstance(value.value, (int, float)) or isinstance(value.value, bool) \
                or round(float(value.value), places) != round(item.published, places):
            raise BuildError(f"published is {item.published:g}, but {value.location} holds {value.value!r}: the "
                             "published value is the one the bundle still holds", f"{rel}:{item.lines['published']}")
    return corrections


def corrected_key(source: str, expression: str, corrections: list[Correction]) -> Correction | None:
    """The correction of the golden.json value a reference reads, if it reads one bare."""
    for item in corrections:
        if source != f"bundles/{item.study}/{contract.GOLDEN}":
            continue
        head = expression.split("|", 1)[0].strip()
        if "#" in head and head.split("#", 1)[1].strip() == item.key_path:
            return item
    return None
