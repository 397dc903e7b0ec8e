"""Reading committed fixtures, with the line every value sits on.

JSON and YAML files are parsed for their values (JSON with `json`, so numbers keep their exact
type) and composed with PyYAML for positions: JSON is YAML, and `yaml.compose` keeps the start
line of every key and value. Markdown and plain-text files are read line by line. JSONL files
become rows, each remembering its line.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import sys

from dataclasses import dataclass
from pathlib import Path

import yaml

from .errors import FixtureProblem
from .numbers import find_numbers
from .parse import MAX_BYTES, ParseProblem, json_value, load_json, load_yaml

STRUCTURED = (".json", ".yaml", ".yml")
PROSE = (".md", ".markdown", ".txt")
ROWS = (".jsonl",)
KEEP_BYTES = 16 * 2**20  # JSONL files up to this size are parsed once per build (see Rows)
KEPT_AGGREGATES = Path(".cache") / "aggregates"   # KeptAggregates


@dataclass(frozen=True)
class Entry:
    """One value of a structured fixture: its key path, the line its key sits on, its value."""

    path: tuple
    line: int
    value: object
    block: bool


class Structured:
    """A JSON or YAML fixture: its value tree and an index of entries by path and by line."""

    def __init__(self, rel: str, text: str, suffix: str):
        self.rel = rel
        self.lines = text.split("\n")
        if text.endswith("\n"):
            self.lines.pop()
        self.line_count = len(self.lines)
        try:
            # JSON values come from `json` (numbers keep their exact type), positions from the
            # bounded composer; NaN parses here and is refused where a reference uses it
            # (resolve._check_tree), so one NaN elsewhere does not block the file's other values.
            self.data, root = (load_json if suffix == ".json" else load_yaml)(text)
        except ParseProblem as exc:
            raise FixtureProblem(f"does not parse: {exc.message}",
                                 f"{rel}:{exc.line}" if exc.line else rel) from None
        self.by_path: dict[tuple, Entry] = {}
        self.by_line: dict[int, list[Entry]] = {}
        if root is not None:
            # the root counts as a line's value only where it is opened by its own bracket
            self._walk(root, self.data, (), root.start_mark.line + 1, index_self=bool(root.flow_style))

    def _add(self, entry: Entry) -> None:
        self.by_path[entry.path] = entry
        self.by_line.setdefault(entry.line, []).append(entry)

    def _walk(self, node, value, path: tuple, line: int, index_self: bool = True) -> None:
        block = isinstance(node, (yaml.MappingNode, yaml.SequenceNode))
        entry = Entry(path, line, value, block)
        if index_self:
            self._add(entry)
        else:
            self.by_path[path] = entry
        if isinstance(node, yaml.MappingNode) and isinstance(value, dict):
            by_text = {str(k): k for k in value}
            for key_node, value_node in node.value:
                key = by_text.get(str(key_node.value), key_node.value)
                if key not in value:
                    continue
                self._walk(value_node, value[key], path + (str(key),), key_node.start_mark.line + 1)
        elif isinstance(node, yaml.SequenceNode) and isinstance(value, list):
            for index, (item_node, item) in enumerate(zip(node.value, value)):
                self._walk(item_node, item, path + (index,), item_node.start_mark.line + 1)

    def children(self, path: tuple) -> list[Entry]:
        """The entries directly under a key path, in file order."""
        entry = self.by_path[path]
        if isinstance(entry.value, dict):
            return [self.by_path[path + (str(k),)] for k in entry.value]
        if isinstance(entry.value, list):
            return [self.by_path[path + (i,)] for i in range(len(entry.value))]
        return []


class Prose:
    """A Markdown or plain-text fixture: a value is a number parsed out of one line."""

    def __init__(self, rel: str, text: str):
        self.rel = rel
        self.lines = text.split("\n")
        if text.endswith("\n"):
            self.lines.pop()
        self.line_count = len(self.lines)

    def numbers(self, line: int):
        """The numbers on one line of the text, in order."""
        return find_numbers(self.lines[line - 1])


class Rows:
    """A JSONL fixture, read as a stream: one object per line, each row keeping its line as `_line`.

    A file of at most KEEP_BYTES is parsed once and its rows kept for the rest of the build: a
    study page makes dozens of aggregate references into the same few files, and re-parsing each
    file per reference was most of a page's render time. A larger file is parsed each time it is
    iterated, never held all at once, so an aggregate over a file of hundreds of MB needs memory
    for the values it uses only. Kept rows are handed out as copies, so no reader can change
    what the next one sees. A file without a single row is refused: it could only give a count
    of 0 or an empty figure.
    """

    def __init__(self, path: Path, rel: str, kept: KeptAggregates | None = None):
        self.path, self.rel, self.kept_aggregates = path, rel, kept
        self._kept: list[dict] | None = None
        self._remembered: dict = {}
        self.line_count = 0
        has_row = False
        with open(path, "rb") as handle:
            for raw in handle:
                self.line_count += 1
                has_row = has_row or bool(raw.strip())
        if not has_row:
            raise FixtureProblem("has no rows: an empty JSONL file would show a count of 0 or an empty figure", rel)

    def _keep(self) -> list[dict] | None:
        """The parsed rows of a file small enough to keep (parsed on first use); None otherwise."""
        if self._kept is None and self.path.stat().st_size <= KEEP_BYTES:
            self._kept = list(self._parse())
        return self._kept

    def __iter__(self):
        kept = self._keep()
        if kept is None:
            yield from self._parse()
        else:
            for row in kept:
                yield dict(row)

    def remember(self, key, compute, between_builds: bool = False):
        """`compute()`, once per build for each `key` (an aggregate's stages): the rows do not change
        within a build, so neither does what is computed from them. A refusal is remembered too.
        With `between_builds` (an aggregate's value: a number, or [group, number] pairs), a value
        is also kept in .cache/aggregates/ for later builds of the same file (KeptAggregates)."""
        if key not in self._remembered:
            kept = self.kept_aggregates if between_builds else None
            found = kept.get(self.path, key) if kept is not None else None
            if found is not None:
                self._remembered[key] = (True, found[0])
            else:
                try:
                    value = compute()
                except FixtureProblem as exc:
                    self._remembered[key] = (False, exc)
                else:
                    self._remembered[key] = (True, value)
                    if kept is not None:
                        kept.put(self.path, key, value)
        ok, value = self._remembered[key]
        if not ok:
            raise value
        return value

    def all_rows(self, required: tuple = ()) -> list[dict]:
        """Every row, parsed once and shared, for readers that only read (the figures); each row
        must hold the `required` fields as finite values (checked once per build)."""
        kept = self._keep()
        rows = kept if kept is not None else list(self._parse())
        return self.remember(("rows", required), lambda: _holding(rows, required, self.rel))

    def _parse(self):
        with open(self.path, "rb") as handle:
            for number, raw in enumerate(handle, start=1):
                if raw.strip():
                    yield self._row(raw, number)

    def _row(self, raw: bytes, number: int) -> dict:
        try:
            row = json_value(raw.decode("utf-8"))  # NaN is refused where a stage or reference reads it
        except UnicodeDecodeError as exc:
            raise FixtureProblem(f"row is not UTF-8 ({exc.reason})", f"{self.rel}:{number}") from None
        except ParseProblem as exc:
            raise FixtureProblem(f"row does not parse as JSON ({exc.message})", f"{self.rel}:{number}") from None
        if not isinstance(row, dict):
            raise FixtureProblem("row is not a JSON object", f"{self.rel}:{number}")
        row["_line"] = number
        return row

    def row_at(self, line: int) -> dict | None:
        """The row on line `line` of the file (None for a blank line)."""
        with open(self.path, "rb") as handle:
            for number, raw in enumerate(handle, start=1):
                if number == line:
                    return self._row(raw, number) if raw.strip() else None
        return None


def _holding(rows: list[dict], required: tuple, rel: str) -> list[dict]:
    for row in rows:
        for name in required:
            if name not in row:
                raise FixtureProblem(f"row lacks the field {name!r}", f"{rel}:{row['_line']}")
            value = row[name]
            if isinstance(value, float) and not math.isfinite(value):
                raise FixtureProblem(f"field {name!r} is {value!r}, not a finite number", f"{rel}:{row['_line']}")
    return rows


class KeptAggregates:
    """Aggregates over JSONL files kept between builds in ROOT/.cache/aggregates/, one JSON file for
    each fixture's sha256 and the generator's code: an edit of a page showing "the mean margin"
    of a 600 KB file reads one number there instead of parsing every row again. Only values that
    read back from JSON exactly as they are (numbers, and lists of [group, number]) are kept; a
    refusal never is. Anything unreadable only means the value is computed again; deleting
    .cache/ is always safe. New values are written by `save()`, once a build has made them."""

    CODE = ("site_src", "safe_io", "bundle_kit")   # what computes a value, read as verdict_cache does
    KEEP_FILES = 256

    def __init__(self, root: Path):
        self.folder = Path(root) / KEPT_AGGREGATES
        self._code: str | None = None
        self._files: dict[Path, tuple[str, dict]] = {}   # fixture -> (its cache file's name, values)
        self._changed: set[Path] = set()

    def _code_digest(self) -> str:
        if self._code is None:
            here = Path(__file__).resolve().parents[1]
            digest = hashlib.sha256(sys.version.encode())
            for name in self.CODE:
                for where, dirs, names in sorted(os.walk(here / name)):
                    dirs.sort()
                    for file in sorted(names):
                        if file.endswith(".py"):
                            digest.update(f"{where}/{file}\0".encode())
                            with open(os.path.join(where, file), "rb") as handle:
                                digest.update(handle.read())
            self._code = digest.hexdigest()
        return self._code

    def _values(self, path: Path) -> dict:
        if path not in self._files:
            digest = hashlib.sha256(self._code_digest().encode())
            with open(path, "rb") as handle:
                while block := handle.read(1 << 20):
                    digest.update(block)
            name = digest.hexdigest() + ".json"
            try:
                values = json.loads((self.folder / name).read_text(encoding="utf-8"))
                values = values if isinstance(values, dict) else {}
            except (OSError, ValueError):
                values = {}
            self._files[path] = (name, values)
        return self._files[path][1]

    def get(self, path: Path, key) -> tuple | None:
        """(the value kept for `key` of the JSONL file at `path`,) or None when none is."""
        try:
            values = self._values(path)
        except OSError:
            return None
        text = json.dumps(key)
        return (values[text],) if text in values else None

    def put(self, path: Path, key, value) -> None:
        """Keep `value`, if it reads back from JSON equal to itself and of the same types."""
        try:
            text = json.dumps(value, allow_nan=False)
            values = self._values(path)
        except (TypeError, ValueError, OSError):
            return
        if _exactly(json.loads(text), value):
            values[json.dumps(key)] = json.loads(text)
            self._changed.add(path)

    def save(self) -> None:
        """Write the files that gained values (atomically; a failure only loses the cache), and
        remove the oldest files beyond KEEP_FILES (of fixtures or code long since changed)."""
        if self._changed:
            self._prune()
        for path in sorted(self._changed):
            name, values = self._files[path]
            try:
                self.folder.mkdir(parents=True, exist_ok=True)
                tmp = self.folder / f".{name}.{os.getpid()}.tmp"
                tmp.write_text(json.dumps(values, sort_keys=True), encoding="utf-8")
                os.replace(tmp, self.folder / name)
            except OSError:
                pass
        self._changed.clear()


    def _prune(self) -> None:
        try:
            files = sorted(os.scandir(self.folder), key=lambda entry: entry.stat().st_mtime_ns)
            for entry in files[:max(0, len(files) + len(self._changed) - self.KEEP_FILES)]:
                os.unlink(entry.path)
        except OSError:
            pass


def _exactly(back, value) -> bool:
    """Whether `back` (read back from JSON) is `value`, types included (a tuple reads back a list)."""
    if isinstance(value, (list, tuple)):
        return isinstance(back, list) and len(back) == len(value) and all(map(_exactly, back, value))
    return type(back) is type(value) and back == value


def load(path: Path, rel: str, kept: KeptAggregates | None = None):
    """Read a fixture by its suffix; raises FixtureProblem naming the file (and line)."""
    suffix = path.suffix.lower()
    if suffix not in STRUCTURED + ROWS + PROSE:
        raise FixtureProblem(
            f"unsupported fixture type {suffix or '(none)'}: use .json, .yaml, .yml, .jsonl, .md or .txt", rel)
    try:
        if suffix in ROWS:
            return Rows(path, rel, kept)
        if path.stat().st_size > MAX_BYTES:
            raise FixtureProblem(f"is {path.stat().st_size / 1e6:.1f} MB: JSON, YAML and prose fixtures are read up"
                                 f" to {MAX_BYTES // 2**20} MiB (JSONL files stream, without a limit)", rel)
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FixtureProblem("file not found", rel) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise FixtureProblem(f"cannot read: {exc}", rel) from None
    if suffix in STRUCTURED:
        return Structured(rel, text, suffix)
    return Prose(rel, text)


class FixtureCache:
    """Each fixture is read once per build. Given the site's root, aggregates over its JSONL files
    are also kept between builds (KeptAggregates, `save()` once the pages are made)."""

    def __init__(self, root: Path | None = None) -> None:
        self._cache: dict[Path, object] = {}
        self.kept_aggregates = KeptAggregates(root) if root is not None else None

    def save(self) -> None:
        """Write the aggregates this build computed, for the next one."""
        if self.kept_aggregates is not None:
            self.kept_aggregates.save()

    def get(self, path: Path, rel: str):
        """The fixture at `path`, read once per build; a problem reading it is raised again on every ask."""
        if path not in self._cache:
            try:
                self._cache[path] = load(path, rel, self.kept_aggregates)
            except FixtureProblem as exc:
                self._cache[path] = exc
        value = self._cache[path]
        if isinstance(value, FixtureProblem):
            raise value
        return value
