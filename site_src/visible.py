"""What a reader reads of parsed Markdown and raw HTML, for the rules that judge prose by what is
published rather than by how its source is spelled (the robustness rule, site_src/robust.py).

`inline_pieces` turns an inline token's children into `Piece`s of visible text, each with its
page line, and one piece per value reference. Markup adds no text (`*rob*ust` reads "robust",
and so does `rob<!-- -->ust`); what is shown is read: text, a `{{! literal }}`, code, math (the
text of its MathML), a glossary link's words, a figure link's label, an image's alt text, and the
`title`, `alt` and `aria-label` of a link or an HTML element. Entities were decoded by the parser;
invisible characters and look-alike letters are folded by the rule that reads the text
(robust.fold). What CSS hides is still read: the reading errs towards more text, never less.
"""
from __future__ import annotations

from dataclasses import dataclass
from html.parser import HTMLParser

END = "\u2029"    # a break no sentence runs across: text shown apart (alt text, a tooltip, a block of HTML)
# attributes whose text a reader meets (a tooltip, an image's description, what a screen reader says)
SHOWN_ATTRS = ("alt", "title", "aria-label")
SILENT_TAGS = frozenset({"script", "style", "template"})
# elements that end a block: no word or sentence runs across them (<br> only ends the line)
BLOCK_TAGS = frozenset("p div li ul ol dt dd dl tr td th table caption h1 h2 h3 h4 h5 h6 hr section article "
                       "aside header footer nav blockquote pre figure figcaption details summary".split())


@dataclass(frozen=True)
class Piece:
    """A run of visible text on one page line, or (`ref` set) one value reference."""

    text: str
    line: int
    ref: str | None = None


class _Text(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.silent = 0

    def handle_starttag(self, tag, attrs):
        if tag in SILENT_TAGS:
            self.silent += 1
        if tag in BLOCK_TAGS:
            self.parts.append(END)
        elif tag == "br":
            self.parts.append("\n")
        for name, value in attrs:
            if name in SHOWN_ATTRS and value:
                self.parts.append(f"{END}{value}{END}")

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag in SILENT_TAGS:
            self.silent -= 1

    def handle_endtag(self, tag):
        if tag in SILENT_TAGS and self.silent:
            self.silent -= 1
        if tag in BLOCK_TAGS:
            self.parts.append(END)

    def handle_data(self, data):
        if not self.silent:
            self.parts.append(data)


def html_text(fragment: str) -> str:
    """The text a reader meets in an HTML fragment: its text and shown attributes, no comment,
    tag, script or style; END around each block element and each shown attribute."""
    parser = _Text()
    parser.feed(fragment)
    parser.close()
    return "".join(parser.parts)


def inline_pieces(children, term_words, math_text) -> list[Piece]:
    """The visible text of an inline token's children, in reading order.

    `term_words(token)` gives the words a `[[term:ID]]` shows; `math_text(token)` the text of a
    math token's MathML ('' when it does not convert)."""
    out: list[Piece] = []

    def add(text: str, child) -> None:
        if text:
            out.append(Piece(text, (child.meta or {}).get("line", 1)))

    for child in children:
        kind = child.type
        if kind == "value_ref":
            out.append(Piece("", (child.meta or {}).get("line", 1), child.content))
        elif kind in ("text", "code_inline", "literal", "ref_error"):
            add(child.content if kind != "ref_error" else "{{", child)
        elif kind in ("softbreak", "hardbreak"):
            add("\n", child)
        elif kind.startswith("math"):
            add(f" {math_text(child)} ", child)
        elif kind == "term_ref":
            add(term_words(child), child)
        elif kind == "fig_ref":
            add(f"Fig. {child.content}", child)
        elif kind == "image":     # its alt text and its title are read apart from the sentence
            alt = "".join(p.text for p in inline_pieces(child.children or [], term_words, math_text) if p.ref is None)
            add(f"{END}{alt}{END}", child)
            add(f"{END}{child.attrGet('title')}{END}" if child.attrGet("title") else "", child)
        elif kind == "link_open":
            add(f"{END}{child.attrGet('title')}{END}" if child.attrGet("title") else "", child)
        elif kind == "html_inline":
            add(html_text(child.content), child)
        elif child.children:
            out.extend(inline_pieces(child.children, term_words, math_text))
    return out
