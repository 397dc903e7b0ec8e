"""Bounded parsing of every JSON and YAML text the build reads (fixtures, front matter, site.yaml,
table and figure blocks), and the one place a parse error becomes a line number.

Bounds, so that no input can hang the build or exhaust memory:
- a size limit on the text (`MAX_BYTES`);
- a nesting limit (`MAX_DEPTH`), checked while composing, before Python's own recursion limit;
- a node budget (`MAX_NODES`) that counts an alias as everything it expands to, so a ten-line
  alias bomb is refused as soon as its expansion passes the budget;
- duplicate keys are an error (a JSON reader keeps the last value silently; a receipt must not
  point at a line whose value the page does not show).
"""
from __future__ import annotations

import json

import yaml

from .errors import BuildError

MAX_BYTES = 16 * 1024 * 1024
MAX_DEPTH = 100
MAX_NODES = 200_000


class ParseProblem(BuildError):
    """A text that does not parse within the bounds; `line` is 1-based within the text (or None)."""

    def __init__(self, message: str, line: int | None = None):
        self.line = line
        super().__init__(message, f"line {line}" if line else "")


def _mark_line(exc: yaml.YAMLError, first_line: int) -> int | None:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    return mark.line + first_line if mark is not None else None


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader whose composer counts nodes (aliases expanded) and nesting."""

    def __init__(self, text: str, first_line: int = 1):
        super().__init__(text)
        self._offset = first_line   # file line of the text's first line: every line reported is a file line
        self._depth = 0
        self._sizes: dict[int, tuple[int, int]] = {}   # id(node) -> (expanded nodes, expanded depth)

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            return super().compose_node(parent, index)   # already measured when it was composed
        start = self.peek_event().start_mark
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise ParseProblem(f"nested deeper than {MAX_DEPTH} levels", start.line + self._offset)
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        self._measure(node)
        return node

    def _measure(self, node) -> None:
        if isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = node.value
        else:
            children = []
        sizes = [self._sizes.get(id(c), (1, 1)) for c in children]
        size = 1 + sum(s for s, _ in sizes)
        depth = 1 + max((d for _, d in sizes), default=0)
        if size > MAX_NODES:
            raise ParseProblem(f"expands to more than {MAX_NODES:,} values (aliases counted as what they repeat)",
                               node.start_mark.line + self._offset)
        if depth > MAX_DEPTH:
            raise ParseProblem(f"nested deeper than {MAX_DEPTH} levels (through aliases)",
                               node.start_mark.line + self._offset)
        self._sizes[id(node)] = (size, depth)
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for key_node, _ in node.value:
                if isinstance(key_node, yaml.ScalarNode):
                    key = (key_node.tag, key_node.value)
                    if key in seen:
                        raise ParseProblem(f"duplicate key {key_node.value!r} (first at line {seen[key]}): "
                                           "a reader keeps only one of them", key_node.start_mark.line + self._offset)
                    seen[key] = key_node.start_mark.line + self._offset


def _check_size(text: str) -> None:
    if len(text) > MAX_BYTES:
        raise ParseProblem(f"is {len(text) / 1e6:.1f} MB: JSON and YAML are read up to {MAX_BYTES // 2**20} MiB")


_FAST = getattr(yaml, "CSafeLoader", None)   # libyaml's parser, where PyYAML was built with it


def _fast_compose(text: str):
    """(node tree, loader) by libyaml, about ten times faster, for a text that cannot reach the
    bounds and has no duplicate key; None for any other text, which the bounded composer then
    reads, refusing it with the same message and line as always. libyaml's event stream is read
    first (an iterative parser: no input can make it recurse) and must show no anchor or alias,
    collections nested less than MAX_DEPTH deep and fewer than MAX_NODES nodes; only then does
    libyaml's composer, which recurses once a level, build the tree. A text with fewer than
    MAX_DEPTH indicator characters and no anchor or alias mark skips that first reading (it was
    once the only kind of text taken here; no glossary or record is one)."""
    if _FAST is None or len(text) >= MAX_NODES:
        return None
    # a text with no anchor or alias mark and fewer indicator characters than MAX_DEPTH (front
    # matter, a block) cannot reach the bounds: no need to read its events first
    small = "&" not in text and "*" not in text and sum(map(text.count, "[{-:?")) < MAX_DEPTH
    if not small and not _within_bounds_events(text):
        return None
    loader = _FAST(text)
    try:
        node = loader.get_single_node()
    except yaml.YAMLError:
        loader.dispose()
        return None
    if node is not None and _has_duplicate_key(node):
        loader.dispose()
        return None
    return node, loader


_OPEN = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
_CLOSE = (yaml.MappingEndEvent, yaml.SequenceEndEvent)


def _within_bounds_events(text: str) -> bool:
    """Whether libyaml parses `text` into events with no anchor or alias, collections nested
    less than MAX_DEPTH deep and fewer than MAX_NODES nodes (False for a text it cannot parse)."""
    depth = nodes = 0
    try:
        for event in yaml.parse(text, Loader=_FAST):
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
                return False
            if isinstance(event, _OPEN):
                depth += 1
                if depth >= MAX_DEPTH:   # its scalars would be one deeper
                    return False
            elif isinstance(event, _CLOSE):
                depth -= 1
                continue
            elif not isinstance(event, yaml.ScalarEvent):
                continue
            nodes += 1
            if nodes >= MAX_NODES:
                return False
    except yaml.YAMLError:
        return False
    return True


def _has_duplicate_key(root) -> bool:
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, yaml.MappingNode):
            keys = [(k.tag, k.value) for k, _ in node.value if isinstance(k, yaml.ScalarNode)]
            if len(keys) != len(set(keys)):
                return True
            stack.extend(n for pair in node.value for n in pair)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
    return False


def compose(text: str, first_line: int = 1):
    """(node tree, loader) of a YAML (or JSON) text within the bounds; raises ParseProblem.
    `first_line` is the file line the text starts on (front matter and blocks start below it)."""
    _check_size(text)
    fast = _fast_compose(text)
    if fast is not None:
        return fast
    loader = _BoundedLoader(text, first_line)
    try:
        return loader.get_single_node(), loader
    except yaml.YAMLError as exc:
        raise ParseProblem(f"not valid YAML: {getattr(exc, 'problem', None) or exc}",
                           _mark_line(exc, first_line)) from None
    except RecursionError:
        raise ParseProblem(f"nested deeper than {MAX_DEPTH} levels") from None


def load_yaml(text: str, first_line: int = 1):
    """(value, node) of a YAML text; node is None for an empty text. Raises ParseProblem naming
    file lines (the text starts on line `first_line`)."""
    node, loader = compose(text, first_line)
    if node is None:
        return None, None
    try:
        return loader.construct_document(node), node
    except yaml.YAMLError as exc:
        raise ParseProblem(f"not valid YAML: {getattr(exc, 'problem', None) or exc}",
                           _mark_line(exc, first_line)) from None
    finally:
        loader.dispose()


def _no_duplicates(pairs):
    out = {}
    for key, value in pairs:
        if key in out:
            raise ParseProblem(f"duplicate key {key!r}: a reader keeps only one of them")
        out[key] = value
    return out


_DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicates)   # one for all: json.loads makes one per call


def json_value(text: str):
    """One JSON value (a JSONL row, or a whole file); duplicate keys and deep nesting refused.
    NaN parses (refused where a reference uses it, so one NaN does not block a file's other values)."""
    try:
        return _DECODER.decode(text)
    except RecursionError:
        raise ParseProblem("nested too deeply to read") from None
    except ValueError as exc:
        if isinstance(exc, ParseProblem):
            raise
        raise ParseProblem(f"not valid JSON: {exc.msg if hasattr(exc, 'msg') else exc}",
                           getattr(exc, "lineno", None)) from None


def load_json(text: str):
    """(value, node) of a JSON text: the value from `json` (numbers keep their exact type), the
    positions from the bounded YAML composer (JSON is YAML). Raises ParseProblem."""
    _check_size(text)
    try:
        value = json_value(text)
    except ParseProblem as problem:
        if problem.line is None:
            compose(text)   # a duplicate key or deep nesting: the composer names its line
        raise
    if _exceeds_bounds(value):
        compose(text)   # the bounded composer refuses it and names the line
    return value, _json_positions(text)


def _exceeds_bounds(value) -> bool:
    """Whether a parsed JSON value holds more than MAX_NODES values or nests deeper than MAX_DEPTH
    (JSON has no aliases, so its parsed value is exactly what the composer would count)."""
    count, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        count += 1
        if count > MAX_NODES or depth > MAX_DEPTH:
            return True
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
            count += len(item)   # the keys are nodes too
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return False


def _json_positions(text: str):
    """The node tree (for file lines) of a JSON text `json` has already accepted within the bounds.
    libyaml's composer does it about ten times faster than PyYAML's; the bounded composer is the
    fallback, and names the line of anything YAML reads differently from JSON."""
    if _FAST is not None:
        try:
            return yaml.compose(text, Loader=_FAST)
        except yaml.YAMLError:
            pass
    node, loader = compose(text)
    loader.dispose()
    return node


def key_lines(node, first_line: int = 1) -> dict:
    """{key: file line} of a mapping node's keys (the text starts on line `first_line`)."""
    if not isinstance(node, yaml.MappingNode):
        return {}
    return {str(k.value): k.start_mark.line + first_line for k, _ in node.value}
