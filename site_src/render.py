"""The site plugin's render rules (registered by site_src/markdown.py): each turns one kind of
token into HTML, taking what it needs from the page being rendered, `env["page"]` (a
`PageContext`: the page, its resolver, the build's error list, the figure numbers, the templates).

markdown-it calls them in document order, so receipts and the provenance table are numbered in
the order a reader meets them. Every problem is added to the error list with its page line;
rendering goes on, so one build reports all of them. The fenced blocks' rules are in
site_src/blocks/.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
from markdown_it.common.utils import escapeHtml
from markdown_it.renderer import RendererHTML
from markupsafe import Markup, escape

from . import robust, visible
from .errors import BuildError, Errors, FixtureProblem
from .glossary import PAGE as GLOSSARY_PAGE, Glossary, Usage, unknown_term
from .mathml import to_mathml
from .numbers import unbound_numbers
from .pages import Page
from .rawhtml import html_problems
from .receipt_html import receipt_html
from .receipts import Resolved
from .refgrammar import RefSyntaxError, parse_ref
from .resolve import Resolver
from .urls import href


@dataclass
class Rendered:
    """What rendering one page gave: its body HTML and what the page template and checks need."""

    html: str
    values: list = field(default_factory=list)      # (Resolved, display text, receipt id)
    headings: list = field(default_factory=list)    # (id, text) of h2 sections
    files: dict = field(default_factory=dict)       # extra files from figures
    figure_count: int = 0
    drawings: list = field(default_factory=list)    # (Drawing, figure id, line) not yet in `html`
    figures: list = field(default_factory=list)     # the page's figure blocks (blocks.figure.FigureBlock)
    findings: list = field(default_factory=list)    # (number, line, claim, [Resolved]) of each finding shown

    def complete(self, page, errors) -> None:
        """Put each figure's drawing in place (waiting for it); one that failed is reported at
        its block's line, and its place stays empty."""
        for drawing, fig_id, line in self.drawings:
            try:
                self.html = drawing.put_into(self.html, self.files)
            except Exception as exc:  # what drawing raised: reported as render_figure's errors are
                errors.add(BuildError(f"figure {fig_id}: {type(exc).__name__}: {exc}", page.where(line)))
                self.html = self.html.replace(drawing.token, "", 1)
        self.drawings = []


@dataclass
class PageContext:
    """The page being parsed or rendered: what the plugin's rules find in `env["page"]`. Parsing
    needs the page and the error list; rendering the rest."""

    page: Page
    errors: Errors
    resolver: Resolver | None = None
    figures: dict = field(default_factory=dict)    # figure id -> blocks.figure.FigureInfo
    jinja: jinja2.Environment | None = None       # the site's templates: templates/partials/
    root: Path | None = None                       # the repository (the figure cache is under it)
    out: Rendered = field(default_factory=lambda: Rendered(""))
    line: int = 1          # the page line being rendered, for an internal error's location
    level: int = 1         # the level of the last heading
    heading: list | None = None   # the words of the h2 being rendered, for the page's contents
    glossary: Glossary = field(default_factory=Glossary)   # content/glossary.yaml (site_src/glossary.py)
    pages: dict = field(default_factory=dict)      # content-relative path -> Page: what a block may link to
    usage: Usage = field(default_factory=Usage)    # where the page first uses and first links each term
    in_heading: bool = False   # a heading names a term without using it (no glossary warning)
    in_link: int = 0           # so does a link's text (a page's title), at this depth

    def glossary_warnings(self) -> None:
        """Warn about each glossary term the page used before linking it (the glossary page defines
        them all)."""
        if self.page.rel != GLOSSARY_PAGE:
            for warning in self.usage.warnings(self.page):
                self.errors.warn(warning)

    @property
    def prefix(self) -> str:
        """The relative URL from the page to the site root."""
        return "../" * self.page.depth

    def error(self, message: str, line: int, fixture: str = "") -> None:
        """Add an error at a page line (and the fixture location it was found at)."""
        self.errors.add(BuildError(message, self.page.where(line), fixture))

    def receipt(self, resolved: Resolved, text: str) -> Markup:
        """The value's receipt element, numbered in reading order and listed for the provenance table."""
        rid = f"ref-{len(self.out.values) + 1}"
        self.out.values.append((resolved, text, rid))
        return receipt_html(self.jinja, resolved, text, rid, self.prefix)

    def resolve(self, text: str, line: int) -> Resolved | None:
        """A reference's value, or None with the problem reported at `line`."""
        try:
            return self.resolver.resolve(text)
        except RefSyntaxError as exc:
            self.error(f"{{{{ {text} }}}}: {exc}", line)
        except FixtureProblem as exc:
            self.error(f"{{{{ {text} }}}}: {exc.message}", line, exc.fixture)
        return None

    def partial(self, name: str, **context) -> Markup:
        """An HTML fragment from templates/partials/ (escaped by Jinja, never by hand)."""
        return Markup(self.jinja.get_template(f"partials/{name}").render(**context))

    def words(self, text: str) -> None:
        """`text` is part of the h2 being rendered (its entry in the page's contents)."""
        if self.heading is not None:
            self.heading.append(text)


