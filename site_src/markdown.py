"""The Markdown of a page: markdown-it-py (CommonMark + tables) with dollar math, heading anchors and
the site plugin, which owns every rule of ours, parse and render alike:

- parse rules: `{{ REF }}` value references and `{{! TEXT }}` literals, `[[fig:ID]]` figure links,
  `[[term:ID]]` glossary terms (inline); fences of a block kind become `<kind>_block` tokens carrying the block, parsed once
  and checked against its schema (core, site_src/blocks/); every inline token learns its page
  line (core); every inline token's children open with a `robust_check` token, whose render rule
  runs the robustness rule over what a reader reads of them (core, site_src/robust.py);
- render rules: one per token type (site_src/render.py, and each block kind's in site_src/blocks/),
  each taking what it needs (the page, its resolver, the error list, the figure numbers, the
  templates) from `env["page"]`, a render.PageContext.

A page is parsed once (`parse_page`, stage number) and rendered once (`render_page`, stage render).
"""
from __future__ import annotations

import re
from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore
from markdown_it.rules_inline import StateInline
from markdown_it.token import Token
from mdit_py_plugins.anchors import anchors_plugin
from mdit_py_plugins.dollarmath import dollarmath_plugin

from . import blocks
from .pages import Parsed
from .render import RULES, PageContext, Rendered
from .schema import FIGURE_ID
from .tablewrap import install_markdown_rules

_FIG = re.compile(r"\[\[fig:(" + FIGURE_ID.pattern + r")\]\]")
_TERM = re.compile(r"\[\[term:([^\]|\n]+?)(?:\|([^\]\n]+))?\]\]")


def slugify(title: str) -> str:
    """A heading's anchor id."""
    slug = re.sub(r"[^\w\s-]", "", title.lower()).strip()
    return re.sub(r"[\s_-]+", "-", slug) or "section"


# ---------------------------------------------------------------- parse rules

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
            token.meta = {"lines": src.count("\n", 0, pos), "message": "'{{' is not closed by '}}' on the same line"}
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
        # lines into the paragraph; inside link text a receipt (itself a link) cannot go
        token.meta = {"lines": src.count("\n", 0, pos), "in_link": state.linkLevel > 0}
    state.pos = end + 2
    return True


def _fig_ref(state: StateInline, silent: bool) -> bool:
    """`[[fig:ID]]` -> fig_ref token."""
    match = _FIG.match(state.src, state.pos)
    if not match:
        return False
    if not silent:
        token = state.push("fig_ref", "", 0)
        token.content = match.group(1)
        token.meta = {"lines": state.src.count("\n", 0, state.pos)}
    state.pos = match.end()
    return True


def _term_ref(state: StateInline, silent: bool) -> bool:
    """`[[term:ID]]` or `[[term:ID|words shown]]` -> term_ref token (site_src/glossary.py)."""
    match = _TERM.match(state.src, state.pos)
    if not match:
        return False
    if not silent:
        token = state.push("term_ref", "", 0)
        token.content = match.group(1).strip()
        token.meta = {"lines": state.src.count("\n", 0, state.pos), "shown": (match.group(2) or "").strip()}
    state.pos = match.end()
    return True


def _blocks(state: StateCore) -> None:
    """A fence whose info names a block kind (```table, ```figure) becomes a `<kind>_block` token
    holding the block, parsed and checked once (site_src/blocks/)."""
    ctx = state.env["page"]
    for token in state.tokens:
        kind = token.info.strip() if token.type == "fence" else ""
        if kind in blocks.KINDS:
            token.type = f"{kind}_block"
            token.meta["block"] = blocks.parse(kind, token.content, token.map[0] + 1, ctx,
                                               lambda text, line: parse_caption(state.md, text, line, ctx))


def _lines(state: StateCore) -> None:
    """Every inline token's children learn their page line (`meta["line"]`), where their render
    rules report a problem."""
    for token in state.tokens:
        if token.type == "inline" and token.children:
            _stamp(token.children, token.map[0] + 1 if token.map else 1)


def _robust(state: StateCore) -> None:
    """Every inline token's children (a paragraph, a heading, a table cell, a caption, a finding)
    open with a `robust_check` token: its render rule reads them all, as the reader will, and
    checks every robustness claim there (render.robust_check, site_src/robust.py)."""
    for token in state.tokens:
        if token.type == "inline" and token.children:
            check = Token("robust_check", "", 0)
            check.meta = {"line": token.children[0].meta.get("line", 1) if token.children[0].meta else 1}
            token.children.insert(0, check)


def _stamp(children, first: int) -> None:
    breaks = 0
    for child in children:
        if child.type in ("softbreak", "hardbreak"):
            breaks += 1
        line = first + (child.meta["lines"] if child.meta and "lines" in child.meta else breaks)
        child.meta = {**(child.meta or {}), "line": line}
        if child.children:
            _stamp(child.children, line)


def site_plugin(md: MarkdownIt) -> None:
    """The site's markdown-it plugin: the parse rules of references, figure links and blocks, and
    the render rule of every token the site renders its own way, in one place."""
    md.inline.ruler.before("link", "fig_ref", _fig_ref)
    md.inline.ruler.before("link", "term_ref", _term_ref)
    md.inline.ruler.before("link", "value_ref", _value_ref)
    md.core.ruler.after("block", "site_blocks", _blocks)
    md.core.ruler.push("site_lines", _lines)
    md.core.ruler.push("site_robust", _robust)
    for name, rule in RULES.items():
        md.add_render_rule(name, rule)
    for kind, module in blocks.KINDS.items():
        md.add_render_rule(f"{kind}_block", module.render)
    install_markdown_rules(md)  # pipe tables open the site's one table wrapper


def make_parser(raw_html: bool = False) -> MarkdownIt:
    """The page parser; raw HTML is text unless the page opts in (front matter `raw_html: true`)."""
    md = MarkdownIt("commonmark", {"html": raw_html, "typographer": False}).enable(["table", "strikethrough"])
    dollarmath_plugin(md, allow_space=False, allow_digits=False, double_inline=True)
    anchors_plugin(md, min_level=2, max_level=4, slug_func=slugify)
    md.use(site_plugin)
    return md


# ---------------------------------------------------------------- a page, parsed once and rendered once

def parse_page(page, md: MarkdownIt, errors) -> Parsed:
    """The page parsed, on first use, and kept (page.parsed): each page is parsed once per build.
    A block's problems are added to `errors` as it is parsed."""
    if page.parsed is None:
        tokens = md.parse(page.body, {"page": PageContext(page, errors)})
        figures = [t.meta["block"] for t in tokens if t.type == "figure_block" and t.meta["block"] is not None]
        page.parsed = Parsed(tokens, figures)
    return page.parsed


def render_page(md: MarkdownIt, ctx: PageContext) -> Rendered:
    """The page's body HTML, with every receipt, heading and figure it holds (in ctx.out)."""
    parsed = parse_page(ctx.page, md, ctx.errors)
    ctx.out.figures = parsed.figures
    ctx.out.html = md.renderer.render(parsed.tokens, md.options, {"page": ctx})
    ctx.glossary_warnings()
    return ctx.out


def parse_caption(md: MarkdownIt, text: str, line: int, ctx) -> list:
    """A block's caption (Markdown on one page line), parsed as inline tokens at that line."""
    tokens = md.parseInline(text, {"page": ctx})
    for token in tokens:
        for child in _flatten(token.children or []):
            child.meta["line"] += line - 1
    return tokens


def _flatten(children):
    for child in children:
        yield child
        yield from _flatten(child.children or [])
