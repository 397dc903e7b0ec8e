"""One vocabulary in the prose a reader reads (issue 27, item 4): no name from code or data
(`mlp_L0`, `n_effective`, `bag_of_words`) written as a word, no bare abbreviation of a trap's name,
no percentage more precise than its data can be.

The prose is the text of each page's <main> outside code, preformatted text, tables, figures and
quotations: a frozen registration's own words (marked `data-verbatim`) and a text value quoted
from a fixture with its receipt (`.ref-text`, which sets a code name as code itself). Source views
under /source/ show files as they are and are not prose.
"""
from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from site_src.typography import is_identifier
from sitebuild import built_pages, html_file

NOT_PROSE = {"code", "pre", "kbd", "samp", "table", "figure", "svg", "math", "script", "style",
             "nav", "template"}
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr"}
WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+")
# the trap's name is "off-distribution gate"; "offdist" is the code's abbreviation (a record's
# hyphenated id, planted-v2-offdist-gate, is a name and stays)
ABBREVIATION = re.compile(r"(?<![\w-])offdist(?![\w-])", re.I)
# a share of pairs or components: more than one decimal place claims what the data cannot carry
OVERPRECISE = re.compile(r"\d+\.\d{2,}\s?%")


class _Prose(HTMLParser):
    """The text of <main> that is prose: outside NOT_PROSE elements, [data-verbatim] and .ref-text."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.open: list[bool] = []   # per open element: whether it or an ancestor is not prose
        self.in_main = False
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in VOID:
            return
        names = dict(attrs)
        skip = (tag in NOT_PROSE or "data-verbatim" in names
                or "ref-text" in (names.get("class") or "").split())
        self.open.append(skip or (self.open[-1] if self.open else False))
        if tag == "main":
            self.in_main = True

    def handle_startendtag(self, tag, attrs):
        pass

    def handle_endtag(self, tag):
        if tag in VOID or not self.open:
            return
        self.open.pop()
        if tag == "main":
            self.in_main = False

    def handle_data(self, data):
        if self.in_main and not (self.open and self.open[-1]):
            self.text.append(data)


def prose(html: str) -> str:
    parser = _Prose()
    parser.feed(html)
    return " ".join(" ".join(parser.text).split())


def around(text: str, match: re.Match) -> str:
    return "…" + text[max(0, match.start() - 60):match.end() + 30] + "…"


@pytest.fixture(scope="module")
def prose_pages(site_dir) -> dict[str, str]:
    return {path: prose(html_file(site_dir, path).read_text("utf-8"))
            for path in built_pages(site_dir) if not path.startswith("source/")}


def test_no_name_from_code_or_data_is_written_as_a_word(prose_pages):
    found = [f"/{path}: {m.group()} in {around(text, m)}"
             for path, text in prose_pages.items() for m in WORD.finditer(text)]
    assert not found, "names from code or data in prose (write the words, or set the name as code):\n" + \
        "\n".join(found)


def test_a_trap_keeps_its_one_name_and_a_share_its_precision(prose_pages):
    found = [f"/{path}: {m.group()} in {around(text, m)}"
             for path, text in prose_pages.items()
             for pattern in (ABBREVIATION, OVERPRECISE) for m in pattern.finditer(text)]
    assert not found, "\n".join(found)


def test_the_check_reads_prose_and_skips_what_is_quoted():
    """The reader of these tests: a name in prose is found; the same name as code, in a table, in a
    registration's words or in a quoted value is not; and a nested element keeps its parent's kind."""
    page = ("<html><body><p>outside main mlp_L0</p><main><p>ranks mlp_L0 first</p>"
            "<p><code>attn_L5</code> and <a class='ref ref-text'>bag_of_words</a></p>"
            "<table><tr><td>n_effective</td></tr></table><p data-verbatim>the <em>head_cosine</em></p>"
            "<p>after<br>the break count_vowels</p></main></body></html>")
    text = prose(page)
    assert [m.group() for m in WORD.finditer(text)] == ["mlp_L0", "count_vowels"], text
    assert is_identifier("bag_of_words") and is_identifier("attn_L5")
    assert not is_identifier("off-distribution") and not is_identifier("_private") and not is_identifier("x")
