"""The Markdown parser: markdown-it-py (CommonMark + tables) with dollar math, heading anchors,
and two inline rules of ours, for value references `{{ ... }}` and figure links `[[fig:ID]]`.

The rules only make tokens; resolving happens in render.py, which knows the page and line.
"""
from __future__ import annotations

import re

from markdown_it import MarkdownIt
from markdown_it.rules_inline import StateInline
from mdit_py_plugins.anchors import anchors_plugin
from mdit_py_plugins.dollarmath import dollarmath_plugin

from .schema import FIGURE_ID

_FIG = re.compile(r"\[\[fig:(" + FIGURE_ID.pattern + r")\]\]")


def slugify(title: str) -> str:
    slug = re.sub(r"[^\w\s-]", "", title.lower()).strip()
    return re.sub(r"[\s_-]+", "-", slug) or "section"


def _value_ref(state: StateInline, silent: bool) -> bool:
    """`{{ REF }}` -> value_ref token; `{{! TEXT }}` -> literal token; `{{` unclosed -> ref_error."""
    src, pos = state.src, state.pos
    if not src.startswith("{{", pos):
        return False
    end = src.find("}}", pos + 2)
    newline = src.find("\n", pos + 2)
    if end < 0 or (0 <= newline < end):
        if not silent:
            token = state.push("ref_error", "", 0)
            token.meta = {"offset": pos, "message": "'{{' is not closed by '}}' on the same line"}
        state.pos = pos + 2
        return True
    if not silent:
        inner = src[pos + 2:end]
        if inner.startswith("!"):
            token = state.push("literal", "", 0)
            token.content = inner[1:].strip()
        else:
            token = state.push("value_ref", "", 0)
            token.content = inner.strip()
        token.meta = {"offset": pos}
    state.pos = end + 2
    return True


def _fig_ref(state: StateInline, silent: bool) -> bool:
    match = _FIG.match(state.src, state.pos)
    if not match:
        return False
    if not silent:
        token = state.push("fig_ref", "", 0)
        token.content = match.group(1)
        token.meta = {"offset": state.pos}
    state.pos = match.end()
    return True


def make_parser(raw_html: bool = False) -> MarkdownIt:
    """The page parser; raw HTML is text unless the page opts in (front matter `raw_html: true`)."""
    md = MarkdownIt("commonmark", {"html": raw_html, "typographer": False}).enable(["table", "strikethrough"])
    dollarmath_plugin(md, allow_space=False, allow_digits=False, double_inline=True)
    anchors_plugin(md, min_level=2, max_level=4, slug_func=slugify)
    md.inline.ruler.before("link", "fig_ref", _fig_ref)
    md.inline.ruler.before("link", "value_ref", _value_ref)
    return md
