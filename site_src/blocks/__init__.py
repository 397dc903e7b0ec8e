"""The fenced blocks a page may hold: ```table, ```figure, ```findings and ```glossary. Each kind is
one module here with

    parse(values, lines, ctx, inline) -> its typed block, or None   (checked against schema.<KIND>_BLOCK)
    render(self, tokens, idx, options, env) -> HTML          (a markdown-it render rule)

and one schema entry in site_src/schema.py. The site plugin (site_src/markdown.py) turns a fence
whose info names a kind into a `<kind>_block` token carrying the block, parsed once when the page
is parsed; the kind's render rule draws it. Adding a kind: a module here, an entry in KINDS, a
schema entry.
"""
from __future__ import annotations

import yaml

from ..errors import BuildError
from ..parse import ParseProblem, load_yaml
from . import figure, findings, glossary, table
from .lines import Lines

KINDS = {"table": table, "figure": figure, "findings": findings, "glossary": glossary}


def parse(kind: str, body: str, line: int, ctx, inline):
    """The block of a ```KIND fence on page line `line`, parsed once and checked against its
    kind's schema: every problem is added to ctx.errors at its line. None when the body is not a
    YAML mapping, or lacks what the block cannot be made without. `inline(text, line)` parses a
    caption's Markdown."""
    try:
        values, node = load_yaml(body, first_line=line + 1)
    except ParseProblem as exc:
        ctx.errors.add(BuildError(f"{kind} block: {exc.message}", ctx.page.where(exc.line or line)))
        return None
    if not isinstance(values, dict):
        ctx.errors.add(BuildError(f"{kind} block must be a YAML mapping", ctx.page.where(line)))
        return None
    return KINDS[kind].parse(values, Lines(line, _key_lines(node, line + 1)), ctx, inline)


def _key_lines(node, first_line: int) -> dict:
    """{key: page line} of a mapping's keys, and {key/subkey: page line} of its mappings' keys."""
    lines: dict = {}
    if not isinstance(node, yaml.MappingNode):
        return lines
    for key, value in node.value:
        lines[str(key.value)] = key.start_mark.line + first_line
        if isinstance(value, yaml.MappingNode):
            for sub, _ in value.value:
                lines[f"{key.value}/{sub.value}"] = sub.start_mark.line + first_line
    return lines
