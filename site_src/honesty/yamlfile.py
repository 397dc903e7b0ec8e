"""Reading one small YAML record (a registration, a reproduction) with the line of every key.

It goes through the build's bounded parser (site_src/parse.py: size, depth and node budgets,
duplicate keys refused), and a record is held to more: a few dozen lines, so anything far larger
is refused, and no anchor or alias, since a record spells every value out.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from ..errors import BuildError, BuildErrors
from ..parse import ParseProblem, load_yaml

MAX_BYTES = 256 * 1024
MAX_EVENTS = 20_000


@dataclass(frozen=True)
class Record:
    rel: str              # repository-relative path, for messages
    text: str
    data: dict
    lines: dict           # key path tuple -> 1-based line of its key (or of the item)

    def where(self, *path) -> str:
        """`file:line` of a key path, falling back to its nearest enclosing key, then line 1."""
        while path and path not in self.lines:
            path = path[:-1]
        return f"{self.rel}:{self.lines.get(path, 1)}"

    def check_fields(self, fields: tuple, unknown: str, missing: str) -> None:
        """Refuse a key outside `fields` and a field that is absent, naming the line: every one of
        them at once (BuildErrors); the messages end with `unknown` and `missing` (what the record
        kind expects)."""
        problems = [BuildError(f"unknown field {key!r}{unknown}", self.where(str(key)))
                    for key in self.data if key not in fields]
        problems += [BuildError(f"lacks {key!r}{missing}", self.where()) for key in fields if key not in self.data]
        if problems:
            raise BuildErrors(problems)


def record_files(root: Path, folder: Path, named, name_rule: str, refusal, errors, skip: tuple = ()):
    """(path, repository-relative path) of each record file in `folder`, in name order.

    Hidden files and folders, and the names in `skip`, are passed over; a file whose name `named`
    rejects, or that the path policy's `refusal(rel)` refuses, is a build error (`name_rule` says
    how records are named)."""
    for path in sorted(folder.iterdir()):
        if path.name.startswith(".") or path.name in skip or path.is_dir():
            continue
        rel = path.relative_to(root).as_posix()
        if not named(path.name):
            errors.add(BuildError(name_rule, rel))
            continue
        refused = refusal(rel)
        if refused:
            errors.add(BuildError(refused, rel))
            continue
        yield path, rel


def load_record(path: Path, rel: str) -> Record:
    """Parse `path` as a YAML mapping; raises BuildError naming `rel` and the line."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise BuildError(f"cannot read: {exc.strerror}", rel) from None
    if len(raw) > MAX_BYTES:
        raise BuildError(f"is {len(raw):,} bytes; a record may hold at most {MAX_BYTES:,}", rel)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BuildError(f"is not UTF-8 text (byte {exc.start})", rel) from None
    try:
        for count, event in enumerate(_events(text)):
            if count > MAX_EVENTS:
                raise BuildError(f"has more than {MAX_EVENTS:,} YAML nodes; a record is small", rel)
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                raise BuildError("uses a YAML anchor or alias; a record spells every value out",
                                 f"{rel}:{event.start_mark.line + 1}")
        data, node = load_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise BuildError(f"is not valid YAML: {getattr(exc, 'problem', None) or exc}",
                         f"{rel}:{mark.line + 1}" if mark else rel) from None
    except ParseProblem as exc:
        raise BuildError(exc.message, f"{rel}:{exc.line}" if exc.line else rel) from None
    if not isinstance(data, dict) or not isinstance(node, yaml.MappingNode):
        raise BuildError("must be a YAML mapping of fields", f"{rel}:1")
    lines: dict = {}
    _index(node, (), lines)
    return Record(rel, text, data, lines)


_FAST = getattr(yaml, "CSafeLoader", None)


def _events(text: str):
    """The YAML events of `text`: libyaml's (about ten times faster) when it parses the whole text,
    else PyYAML's, whose error message and line are the ones a record's author has always seen."""
    if _FAST is not None:
        try:
            return list(yaml.parse(text, Loader=_FAST))
        except yaml.YAMLError:
            pass
    return yaml.parse(text, Loader=yaml.SafeLoader)


def _index(node, path: tuple, lines: dict) -> None:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            sub = path + (str(key.value),)
            lines[sub] = key.start_mark.line + 1
            _index(value, sub, lines)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            lines[path + (index,)] = item.start_mark.line + 1
            _index(item, path + (index,), lines)