def token_line(token) -> int:
    """The page line of a token: a block token's map, an inline token's `line` (markdown.py)."""
    if token.map:
        return token.map[0] + 1
    return token.meta.get("line", 1) if token.meta else 1


def page_context(env, token) -> PageContext:
    """The page being rendered, its line set to `token`'s (where an unexpected error is reported)."""
    ctx = env["page"]
    ctx.line = token_line(token)
    return ctx


def check_prose(text: str, where: str, errors) -> None:
    """The number rule: a decimal, percentage or signed number in prose must be a reference."""
    for number in unbound_numbers(text):
        errors.add(BuildError(
            f"number {number.text!r} in prose is not bound to a fixture: write a reference {{{{ FILE:LINE }}}}"
            f" or mark it as a literal {{{{! {number.text} }}}}", where))


def check_field(text: str, where: str, errors) -> None:
    """Prose of the front matter: the number rule, and the robustness rule, which no text
    without references can meet (site_src/robust.py)."""
    check_prose(text, where, errors)
    robust.check_text(text, where, errors)


_MISSING = Markup('<span class="ref-missing">?</span>')


# ---------------------------------------------------------------- inline rules

def value_ref(self, tokens, idx, options, env) -> str:
    """`{{ REF }}`: the resolved value with its receipt (a `?` and an error when it cannot be)."""
    token = tokens[idx]
    ctx, text, line = page_context(env, token), token.content, token_line(token)
    if token.meta.get("in_link"):
        # the receipt is itself a link; HTML forbids a link inside a link
        ctx.error(f"{{{{ {text} }}}}: a reference cannot sit inside link text; move it out of the [...](...)", line)
        return "?"
    shown, html = "?", _MISSING
    resolved = ctx.resolve(text, line)
    if resolved is None:
        pass
    elif resolved.is_block:
        ctx.error(f"{{{{ {text} }}}}: resolves to a block of {len(resolved.items)} entries; show it with a"
                  f" ```table block, or add an aggregate stage", line, resolved.location)
    else:
        try:
            shown = resolved.display
        except ValueError as exc:
            ctx.error(f"{{{{ {text} }}}}: cannot format: {exc}", line, resolved.location)
        else:
            html = ctx.receipt(resolved, shown)
    ctx.words(shown)
    return str(html)


def literal(self, tokens, idx, options, env) -> str:
    """`{{! TEXT }}`: text exempt from the number rule."""
    token = tokens[idx]
    ctx = page_context(env, token)
    if not token.content:
        ctx.error("empty literal {{! }}", token_line(token))
    ctx.words(token.content)
    return str(escape(token.content))


def ref_error(self, tokens, idx, options, env) -> str:
    """A `{{` the parse rule could not close."""
    page_context(env, tokens[idx]).error(tokens[idx].meta["message"], token_line(tokens[idx]))
    return "{{"


