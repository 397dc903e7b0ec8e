"""Resolve a value reference against the committed fixtures: a `Resolved` value with its receipt.

FILE is looked up first in the page's bundle (`bundles/<bundle>/FILE`), then relative to the
repository root. Every failure raises FixtureProblem naming the fixture file and line; the page
renderer adds the page location.
"""
from __future__ import annotations

import math
import os
from pathlib import Path

from .aggregates import aggregate, filter_rows, group_rows
from .errors import FixtureProblem
from .paths import RepoFiles, clean_rel
from .fixtures import PROSE, STRUCTURED, FixtureCache, Prose, Rows, Structured
from .receipts import Resolved
from .refgrammar import Ref, parse_ref
from .urls import source_href

VIEWABLE = STRUCTURED + PROSE


def key_text(path: tuple) -> str:
    """A key path as written in a reference."""
    return "/".join(str(p) for p in path)


class Resolver:
    """Resolves references for one page (one bundle); records every fixture file it used."""

    def __init__(self, root: Path, bundle: str | None = None, cache: FixtureCache | None = None,
                 extra_dirs: tuple[Path, ...] = (), allow_outside: bool = False, files: RepoFiles | None = None):
        self.root = root.resolve()
        self.bundle = bundle
        self.cache = cache or FixtureCache()
        self.extra_dirs = extra_dirs          # the `ref` command also tries the working directory
        self.allow_outside = allow_outside    # only `ref`, which publishes nothing: any readable file
        # pages may cite only what the path policy allows: tracked, inside, no symbolic link
        self.files = None if allow_outside else (files or RepoFiles(self.root))
        self._policy: RepoFiles | None = None   # `ref`'s path policy inside the repository
        self.used: dict[str, bool] = {}       # repo-relative path -> needs a line-numbered view

    # -- files -------------------------------------------------------------------------------
    def locate(self, file: str) -> tuple[Path, str]:
        """(absolute path, repo-relative path) of a fixture name: the page's bundle first, then the
        repository."""
        if os.path.isabs(file):
            raise FixtureProblem("use a path relative to the bundle or the repository, not an absolute one", file)
        if self.files is None:
            return self._locate_anywhere(file)
        candidates = ([f"bundles/{self.bundle}/{file}"] if self.bundle else []) + [file]
        for candidate in candidates:
            if clean_rel(candidate) is None:
                raise FixtureProblem("is outside the repository: pages may cite committed files only", file)
            why = self.files.refusal(candidate)
            if why is None:
                rel = clean_rel(candidate)
                return self.root / rel, rel
            if why != "file not found":
                raise FixtureProblem(why, clean_rel(candidate))
        tried = ", ".join(sorted({clean_rel(c) for c in candidates}))
        raise FixtureProblem(f"fixture file not found (looked for {tried})", file)

    def _locate_anywhere(self, file: str) -> tuple[Path, str]:
        """`ref` only: a file of the repository under the path policy (tracked, no link on the way:
        an ignored secret is refused, never printed), or a file outside it as it is (an author's
        copy of a quoted source beside the repository)."""
        candidates = []
        if self.bundle:
            candidates.append(self.root / "bundles" / self.bundle / file)
        candidates.append(self.root / file)
        candidates.extend(d / file for d in self.extra_dirs)
        for candidate in candidates:
            lexical = Path(os.path.abspath(candidate))
            if lexical.is_relative_to(self.root):
                if self._policy is None:
                    self._policy = RepoFiles(self.root)
                rel = lexical.relative_to(self.root).as_posix()
                why = self._policy.refusal(rel)
                if why is None:
                    return self.root / rel, rel
                if why != "file not found":
                    raise FixtureProblem(why, rel)
                continue
            path = candidate.resolve()
            if path.is_file():
                inside = path.is_relative_to(self.root)
                rel = path.relative_to(self.root).as_posix() if inside else os.path.relpath(path, self.root)
                return path, Path(rel).as_posix()
        tried = ", ".join(sorted({os.path.relpath(c, self.root) for c in candidates}))
        raise FixtureProblem(f"fixture file not found (looked for {tried})", file)

    def path_for(self, file: str) -> Path:
        """FILE -> absolute Path (bundle first, then repo), for figures; records the file as used."""
        path, rel = self.locate(file)
        self.used.setdefault(rel, False)
        return path

    def rows(self, file: str, required: tuple = ()) -> list[dict]:
        """Every row of a JSONL fixture, each holding the `required` fields (for figures; shared and
        read-only); records the file as used."""
        path, rel = self.locate(file)
        self.used.setdefault(rel, False)
        fixture = self.cache.get(path, rel)
        if not isinstance(fixture, Rows):
            raise FixtureProblem("is not a JSONL file of rows", rel)
        return fixture.all_rows(tuple(required))

    def href(self, rel: str, line: int | None) -> str:
        """Site-root-relative URL of the published fixture (its line view when there is a line)."""
        if rel.startswith("../"):
            return ""
        if line is not None:
            self.used[rel] = True
            return source_href(rel, line)
        if Path(rel).suffix.lower() in VIEWABLE:
            self.used[rel] = True
            return source_href(rel, view=True)
        self.used.setdefault(rel, False)
        return source_href(rel)

    # -- references --------------------------------------------------------------------------
    def resolve(self, text: str) -> Resolved:
        """A reference's value with its receipt (the text between the braces)."""
        return self.resolve_ref(parse_ref(text))

    def resolve_ref(self, ref: Ref) -> Resolved:
        """A parsed reference's value with its receipt."""
        path, rel = self.locate(ref.file)
        fixture = self.cache.get(path, rel)
        if isinstance(fixture, Structured):
            resolved, rows = self._structured(fixture, ref)
        elif isinstance(fixture, Rows):
            resolved, rows = self._rows(fixture, ref)
        else:
            resolved, rows = self._prose(fixture, ref), None
        if ref.computed:
            if rows is None:
                raise FixtureProblem("aggregate stages need rows: a JSONL file or a block (object or array)",
                                     resolved.location)
            return self._compute(ref, rel, resolved, rows)
        if resolved.value is None:
            raise FixtureProblem("holds null, not a value", resolved.location)
        return _with_format(resolved, ref)

    def _structured(self, fx: Structured, ref: Ref):
        line = ref.line
        if line is not None and line > fx.line_count:
            raise FixtureProblem(f"line {line} is out of range: the file has {fx.line_count} lines", fx.rel)
        if ref.key:
            entry = _find(fx, ref.key)
            if entry is None:
                raise FixtureProblem(f"no key path {key_text(ref.key)!r}{_near(fx, ref.key)}",
                                     f"{fx.rel}:{_nearest_line(fx, ref.key)}" if _nearest_line(fx, ref.key) else fx.rel)
            if line is not None and entry.line != line:
                here = ", ".join(repr(key_text(e.path)) for e in fx.by_line.get(line, [])) or "no key"
                raise FixtureProblem(
                    f"line {line} holds {here}, not {key_text(ref.key)!r}, which is now at line {entry.line}:"
                    f" update the reference", f"{fx.rel}:{line}")
        elif line is not None:
            entries = fx.by_line.get(line, [])
            if not entries:
                raise FixtureProblem("line holds no value" + _show_line(fx, line), f"{fx.rel}:{line}")
            depth = min(len(e.path) for e in entries)
            top = [e for e in entries if len(e.path) == depth]
            if len(top) > 1:
                keys = ", ".join(repr(key_text(e.path)) for e in top)
                raise FixtureProblem(f"line holds several values ({keys}): add #KEY to choose one",
                                     f"{fx.rel}:{line}")
            entry = top[0]
        else:
            if not ref.computed:
                raise FixtureProblem("name a line (FILE:LINE) or a key path (FILE#KEY) of a JSON/YAML file", fx.rel)
            entry = fx.by_path[()]
        if not ref.computed:
            _check_tree(fx, entry)
        resolved = Resolved(entry.value, fx.rel, entry.line if (line or entry.path) else None,
                            ref.text, self.href(fx.rel, entry.line if (line or entry.path) else None),
                            items=self._items(fx, entry, ref) if entry.block else ())
        rows = _block_rows(fx, entry) if entry.block else None
        return resolved, rows

    def _items(self, fx: Structured, entry, ref: Ref) -> tuple:
        out = []
        for child in fx.children(entry.path):
            expr = f"{ref.file}:{child.line}#{key_text(child.path)}"
            out.append((child.path[-1], Resolved(child.value, fx.rel, child.line, expr,
                                                 self.href(fx.rel, child.line), ref.spec, ref.minus,
                                                 self._items(fx, child, ref) if child.block else ())))
        return tuple(out)

    def _rows(self, fx: Rows, ref: Ref):
        if ref.line is None:
            if ref.key:
                raise FixtureProblem("a JSONL file has no key paths: use FILE:LINE#FIELD, or aggregate stages", fx.rel)
            if not ref.computed:
                raise FixtureProblem("a JSONL file needs an aggregate stage (count, mean FIELD, ...) or a :LINE", fx.rel)
            return Resolved(None, fx.rel, None, ref.text, self.href(fx.rel, None)), fx
        if ref.line > fx.line_count:
            raise FixtureProblem(f"line {ref.line} is out of range: the file has {fx.line_count} lines", fx.rel)
        row = fx.row_at(ref.line)
        where = f"{fx.rel}:{ref.line}"
        if row is None:
            raise FixtureProblem("line holds no value (it is blank)", where)
        value = {k: v for k, v in row.items() if k != "_line"}
        for key in ref.key:
            if isinstance(value, dict) and str(key) in value:
                value = value[str(key)]
            elif isinstance(value, list) and isinstance(key, int) and key < len(value):
                value = value[key]
            else:
                raise FixtureProblem(f"row has no key path {key_text(ref.key)!r}", where)
        _check_finite_tree(value, where)
        href = self.href(fx.rel, ref.line)
        if isinstance(value, dict):
            items = tuple((k, Resolved(v, fx.rel, ref.line, f"{ref.file}:{ref.line}#{k}", href, ref.spec, ref.minus))
                          for k, v in value.items())
            return Resolved(value, fx.rel, ref.line, ref.text, href, items=items), [dict(value, _line=ref.line)]
        return Resolved(value, fx.rel, ref.line, ref.text, href), None

    def _prose(self, fx: Prose, ref: Ref) -> Resolved:
        if ref.line is None:
            raise FixtureProblem("name a line of a Markdown/text fixture (FILE:LINE)", fx.rel)
        if ref.line > fx.line_count:
            raise FixtureProblem(f"line {ref.line} is out of range: the file has {fx.line_count} lines", fx.rel)
        where = f"{fx.rel}:{ref.line}"
        numbers = fx.numbers(ref.line)
        if not numbers:
            raise FixtureProblem("line holds no number" + _show_text(fx.lines[ref.line - 1]), where)
        if ref.key:
            if len(ref.key) != 1 or not isinstance(ref.key[0], int) or ref.key[0] >= len(numbers):
                raise FixtureProblem(
                    f"#{ref.key_text}: on a prose line, #N picks the N-th number counting from 0"
                    f" (this line has {len(numbers)})", where)
            number = numbers[ref.key[0]]
        elif len(numbers) > 1:
            listed = ", ".join(n.text for n in numbers)
            raise FixtureProblem(f"line holds {len(numbers)} numbers ({listed}): add #0..#{len(numbers) - 1} to choose one",
                                 where)
        else:
            number = numbers[0]
        return Resolved(number.value, fx.rel, ref.line, ref.text, self.href(fx.rel, ref.line))

    def _compute(self, ref: Ref, rel: str, base: Resolved, rows) -> Resolved:
        context = "match " + " and ".join(c.text() for c in ref.where) if ref.where else "in the source"
        origin = " ".join(([f"line {ref.line}"] if ref.line else []) + ([f"key {ref.key_text}"] if ref.key else []))
        lead = (origin,) if origin else ()
        expression = " | ".join(lead + ref.stages)
        href = base.href or self.href(rel, None)
        if isinstance(rows, Rows):   # a whole JSONL file: pages of one site ask the same aggregates again
            key = (tuple(c.text() for c in ref.where), ref.group, ref.aggregate.text())
            values = rows.remember(key, lambda: _aggregate_values(rel, rows, ref, context), between_builds=True)
        else:
            values = _aggregate_values(rel, rows, ref, context)
        if ref.group is None:
            return Resolved(values, rel, None, expression, href, ref.spec, ref.minus)
        items = []
        for group_value, value in values:
            where = " | ".join(lead + tuple(f"where {c.text()}" for c in ref.where)
                               + (f"where {ref.group} == {group_value}", ref.aggregate.text()))
            items.append((group_value, Resolved(value, rel, None, where, href, ref.spec, ref.minus)))
        return Resolved({str(k): r.value for k, r in items}, rel, None, expression, href, ref.spec, ref.minus,
                        tuple(items))


