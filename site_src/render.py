"""Render one page's Markdown: resolve references, build tables and figures, enforce the number rule.

One walk over the token stream, in document order, so receipts, figures and the provenance
table are numbered in the order a reader meets them. Every problem is added to the build's
error list with the page line; rendering goes on so one build reports all of them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from markupsafe import Markup, escape

from .errors import BuildError, FixtureProblem
from .mathml import to_mathml
from .numbers import unbound_numbers
from .rawhtml import html_problems
from .parse import ParseProblem, key_lines, load_yaml
from .pages import Page
from .receipt_html import raw_text, receipt_html
from .receipts import Resolved
from .refgrammar import RefSyntaxError, parse_ref
from .schema import CLAIMS, FIGURE_BLOCK_REQUIRED, FIGURE_ID, TABLE_BLOCK, TRUST, listing
from .resolve import Resolver
from .urls import href



@dataclass
class FigureInfo:
    id: str
    page: Page
    number: str      # "N.M"
    line: int


@dataclass
class Rendered:
    html: str
    values: list = field(default_factory=list)      # (Resolved, display text, receipt id)
    headings: list = field(default_factory=list)    # (id, text) of h2 sections
    files: dict = field(default_factory=dict)       # extra files from figures
    figure_count: int = 0
    drawings: list = field(default_factory=list)    # (Drawing, figure id, line) not yet in `html`

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


def _num_message(number: str) -> str:
    return (f"number {number!r} in prose is not bound to a fixture: write a reference {{{{ FILE:LINE }}}}"
            f" or mark it as a literal {{{{! {number} }}}}")


def check_prose(text: str, where: str, errors) -> None:
    for number in unbound_numbers(text):
        errors.add(BuildError(_num_message(number.text), where))


def parse_fmt(text: str) -> tuple[str, bool]:
    ref = parse_ref(f"x | fmt {text}")
    return ref.spec, ref.minus


class PageRenderer:
    def __init__(self, page: Page, md, resolver: Resolver, errors, figures: dict, env, root: Path):
        self.page, self.md, self.resolver, self.errors = page, md, resolver, errors
        self.figures, self.env, self.root = figures, env, root
        self.prefix = "../" * page.depth
        self.out = Rendered("")
        self.fig_order = 0
        self.in_link = 0   # depth of link text being walked
        self.line = 1      # the page line being rendered, for an internal error's location
        self.lines: dict = {}   # key -> page line, of the block being read

    # -- values ------------------------------------------------------------------------------
    def receipt(self, resolved: Resolved, text: str) -> Markup:
        rid = f"ref-{len(self.out.values) + 1}"
        self.out.values.append((resolved, text, rid))
        return receipt_html(resolved, text, rid, self.prefix)

    def resolve(self, text: str, line: int) -> Resolved | None:
        where = self.page.where(line)
        try:
            return self.resolver.resolve(text)
        except RefSyntaxError as exc:
            self.errors.add(BuildError(f"{{{{ {text} }}}}: {exc}", where))
        except FixtureProblem as exc:
            self.errors.add(BuildError(f"{{{{ {text} }}}}: {exc.message}", where, exc.fixture))
        return None

    def inline_value(self, text: str, line: int) -> Markup:
        self.last_text = "?"
        resolved = self.resolve(text, line)
        if resolved is None:
            return Markup('<span class="ref-missing">?</span>')
        if resolved.is_block:
            self.errors.add(BuildError(
                f"{{{{ {text} }}}}: resolves to a block of {len(resolved.items)} entries; show it with a"
                f" ```table block, or add an aggregate stage", self.page.where(line), resolved.location))
            return Markup('<span class="ref-missing">?</span>')
        try:
            display = resolved.display
        except ValueError as exc:
            self.errors.add(BuildError(f"{{{{ {text} }}}}: cannot format: {exc}", self.page.where(line),
                                       resolved.location))
            return Markup('<span class="ref-missing">?</span>')
        self.last_text = display
        return self.receipt(resolved, display)

    # -- the walk ----------------------------------------------------------------------------
    def render(self) -> Rendered:
        tokens = parsed(self.page, self.md, self.env)
        last_level = 1
        heading = None
        for index, token in enumerate(tokens):
            line = token.map[0] + 1 if token.map else 1
            self.line = line
            if token.type == "heading_open":
                level = int(token.tag[1])
                if level == 1:
                    self.errors.add(BuildError("use '##' and below: the page title is the page's only h1",
                                               self.page.where(line)))
                elif level > last_level + 1:
                    self.errors.add(BuildError(f"heading level jumps from h{last_level} to h{level}",
                                               self.page.where(line)))
                last_level = level
                if level == 2:
                    heading = (token.attrGet("id"), tokens[index + 1])
            elif token.type == "inline":
                self.walk_inline(token.children or [], token.content, line)
                if heading is not None and heading[1] is token:
                    # after the walk, so a reference in the heading shows its value in the contents too
                    self.out.headings.append((heading[0], _plain_text(token.children or []).strip()))
                    heading = None
            elif token.type == "fence" and token.info.strip() in ("table", "figure"):
                kind = token.info.strip()
                token.meta["html"] = (self.table_block if kind == "table" else self.figure_block)(token.content, line)
            elif token.type in ("math_block", "math_block_label"):
                # a wide equation scrolls inside its own box, which keyboards must reach
                token.meta["html"] = self.partial("math_block.html", mathml=self.math(token.content, True, line))
            elif token.type == "html_block":
                self.raw_html(token.content, line)
        html = self.md.renderer.render(tokens, self.md.options, self.env)
        self.out.html = html
        return self.out

    def walk_inline(self, children, src: str, first_line: int) -> None:
        breaks = 0
        for child in children:
            line = first_line + breaks
            self.line = line
            if child.type == "link_open":
                self.in_link += 1
            elif child.type == "link_close":
                self.in_link -= 1
            elif child.type in ("softbreak", "hardbreak"):
                breaks += 1
            elif child.type == "text":
                check_prose(child.content, self.page.where(line), self.errors)
            elif child.type == "html_inline":
                self.raw_html(child.content, line)
            elif child.type in ("value_ref", "literal", "fig_ref", "ref_error"):
                line = first_line + src[: child.meta["offset"]].count("\n")
                if child.type == "value_ref" and self.in_link:
                    # the receipt is itself a link; HTML forbids a link inside a link
                    self.errors.add(BuildError(f"{{{{ {child.content} }}}}: a reference cannot sit inside link text;"
                                               " move it out of the [...](...)", self.page.where(line)))
                    child.meta["html"] = Markup("?")
                elif child.type == "value_ref":
                    child.meta["html"] = self.inline_value(child.content, line)
                    child.meta["text"] = self.last_text
                elif child.type == "literal":
                    if not child.content:
                        self.errors.add(BuildError("empty literal {{! }}", self.page.where(line)))
                    child.meta["html"] = escape(child.content)
                elif child.type == "fig_ref":
                    child.meta["html"] = self.fig_link(child.content, line)
                else:
                    self.errors.add(BuildError(child.meta["message"], self.page.where(line)))
                    child.meta["html"] = Markup("{{")
            elif child.type in ("math_inline", "math_inline_double"):
                child.meta["html"] = self.math(child.content, child.type == "math_inline_double", line)
            if child.children:
                self.walk_inline(child.children, src, line)

    # -- pieces ------------------------------------------------------------------------------
    def raw_html(self, html: str, line: int) -> None:
        """Only pages with `raw_html: true` get html tokens at all; their HTML is still checked."""
        for problem in html_problems(html):
            self.errors.add(BuildError(f"raw HTML: {problem}", self.page.where(line)))
        check_prose(_strip_tags(html), self.page.where(line), self.errors)

    def math(self, latex: str, display: bool, line: int) -> Markup:
        try:
            return Markup(to_mathml(latex.strip(), display))
        except Exception as exc:  # latex2mathml raises several exception types for bad input
            self.errors.add(BuildError(f"math does not convert to MathML: {exc}", self.page.where(line)))
            return Markup("")

    def fig_link(self, fig_id: str, line: int) -> Markup:
        info = self.figures.get(fig_id)
        if info is None:
            self.errors.add(BuildError(f"[[fig:{fig_id}]]: no figure with id {fig_id!r} on any page",
                                       self.page.where(line)))
            return Markup(escape(f"Fig. {fig_id}"))
        target = "" if info.page is self.page else href(self.prefix, info.page.url)
        return self.partial("fig_link.html", target=target, id=fig_id, number=info.number)

    def inline_fragment(self, text: str, line: int) -> Markup:
        """Render a short Markdown string (a caption) with references, checking its numbers."""
        tokens = self.md.parseInline(text, self.env)
        for token in tokens:
            self.walk_inline(token.children or [], text, line)
        return Markup(self.md.renderer.render(tokens, self.md.options, self.env))

    def block_spec(self, body: str, line: int, kind: str, keys) -> dict | None:
        """A block's YAML body; its keys' lines are kept for the errors that follow (`key_at`)."""
        self.lines = {}
        try:
            spec, node = load_yaml(body, first_line=line + 1)
            self.lines = key_lines(node, line + 1)
        except ParseProblem as exc:
            self.errors.add(BuildError(f"{kind} block: {exc.message}", self.page.where(exc.line or line)))
            return None
        if not isinstance(spec, dict):
            self.errors.add(BuildError(f"{kind} block must be a YAML mapping", self.page.where(line)))
            return None
        if keys is not None:
            for key in spec:
                if key not in keys:
                    self.errors.add(BuildError(f"{kind} block: unknown key {key!r} (known: {', '.join(keys)})",
                                               self.page.where(self.key_at(key, line))))
        return spec

    def key_at(self, key: str, line: int) -> int:
        """The page line of a key of the block being read (the line after the fence if absent)."""
        return self.lines.get(key, line + 1)

    def table_block(self, body: str, line: int) -> Markup:
        spec = self.block_spec(body, line, "table", TABLE_BLOCK)
        if spec is None:
            return Markup("")
        source = spec.get("source")
        src_line = self.key_at("source", line)
        if not isinstance(source, str):
            self.errors.add(BuildError("table block needs 'source:' (a reference)", self.page.where(line)))
            return Markup("")
        resolved = self.resolve(source, src_line)
        if resolved is None:
            return Markup("")
        if not resolved.is_block:
            self.errors.add(BuildError(f"table source {source!r} is a single value, not a block",
                                       self.page.where(src_line), resolved.location))
            return Markup("")
        spec_fmt, minus = resolved.spec, resolved.minus
        if spec.get("fmt") is not None:
            try:
                spec_fmt, minus = parse_fmt(str(spec["fmt"]))
            except RefSyntaxError as exc:
                self.errors.add(BuildError(f"table fmt: {exc}", self.page.where(self.key_at("fmt", line))))
        rows = _table_rows(resolved, spec.get("fields"))
        if isinstance(rows, str):
            self.errors.add(BuildError(f"table: {rows}", self.page.where(line), resolved.location))
            return Markup("")
        header, records = rows
        columns = spec.get("columns", header)
        if not isinstance(columns, list) or len(columns) != len(header):
            self.errors.add(BuildError(f"table: 'columns' must list {len(header)} headers ({', '.join(header)})",
                                       self.page.where(self.key_at("columns", line))))
            return Markup("")
        sort = spec.get("sort")
        if sort is not None:
            records = self._sort(records, str(sort), header, [str(c) for c in columns],
                                 self.key_at("sort", line))
        caption = spec.get("caption")
        caption_html = (self.inline_fragment(str(caption), self.key_at("caption", line))
                        if caption else None)
        rows_out = []
        for record in records:
            cells = []
            for cell in record:
                numeric = isinstance(cell, Resolved) and isinstance(cell.value, (int, float)) and not isinstance(cell.value, bool)
                if isinstance(cell, Resolved):
                    if cell.is_block or cell.value is None:
                        self.errors.add(BuildError(f"table cell at {cell.location} holds {'a block' if cell.is_block else 'null'}",
                                                   self.page.where(line), cell.location))
                        inner = Markup("?")
                    elif isinstance(cell.value, float) and cell.value != cell.value:
                        self.errors.add(BuildError("table cell is NaN", self.page.where(line), cell.location))
                        inner = Markup("?")
                    else:
                        shown = Resolved(cell.value, cell.source, cell.line, cell.expression, cell.href,
                                         spec_fmt, minus, cell.items) if numeric else cell
                        try:
                            inner = self.receipt(shown, shown.display) if numeric else escape(shown.display)
                        except ValueError as exc:
                            self.errors.add(BuildError(f"table cell: {exc}", self.page.where(line), cell.location))
                            inner = Markup("?")
                else:
                    inner = escape(str(cell))
                cells.append({"html": inner, "numeric": numeric})
            rows_out.append(cells)
        return self.partial("table.html", caption=caption_html, columns=[str(c) for c in columns], rows=rows_out,
                            link=self.prefix + resolved.href if resolved.href else "", location=resolved.location)

    def partial(self, name: str, **context) -> Markup:
        """An HTML fragment from templates/partials/ (escaped by Jinja, never by hand)."""
        return Markup(self.env["jinja"].get_template(f"partials/{name}").render(**context))

    def _sort(self, records, sort: str, header, columns, line):
        name = sort.lstrip("-")
        if name not in header and name not in columns:
            self.errors.add(BuildError(f"table sort: {name!r} is not a column ({', '.join(columns)})", self.page.where(line)))
            return records
        i = columns.index(name) if name in columns else header.index(name)

        keys = []
        for record in records:
            cell = record[i]
            value = cell.value if isinstance(cell, Resolved) else cell
            if isinstance(value, str):
                keys.append((1, 0, value))
            elif isinstance(value, (int, float)) and not isinstance(value, bool) and value == value:
                keys.append((0, value, ""))
            else:
                at = cell.location if isinstance(cell, Resolved) else ""
                self.errors.add(BuildError(f"table sort: column {name!r} holds {raw_text(value)}, which has no"
                                           " order among numbers and text", self.page.where(line), at))
                return records
        order = sorted(range(len(records)), key=keys.__getitem__, reverse=sort.startswith("-"))
        return [records[k] for k in order]

    def figure_block(self, body: str, line: int) -> Markup:
        spec = self.block_spec(body, line, "figure", None)
        if spec is None:
            return Markup("")
        fig_id = spec.get("id")
        info = self.figures.get(fig_id) if isinstance(fig_id, str) else None
        if info is None or info.page is not self.page or info.line != line:
            return Markup("")  # the pre-pass (collect_figures) already reported what is wrong
        self.fig_order += 1
        self.out.figure_count += 1
        from . import figures as figures_module   # imported by the first figure: a prose page needs none of it
        render_figure, FigureContext = figures_module.render_figure, figures_module.FigureContext
        ctx = FigureContext(
            resolve_path=self.resolver.path_for,
            resolve_ref=self.resolver.resolve,
            receipt_html=lambda resolved, text: str(self.receipt(resolved, text)),
            cache_dir=self.root / ".cache" / "figures",
            asset_prefix=self.prefix + "assets/",
            read_rows=self.resolver.rows,
        )
        try:
            rendered = render_figure(spec["kind"], spec, ctx, deferred=True)
        except FixtureProblem as exc:
            self.errors.add(BuildError(f"figure {fig_id}: {exc.message}", self.page.where(line), exc.fixture))
            return Markup("")
        except figures_module.FigureError as exc:
            self.errors.add(BuildError(f"figure {fig_id}: {exc.message}", self.page.where(line)))
            return Markup("")
        except Exception as exc:  # a figure kind's own error: report it at the block, keep building
            self.errors.add(BuildError(f"figure {fig_id}: {type(exc).__name__}: {exc}", self.page.where(line)))
            return Markup("")
        known = {id(v[0]) for v in self.out.values}
        for source in getattr(rendered, "sources", []) or []:
            if id(source) not in known:
                self.out.values.append((source, _display_or_raw(source), ""))
        self.out.files.update(getattr(rendered, "files", {}) or {})
        if getattr(rendered, "drawing", None) is not None:
            self.out.drawings.append((rendered.drawing, fig_id, line))
        caption = self.inline_fragment(str(spec["caption"]), self.key_at("caption", line))
        trust = spec.get("trust") or self.page.meta.get("trust")
        template = self.env["jinja"].get_template("partials/figure.html")
        return Markup(template.render(id=fig_id, number=info.number, body=Markup(rendered.body_html),
                                      caption=caption, claim=spec["claim"], trust=trust))


def _plain_text(children) -> str:
    """The text a reader sees in an inline run: words, code, literals and resolved values."""
    parts = []
    for child in children:
        if child.type in ("text", "code_inline", "literal"):
            parts.append(child.content)
        elif "text" in child.meta:
            parts.append(child.meta["text"])
        if child.children:
            parts.append(_plain_text(child.children))
    return "".join(parts)


def _display_or_raw(resolved: Resolved) -> str:
    try:
        return resolved.display
    except ValueError:
        return str(resolved.value)


def _strip_tags(html: str) -> str:
    import re
    return re.sub(r"<[^>]*>", " ", html)


def _table_rows(resolved: Resolved, fields):
    """(header, records) of a block; a record is a list of cells (Resolved or plain key text)."""
    items = resolved.items
    if not items:
        return "the block is empty"
    listish = isinstance(resolved.value, list)
    nested = [r for _, r in items if r.items]
    if nested and len(nested) != len(items):
        return "mixes objects and single values; choose a block whose entries are alike"
    if nested:
        names = fields or [k for k, _ in items[0][1].items]
        if not isinstance(names, list):
            return "'fields' must be a list"
        header = ([] if listish else ["key"]) + [str(n) for n in names]
        records = []
        for key, r in items:
            by_key = {str(k): v for k, v in r.items}
            missing = [n for n in names if str(n) not in by_key]
            if missing:
                return f"entry {key!r} ({r.location}) lacks field(s) {', '.join(map(str, missing))}"
            records.append(([] if listish else [str(key)]) + [by_key[str(n)] for n in names])
        return header, records
    if listish:
        return ["#", "value"], [[str(i + 1), r] for i, (_, r) in enumerate(items)]
    return ["key", "value"], [[str(k), r] for k, r in items]


def parsed(page: Page, md, env) -> list:
    """The page's tokens: parsed on first use and kept, so each page is parsed once per build."""
    if page.tokens is None:
        page.tokens = md.parse(page.body, env)
    return page.tokens