def fig_ref(self, tokens, idx, options, env) -> str:
    """`[[fig:ID]]`: a link to the figure, as "Fig. N.M"."""
    token = tokens[idx]
    ctx, fig_id = page_context(env, token), token.content
    info = ctx.figures.get(fig_id)
    if info is None:
        ctx.error(f"[[fig:{fig_id}]]: no figure with id {fig_id!r} on any page", token_line(token))
        return str(escape(f"Fig. {fig_id}"))
    target = "" if info.page is ctx.page else href(ctx.prefix, info.page.url)
    return str(ctx.partial("fig_link.html", target=target, id=fig_id, number=info.number))


def text(self, tokens, idx, options, env) -> str:
    """Prose: the number rule runs over it, the robustness rule over its claims, and the glossary
    notes the terms it uses."""
    token = tokens[idx]
    ctx = page_context(env, token)
    check_prose(token.content, ctx.page.where(ctx.line), ctx.errors)
    if not ctx.in_heading and not ctx.in_link:
        ctx.usage.prose(ctx.glossary, token.content, ctx.line)
    ctx.words(token.content)
    return escapeHtml(token.content)


def robust_check(self, tokens, idx, options, env) -> str:
    """The robustness rule over what a reader reads of these inline tokens (site_src/visible.py):
    each claim needs a share of at least robust.ROBUST_SHARE in its sentence. Renders nothing."""
    ctx = page_context(env, tokens[idx])

    def term_words(token) -> str:
        term = ctx.glossary.terms.get(token.content)
        return token.meta.get("shown") or (term.term if term else token.content)

    def math_text(token) -> str:
        try:
            return visible.html_text(to_mathml(token.content.strip(), token.type != "math_inline"))
        except Exception:  # noqa: BLE001 - the math rule reports what does not convert
            return ""
    for claim in robust.claims(visible.inline_pieces(tokens[idx + 1:], term_words, math_text)):
        check_robust(ctx, claim)
    return ""


def check_robust(ctx: PageContext, claim: robust.Claim) -> None:
    """A robustness claim needs a share of specifications of at least robust.ROBUST_SHARE in its
    sentence (site_src/robust.py). A reference that does not resolve is reported by its own rule."""
    shares = []
    for text in claim.refs:
        try:
            ref = parse_ref(text)
        except RefSyntaxError:
            continue
        if ref.aggregate is not None or not robust.is_share(ref.key):
            continue
        try:
            value = ctx.resolver.resolve(text).value
        except (RefSyntaxError, FixtureProblem):
            continue
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            shares.append((text, value))
    message = robust.problem(claim, shares)
    if message:
        ctx.error(message, claim.line)


def code_inline(self, tokens, idx, options, env) -> str:
    """Code is exempt from the number rule; it still reads in the page's contents, and may use a
    glossary term (`n_effective`)."""
    ctx = page_context(env, tokens[idx])
    if not ctx.in_heading and not ctx.in_link:
        ctx.usage.prose(ctx.glossary, tokens[idx].content, ctx.line)
    ctx.words(tokens[idx].content)
    return RendererHTML.code_inline(self, tokens, idx, options, env)


def term_ref(self, tokens, idx, options, env) -> str:
    """`[[term:ID]]` or `[[term:ID|words]]`: the words linked to the term on the glossary page,
    its definition shown on hover and focus (templates/partials/term_link.html)."""
    token = tokens[idx]
    ctx, line = page_context(env, token), token_line(token)
    term = ctx.glossary.terms.get(token.content)
    shown = token.meta.get("shown") or (term.term if term else token.content)
    ctx.words(shown)
    if term is None:
        ctx.error(unknown_term(token.content, ctx.glossary), line)
        return str(escape(shown))
    ctx.usage.link(term.id, line)
    target = "" if ctx.page.rel == GLOSSARY_PAGE else href(ctx.prefix, "glossary/")
    return str(ctx.partial("term_link.html", href=f"{target}#{term.anchor}", term=term, shown=shown))


def image(self, tokens, idx, options, env) -> str:
    """An image: its alt text is prose (the number rule), and can hold no receipt."""
    ctx = page_context(env, tokens[idx])
    for child in _flat(tokens[idx].children or []):
        if child.type == "text":
            check_prose(child.content, ctx.page.where(token_line(child)), ctx.errors)
            ctx.words(child.content)
        elif child.type == "value_ref":
            ctx.error(f"{{{{ {child.content} }}}}: a reference cannot sit in an image's alt text", token_line(child))
    return RendererHTML.image(self, tokens, idx, options, env)