def _aggregate_values(rel: str, rows, ref: Ref, context: str):
    """The value of a reference's aggregate stages over `rows`: one value, or [(group, value)]."""
    picked = filter_rows(rel, rows, ref.where)
    if ref.group is None:
        return aggregate(rel, picked, ref.aggregate, context)
    agg = ref.aggregate
    keep = tuple(f for f in (agg.field, agg.condition.field if agg.condition else None) if f)
    return [(group_value, aggregate(rel, group, agg, context))
            for group_value, group in group_rows(rel, picked, ref.group, keep)]


def _with_format(resolved: Resolved, ref: Ref) -> Resolved:
    if not ref.has_fmt:
        return resolved
    items = tuple((k, _reformat(r, ref)) for k, r in resolved.items)
    return Resolved(resolved.value, resolved.source, resolved.line, resolved.expression, resolved.href,
                    ref.spec, ref.minus, items)


def _reformat(resolved: Resolved, ref: Ref) -> Resolved:
    items = tuple((k, _reformat(r, ref)) for k, r in resolved.items)
    return Resolved(resolved.value, resolved.source, resolved.line, resolved.expression, resolved.href,
                    ref.spec, ref.minus, items)


def find_entry(fx: Structured, key: tuple):
    """The entry of a parsed fixture at a key path (None when there is none), as FILE#KEY reads it."""
    return _find(fx, key)