def collect_figures(page: Page, md, env, errors, figures: dict) -> None:
    """Pre-pass: number every figure block of a page, so [[fig:ID]] may point forward or to another page."""
    order = 0
    for token in parsed(page, md, env):
        if token.type != "fence" or token.info.strip() != "figure":
            continue
        line = token.map[0] + 1
        try:
            spec, node = load_yaml(token.content, first_line=line + 1)
        except ParseProblem:
            spec, node = None, None
        lines = key_lines(node, line + 1)
        if not isinstance(spec, dict):
            errors.add(BuildError("figure block must be a YAML mapping", page.where(line)))
            continue
        missing = [k for k in FIGURE_BLOCK_REQUIRED if not spec.get(k)]
        if missing:
            errors.add(BuildError(f"figure block lacks {', '.join(missing)}", page.where(line)))
            continue
        fig_id = spec["id"]
        if not isinstance(fig_id, str) or not FIGURE_ID.fullmatch(fig_id):
            errors.add(BuildError(f"figure id {fig_id!r}: use letters, digits, '-' and '_'", page.where(line)))
            continue
        if spec["claim"] not in CLAIMS:
            errors.add(BuildError(f"figure {fig_id}: unknown claim {spec['claim']!r}: use one of "
                                  + listing(CLAIMS), page.where(lines.get("claim", line + 1))))
        if spec.get("trust") is not None and spec["trust"] not in TRUST:
            errors.add(BuildError(f"figure {fig_id}: unknown trust {spec['trust']!r}: use one of {listing(TRUST)}",
                                  page.where(lines.get("trust", line + 1))))
        if fig_id in figures:
            errors.add(BuildError(f"figure id {fig_id!r} is already used at {figures[fig_id].page.where(figures[fig_id].line)}",
                                  page.where(line)))
            continue
        order += 1
        figures[fig_id] = FigureInfo(fig_id, page, f"{page.number}.{order}", line)