def _flat(children):
    for child in children:
        yield child
        yield from _flat(child.children or [])


def math(self, tokens, idx, options, env) -> str:
    """`$...$` and `$$...$$` as MathML; a display equation scrolls inside its own focusable box."""
    token = tokens[idx]
    ctx = page_context(env, token)
    block = token.type in ("math_block", "math_block_label")
    try:
        mathml = Markup(to_mathml(token.content.strip(), block or token.type == "math_inline_double"))
    except Exception as exc:  # latex2mathml raises several exception types for bad input
        ctx.error(f"math does not convert to MathML: {exc}", token_line(token))
        mathml = Markup("")
    if block:   # an equation on its own holds no reference (inline math is read with its sentence)
        robust.check_text(visible.html_text(mathml), ctx.page.where(token_line(token)), ctx.errors)
    # a wide equation scrolls inside its own box, which keyboards must reach
    return str(ctx.partial("math_block.html", mathml=mathml) if block else mathml)


def raw_html(self, tokens, idx, options, env) -> str:
    """HTML in a page (only pages with `raw_html: true` get html tokens at all), still checked."""
    token = tokens[idx]
    ctx = page_context(env, token)
    for problem in html_problems(token.content):
        ctx.error(f"raw HTML: {problem}", ctx.line)
    check_prose(re.sub(r"<[^>]*>", " ", token.content), ctx.page.where(ctx.line), ctx.errors)
    if token.type == "html_block":   # inline HTML is read with its paragraph (robust_check)
        robust.check_text(visible.html_text(token.content), ctx.page.where(ctx.line), ctx.errors)
    return token.content


# ---------------------------------------------------------------- block rules

def heading_open(self, tokens, idx, options, env) -> str:
    """The page title is the only h1; levels go down one at a time; an h2 starts a contents entry."""
    token = tokens[idx]
    ctx = page_context(env, token)
    level = int(token.tag[1])
    if level == 1:
        ctx.error("use '##' and below: the page title is the page's only h1", ctx.line)
    elif level > ctx.level + 1:
        ctx.error(f"heading level jumps from h{ctx.level} to h{level}", ctx.line)
    ctx.level = level
    ctx.in_heading = True
    if level == 2:
        ctx.heading = []
    return self.renderToken(tokens, idx, options, env)


def heading_close(self, tokens, idx, options, env) -> str:
    """An h2 ends: its words (references shown as their values) are its contents entry."""
    ctx = env["page"]
    ctx.in_heading = False
    if ctx.heading is not None:
        opened = tokens[idx - 2]   # heading_open, inline, heading_close
        ctx.out.headings.append((opened.attrGet("id"), "".join(ctx.heading).strip()))
        ctx.heading = None
    return self.renderToken(tokens, idx, options, env)


def link_open(self, tokens, idx, options, env) -> str:
    """A link's text names its target (a page's title): no glossary term is used there."""
    env["page"].in_link += 1
    return self.renderToken(tokens, idx, options, env)


def link_close(self, tokens, idx, options, env) -> str:
    """The link's text ends."""
    env["page"].in_link -= 1
    return self.renderToken(tokens, idx, options, env)


def focusable(self, tokens, idx, options, env) -> str:
    """A code block scrolls sideways when wide; keyboard users must be able to reach it."""
    default = RendererHTML.fence if tokens[idx].type == "fence" else RendererHTML.code_block
    return default(self, tokens, idx, options, env).replace("<pre>", '<pre tabindex="0">', 1)


# token type -> render rule (the fenced blocks' rules come from site_src/blocks/)
RULES = {
    "robust_check": robust_check, "value_ref": value_ref, "literal": literal, "ref_error": ref_error, "fig_ref": fig_ref, "term_ref": term_ref,
    "text": text, "code_inline": code_inline, "image": image,
    "math_inline": math, "math_inline_double": math, "math_block": math, "math_block_label": math,
    "html_inline": raw_html, "html_block": raw_html,
    "heading_open": heading_open, "heading_close": heading_close, "link_open": link_open, "link_close": link_close,
    "fence": focusable, "code_block": focusable,
}
