"""The Markdown parser: markdown-it-py (CommonMark + tables) with dollar math, heading anchors,
and two inline rules of ours, for value references `{{ ... }}` and figure links `[[fig:ID]]`.

`site_plugin` registers both kinds of rule. The parse rules only make tokens; resolving happens in
render.py's page walk, which knows the page and line and leaves each token's HTML in
token.meta["html"] for the render rules.
"""
from __future__ import annotations

import re

from markdown_it import MarkdownIt
from markdown_it.rules_inline import StateInline
from mdit_py_plugins.anchors import anchors_plugin
from mdit_py_plugins.dollarmath import dollarmath_plugin

from .schema import FIGURE_ID
from .tablewrap import install_markdown_rules

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


def site_plugin(md: MarkdownIt) -> None:
    """The site's markdown-it plugin: registers the parse rules for `{{ }}` and `[[fig:]]` and the
    render rules of every token the page walk fills (references, literals, figure links, math,
    table and figure fences, focusable code blocks), in one place."""
    md.inline.ruler.before("link", "fig_ref", _fig_ref)
    md.inline.ruler.before("link", "value_ref", _value_ref)
    _render_rules(md)


def _render_rules(md) -> None:
    """Tokens whose HTML the page walk (render.PageRenderer) prepared render from token.meta['html']."""
    def from_meta(self, tokens, idx, options, env):
        return str(tokens[idx].meta.get("html", ""))

    default_fence = md.renderer.rules.get("fence")
    default_code = md.renderer.rules.get("code_block")

    def focusable(html: str) -> str:
        # a code block scrolls sideways when wide; keyboard users must be able to reach it
        return html.replace("<pre>", '<pre tabindex="0">', 1)

    def fence(self, tokens, idx, options, env):
        if "html" in tokens[idx].meta:
            return str(tokens[idx].meta["html"])
        return focusable(default_fence(tokens, idx, options, env))

    def code_block(self, tokens, idx, options, env):
        return focusable(default_code(tokens, idx, options, env))

    for name in ("value_ref", "literal", "fig_ref", "ref_error", "math_inline", "math_inline_double",
                 "math_block", "math_block_label"):
        md.add_render_rule(name, from_meta)
    md.add_render_rule("fence", fence)
    md.add_render_rule("code_block", code_block)
    install_markdown_rules(md)  # pipe tables open the site's one table wrapper


def make_parser(raw_html: bool = False) -> MarkdownIt:
    """The page parser; raw HTML is text unless the page opts in (front matter `raw_html: true`)."""
    md = MarkdownIt("commonmark", {"html": raw_html, "typographer": False}).enable(["table", "strikethrough"])
    dollarmath_plugin(md, allow_space=False, allow_digits=False, double_inline=True)
    anchors_plugin(md, min_level=2, max_level=4, slug_func=slugify)
    md.use(site_plugin)
    return md
