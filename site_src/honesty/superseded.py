"""Superseded registrations (registrations/superseded.yaml): a record judged on an earlier design of
its study, and replaced, without touching the record itself.

A registration is never edited (registrations.check_frozen). When its study is redesigned, the
new data would give the old prediction a meaningless verdict, or none; so the record is listed
here with the commit whose data it was judged on, and the build computes its verdict from
`bundles/<study>/golden.json` as it was in that commit, after checking that the commit is on
HEAD's history and that the record came before every commit that gave that data its content.
The file:

    superseded:
      - id: planted-gap                 # a record under registrations/
        judged_at: 0123abcd...          # the full id of the commit whose data judge it
        reason: >-
          Why it was superseded (the redesign), in words.
        replaced_by: planted-gap-2      # optional: the record that replaces it

The record's page shows it as superseded, with that verdict, the reason and a link to the
record that replaces it; it no longer counts towards a page's `registered` rung.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import BuildError
from .yamlfile import Record, load_record

NAME = "superseded.yaml"
ENTRY_FIELDS = ("id", "judged_at", "reason", "replaced_by")
REQUIRED = ("id", "judged_at", "reason")
COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
ID = re.compile(r"[a-z0-9][a-z0-9_-]*")


@dataclass(frozen=True)
class Supersession:
    id: str
    judged_at: str         # the full commit id
    reason: str
    replaced_by: str       # a registration id, or ''
    where: str             # superseded.yaml:LINE of the entry, for errors
    judged_where: str      # ... of its judged_at
    replaced_where: str    # ... of its replaced_by (the entry's line when it has none)

    @property
    def short(self) -> str:
        """The commit the record was judged on, as pages print it (12 characters)."""
        return self.judged_at[:12]

    @property
    def line(self) -> int:
        """The entry's line in superseded.yaml."""
        return int(self.where.rpartition(":")[2])


def load(root: Path, folder: str, refusal=lambda rel: None) -> tuple[dict[str, Supersession], Record | None]:
    """({registration id: Supersession}, the parsed file); ({}, None) without the file. Raises
    BuildError naming the file and line of the first problem."""
    rel = f"{folder}/{NAME}"
    path = root / rel
    if not path.exists() and not path.is_symlink():
        return {}, None
    why = refusal(rel)
    if why:
        raise BuildError(why, rel)
    doc = load_record(path, rel)
    doc.check_fields(("superseded",), " (the file holds one list, 'superseded:')", "")
    entries = doc.data["superseded"]
    if not isinstance(entries, list):
        raise BuildError("superseded must be a list of {id, judged_at, reason, replaced_by}", doc.where("superseded"))
    out: dict[str, Supersession] = {}
    for index, entry in enumerate(entries):
        item = _entry(doc, index, entry)
        if item.id in out:
            raise BuildError(f"{item.id} is listed twice (first at {out[item.id].where})", item.where)
        out[item.id] = item
    return out, doc


def _entry(doc: Record, index: int, entry) -> Supersession:
    at = ("superseded", index)
    if not isinstance(entry, dict):
        raise BuildError("each entry is a mapping: id, judged_at, reason and optionally replaced_by", doc.where(*at))
    for key in entry:
        if key not in ENTRY_FIELDS:
            raise BuildError(f"unknown field {key!r} (an entry holds {', '.join(ENTRY_FIELDS)})",
                             doc.where(*at, str(key)))
    for key in REQUIRED:
        if key not in entry:
            raise BuildError(f"lacks {key!r}", doc.where(*at))
    for key in ENTRY_FIELDS:
        if key in entry and (not isinstance(entry[key], str) or not entry[key].strip()):
            raise BuildError(f"{key} must be non-empty text", doc.where(*at, key))
    for key in ("id", "replaced_by"):
        if key in entry and not ID.fullmatch(entry[key]):
            raise BuildError(f"{key} must be a registration id ({ID.pattern})", doc.where(*at, key))
    if not COMMIT.fullmatch(entry["judged_at"]):
        raise BuildError("judged_at must be a full commit id (40 or 64 lower-case hex digits; "
                         "`git rev-parse COMMIT` prints it)", doc.where(*at, "judged_at"))
    if entry.get("replaced_by") == entry["id"]:
        raise BuildError("replaced_by names the superseded record itself", doc.where(*at, "replaced_by"))
    return Supersession(id=entry["id"], judged_at=entry["judged_at"], reason=" ".join(entry["reason"].split()),
                        replaced_by=entry.get("replaced_by", ""), where=doc.where(*at),
                        judged_where=doc.where(*at, "judged_at"), replaced_where=doc.where(*at, "replaced_by"))


def check_names(supersessions: dict[str, Supersession], ids: set[str]) -> list[BuildError]:
    """An entry, or a replacement, that names no record under registrations/."""
    problems = []
    for item in supersessions.values():
        if item.id not in ids:
            problems.append(BuildError(f"{item.id} is not a record under registrations/", item.where))
        elif item.replaced_by and item.replaced_by not in ids:
            problems.append(BuildError(f"replaced_by {item.replaced_by} is not a record under registrations/",
                                       item.replaced_where))
    return problems
