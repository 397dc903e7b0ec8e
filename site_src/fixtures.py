"""Reading committed fixtures, with the line every value sits on.

JSON and YAML files are parsed for their values (JSON with `json`, so numbers keep their exact
type) and composed with PyYAML for positions: JSON is YAML, and `yaml.compose` keeps the start
line of every key and value. Markdown and plain-text files are read line by line. JSONL files
become rows, each remembering its line.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import yaml

from .errors import FixtureProblem
from .numbers import find_numbers

STRUCTURED = (".json", ".yaml", ".yml")
PROSE = (".md", ".markdown", ".txt")
ROWS = (".jsonl",)


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
            if suffix == ".json":
                # NaN parses here; it is refused where a reference uses it (resolve._check_tree),
                # so one NaN elsewhere in a file does not block the file's other values.
                self.data = json.loads(text)
            else:
                self.data = yaml.safe_load(text)
        except ValueError as exc:
            line = getattr(exc, "lineno", None)
            raise FixtureProblem(f"does not parse: {exc}", f"{rel}:{line}" if line else rel) from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            raise FixtureProblem(f"does not parse: {exc}",
                                 f"{rel}:{mark.line + 1}" if mark else rel) from None
        try:
            root = yaml.compose(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            raise FixtureProblem(f"cannot locate lines (YAML view of the file failed: {exc})",
                                 f"{rel}:{mark.line + 1}" if mark else rel) from None
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
        return find_numbers(self.lines[line - 1])


class Rows:
    """A JSONL fixture: one object per line; every row keeps its line as `_line`."""

    def __init__(self, rel: str, text: str):
        self.rel = rel
        self.rows: list[dict] = []
        lines = text.split("\n")
        if text.endswith("\n"):
            lines.pop()
        self.line_count = len(lines)
        for number, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            try:
                row = json.loads(raw)  # NaN is refused where a stage or reference reads it
            except ValueError as exc:
                raise FixtureProblem(f"row does not parse as JSON ({exc})", f"{rel}:{number}") from None
            if not isinstance(row, dict):
                raise FixtureProblem("row is not a JSON object", f"{rel}:{number}")
            row["_line"] = number
            self.rows.append(row)

    def row_at(self, line: int) -> dict | None:
        for row in self.rows:
            if row["_line"] == line:
                return row
        return None


def load(path: Path, rel: str):
    """Read a fixture by its suffix; raises FixtureProblem naming the file (and line)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FixtureProblem("file not found", rel) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise FixtureProblem(f"cannot read: {exc}", rel) from None
    suffix = path.suffix.lower()
    if suffix in STRUCTURED:
        return Structured(rel, text, suffix)
    if suffix in ROWS:
        return Rows(rel, text)
    if suffix in PROSE:
        return Prose(rel, text)
    raise FixtureProblem(
        f"unsupported fixture type {suffix or '(none)'}: use .json, .yaml, .yml, .jsonl, .md or .txt", rel)


class FixtureCache:
    """Each fixture is read once per build."""

    def __init__(self) -> None:
        self._cache: dict[Path, object] = {}

    def get(self, path: Path, rel: str):
        if path not in self._cache:
            try:
                self._cache[path] = load(path, rel)
            except FixtureProblem as exc:
                self._cache[path] = exc
        value = self._cache[path]
        if isinstance(value, FixtureProblem):
            raise value
        return value