def _find(fx: Structured, key: tuple):
    """The entry at a key path; a segment of digits names a list index, or an object's key "0"."""
    path: tuple = ()
    for segment in key:
        entry = fx.by_path.get(path)
        if entry is None:
            return None
        if isinstance(entry.value, dict):
            segment = str(segment)
        elif not isinstance(segment, int):
            return None
        path += (segment,)
    return fx.by_path.get(path)


def _check_tree(fx: Structured, entry) -> None:
    """Refuse NaN/Infinity (YAML `.nan`) anywhere in the value, naming the line it sits on."""
    if isinstance(entry.value, float) and not math.isfinite(entry.value):
        raise FixtureProblem(f"value is {entry.value!r}, not a finite number", f"{fx.rel}:{entry.line}")
    for child in fx.children(entry.path):
        _check_tree(fx, child)


def _check_finite_tree(value, where: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise FixtureProblem(f"value is {value!r}, not a finite number", where)
    for child in value.values() if isinstance(value, dict) else value if isinstance(value, list) else ():
        _check_finite_tree(child, where)


def _block_rows(fx: Structured, entry) -> list[dict]:
    """A block as rows: an object's entries become {key, value} (or {key, **fields}); an array's items."""
    rows = []
    for child in fx.children(entry.path):
        if isinstance(child.value, dict):
            row = dict(child.value)
        else:
            row = {"value": child.value}
        if isinstance(entry.value, dict):
            row = {"key": child.path[-1], **row}
        row["_line"] = child.line
        rows.append(row)
    return rows


def _nearest_line(fx: Structured, path: tuple) -> int | None:
    for cut in range(len(path) - 1, 0, -1):
        entry = fx.by_path.get(path[:cut])
        if entry is not None:
            return entry.line
    return None


def _near(fx: Structured, path: tuple) -> str:
    for cut in range(len(path) - 1, -1, -1):
        entry = fx.by_path.get(path[:cut])
        if entry is not None and isinstance(entry.value, (dict, list)):
            keys = list(entry.value) if isinstance(entry.value, dict) else [f"0..{len(entry.value) - 1}"]
            shown = ", ".join(str(k) for k in keys[:8]) + (", ..." if len(keys) > 8 else "")
            where = f"under {key_text(path[:cut])!r}" if cut else "at the top level"
            return f" ({where} the keys are: {shown})"
    return ""


def _show_line(fx: Structured, line: int) -> str:
    return _show_text(fx.lines[line - 1]) if line <= len(fx.lines) else ""


def _show_text(text: str) -> str:
    text = text.strip()
    return f": {text[:60]!r}" if text else " (it is blank)"
